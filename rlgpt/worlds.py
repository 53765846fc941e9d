"""Which worlds each part of the project plays: every world seed derived from a run's or a benchmark's seed.

A session with seed ``s`` plays world ``s + i`` first in env ``i`` (its k-th next episode ``s + i + k*n`` with
``n`` envs), and so do RunSkill's test episodes and the learner's evaluations: the learner and the env server play
the seed they are asked, and the caller names the worlds through this module. So two controllers evaluated for the
same purpose with the same seed play the same worlds, whichever service runs them.

Each purpose starts its worlds apart from the others'. The values are the ones results were recorded with (the
benchmarks' held-out worlds, the planner's evaluations of trained policies): changing one changes what a recorded
result would be measured on. One overlap is known: training worker ``w`` starts at ``seed + 1,000,003*(w + 1)``,
so with 7 or more workers a long training can reach the evaluation worlds (``seed + HELD_OUT`` upward).
"""

from __future__ import annotations

HELD_OUT = 7_000_001
"""Evaluation worlds start this far above the seed they belong to (far from the training workers' worlds)."""
FINAL, ITERATION, REVISION = 1000, 2000, 3000
"""A run's evaluations of the whole task, each on held-out worlds of its own above the run's seed."""
WORKER_STRIDE = 1_000_003
"""The distance between two training workers' first worlds."""
BRIEFING = 3_000_000
"""bench-diamond's briefing worlds (the chain alone, played to tell the fast agent how it fails)."""
SKILL_BENCH_SEED = 1000
"""The run seed bench-skills' fast agent tests its skills with (worlds 1000 upward)."""
VALIDATION = 500_000
"""bench-validate's worlds of a run: where mechanisms and settings are chosen (far above bench-game's first 40
held-out sets, which start at ``GAME_BENCH``)."""
GAME_BENCH, GAME_BENCH_SET = 100_000, 10_000
"""bench-game's held-out sets of a run: set ``k`` starts ``GAME_BENCH + k * GAME_BENCH_SET`` above the run's
held-out worlds (above its final, iteration and revision evaluations), each set at most ``GAME_BENCH_SET`` worlds."""


def skill_test_worlds(run_seed: int) -> int:
    """A run's sub-task skill tests (RunSkill): the same worlds for every attempt at a sub-task."""
    return run_seed


def training_worlds(seed: int, worker: int) -> int:
    """The first world of training worker ``worker`` of a job with ``RLConfig.seed`` = ``seed`` (its env ``i``
    plays ``training_worlds(seed, worker) + i`` first)."""
    return seed + WORKER_STRIDE * (worker + 1)


def held_out_worlds(seed: int) -> int:
    """Worlds no training of ``seed`` plays: a run's evaluations of its trained policies and the benchmarks'
    held-out worlds (their results are recorded per world from here)."""
    return seed + HELD_OUT


def final_worlds(run_seed: int) -> int:
    """A run's final evaluation of the whole task: every controller (a chain of code, a chain with policies, a
    policy around the kept plan) on these worlds."""
    return held_out_worlds(run_seed + FINAL)


def iteration_worlds(run_seed: int) -> int:
    """The whole task's evaluation after each outer iteration: the same worlds every iteration, so they compare."""
    return held_out_worlds(run_seed + ITERATION)


def revision_worlds(run_seed: int) -> int:
    """The kept plan's revision briefing (the policy and the plan alone), apart from the worlds the revision will
    be judged on."""
    return held_out_worlds(run_seed + REVISION)


def briefing_worlds(seed: int) -> int:
    """bench-diamond's briefing of the fast agent, apart from its training and held-out worlds."""
    return seed + BRIEFING


def game_bench_worlds(run_seed: int, set_index: int) -> int:
    """The first world of bench-game's held-out set ``set_index`` of a run: declared before it is scored, scored
    once, apart from every world the run itself played (benchmarks/game/sets.py checks that)."""
    return held_out_worlds(run_seed + GAME_BENCH + set_index * GAME_BENCH_SET)


def validation_worlds(run_seed: int) -> int:
    """The first of a run's validation worlds (bench-validate): a recorded controller played by other code there,
    paired world by world, to choose what to change; never a held-out set."""
    return held_out_worlds(run_seed + VALIDATION)


def candidate_seed(run_seed: int, index: int) -> int:
    """Not a world: the LLM's sampling seed for the fast agent's candidate ``index`` (distinct per run and
    candidate), derived from the run's seed here with the rest."""
    return run_seed * 1000 + index
