"""Validation of ``rlgpt.v1.RLConfig``: one place, every problem reported together."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from rlgpt.errors import FailedPrecondition, InvalidArgument, shown
from rlgpt.machine import cpu_cores
from rlgpt.observation_choice import choices, observed
from rlgpt.reward_kinds import takes_target
from rlgpt.v1 import common_pb2, env_pb2, learner_pb2
from services.learner.settings import LearnerSettings


@dataclasses.dataclass(frozen=True)
class EnvVocabulary:
    """What the env server accepts, from its Describe and ListSkills answers."""

    backend: str
    actions: tuple[str, ...]
    achievements: tuple[str, ...]
    items: tuple[str, ...]
    reward_kinds: tuple[str, ...]
    skills: tuple[str, ...]
    max_skill_steps: int
    max_episode_length: int
    max_envs_per_session: int
    vector_labels: tuple[str, ...] = ()
    """The observation vector's entry names (Describe's vector field), for ``observe``."""
    threats: tuple[str, ...] = ()
    """What can hurt the player (Describe's threats), for ``plan_interrupt.threat_within``."""
    max_threat_distance: int = 0
    default_skill_steps: int = 0
    """K the env server gives a session that leaves it at 0 (Describe's ``limits.default_skill_steps``): what a
    config with skills or a plan but no K trains with."""
    max_stages: int = 0
    """Most stages (and prefix steps) of a session (Describe's ``limits.max_stages``); 0: not told."""
    max_animations: int = 0
    """Most animated successful and failed episodes of a session (Describe's ``limits.max_animations``)."""

    @classmethod
    def from_env_server(cls, describe: env_pb2.DescribeResponse, skills: env_pb2.ListSkillsResponse
                        ) -> EnvVocabulary:
        return cls(backend=describe.backend, actions=tuple(describe.actions),
                   achievements=tuple(describe.achievements), items=tuple(describe.items),
                   reward_kinds=tuple(describe.reward_kinds),
                   skills=tuple(s.name for s in skills.skills if s.backend == describe.backend),
                   max_skill_steps=describe.limits.max_skill_steps,
                   max_episode_length=describe.limits.max_episode_length,
                   max_envs_per_session=describe.limits.max_envs_per_session,
                   vector_labels=next((tuple(f.labels) for f in describe.observation if f.name == "vector"), ()),
                   threats=tuple(describe.threats), max_threat_distance=describe.limits.max_threat_distance,
                   default_skill_steps=describe.limits.default_skill_steps, max_stages=describe.limits.max_stages,
                   max_animations=describe.limits.max_animations)


# The learner's defaults for the RLConfig fields a client leaves at 0 (the learner alone defaults the RL config:
# the planner sends only what its agents chose).
DEFAULT_NUM_WORKERS = 2
"""Rollout workers when ``num_workers`` is 0, capped by this machine's cores (:func:`num_workers`)."""
DEFAULT_ENVS_PER_WORKER = 8
"""Envs per rollout worker when ``envs_per_worker`` is 0. A worker's envs go to its env server in one call and to
inference in one batch, so per-call and per-batch costs are shared by more frames (2 cores, 2 workers,
2026-11-27: 4 -> 8 envs, via 2 env servers 272 -> 339 frames/s). Not 16: it made in-process training faster
(340 -> 409) but not training through 2 env servers, the learner's own path (362 -> 363)."""
MINIBATCH_TRAJECTORIES = 16
"""Trajectories (rollouts) per gradient step when ``num_minibatches`` is 0: a batch of more is split into
minibatches of about this many (:func:`minibatches`), so more envs per worker, which make a batch bigger and each
frame cheaper, do not also mean fewer gradient steps per frame."""
MACRO_EPOCHS = 4
"""Passes over a batch when ``num_epochs`` is 0 and the config has macro actions or a kept plan
(:func:`has_macros`). One decision then spans many frames, so a frame budget gives few batches: at one gradient
step per batch, APPO around a kept plan made 382 steps in 1M frames and barely left its starting policy."""
MACRO_MINIBATCH_TRAJECTORIES = 4
"""Trajectories per minibatch then: a batch of 2 workers x 8 envs in 4 minibatches, so with :data:`MACRO_EPOCHS`
16 gradient steps per batch (PPO's usual 4 passes of 4 minibatches). Chosen from bench-diamond runs (revised-updates
and revised-updates-1m against revised) scored on its held-out worlds, not on validation worlds: a working default,
not a held-out result (docs/BENCHMARKS.md lists every scoring)."""
MAX_EPOCHS = 16
"""Most passes over a batch (``num_epochs``) and most minibatches per pass (``num_minibatches``)."""
DEFAULT_EPISODE_LENGTH = 1000
"""Episode length in frames when ``episode_length`` is 0."""


def interrupt_problems(config: learner_pb2.RLConfig, vocabulary: EnvVocabulary) -> list[str]:
    """What is wrong with ``plan_interrupt`` (when a plan action hands control back early)."""
    asked = config.plan_interrupt
    if not asked.damage and not asked.threat_within:
        return []
    problems = []
    if not config.plan:
        problems.append("plan_interrupt says when a plan action ends early: it needs a plan (RLConfig.plan)")
    if asked.threat_within and not vocabulary.threats:
        problems.append(f"plan_interrupt.threat_within: the env server names no threats for {vocabulary.backend}; "
                        "use plan_interrupt.damage")
    elif asked.threat_within and not 1 <= asked.threat_within <= vocabulary.max_threat_distance:
        problems.append(f"plan_interrupt.threat_within={asked.threat_within}: must be in "
                        f"1..{vocabulary.max_threat_distance} cells (the env server's max_threat_distance)")
    return problems


def num_workers(config: learner_pb2.RLConfig) -> int:
    """The rollout workers a config trains with: its own, or the default capped by this machine's cores."""
    return config.num_workers or min(DEFAULT_NUM_WORKERS, cpu_cores())


def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def check_device(config: learner_pb2.RLConfig, settings: LearnerSettings,
                 has_cuda: Callable[[], bool] | None = None) -> None:
    """A local job that would train on CUDA needs a GPU here (a Kubernetes Job asks its node for one)."""
    local = (config.runner or settings.runner) == "local"
    if local and settings.device == "cuda" and not (has_cuda or cuda_available)():
        asked = "gpu=true" if config.gpu else "this learner's RLGPT_LEARNER_DEVICE=cuda"
        raise FailedPrecondition(f"{asked}, but this machine has no CUDA device torch can use "
                                 "(torch.cuda.is_available() is False): train on the kubernetes runner, whose Job "
                                 "requests nvidia.com/gpu, or start the learner with RLGPT_LEARNER_DEVICE=cpu")


def worker_splits(envs_per_worker: int, device: str) -> int:
    """Sample Factory's worker splits for a job. Double-buffered sampling (2 splits: one group of envs steps
    while the policy acts for the other) pays on a GPU, whose inference overlaps the env work; on CPU both
    compete for the same cores and smaller batches cost more (measured on 2 cores, in-process: 770 frames/s
    with 2 splits, 860 with 1). Two splits need an even number of envs."""
    return 2 if device == "cuda" and envs_per_worker >= 2 and envs_per_worker % 2 == 0 else 1


def batch_trajectories(config: learner_pb2.RLConfig, device: str) -> int:
    """Trajectories (rollouts of every env of a worker split) in one batch of a filled config."""
    return config.num_workers * config.envs_per_worker // worker_splits(config.envs_per_worker, device)


def has_macros(config: learner_pb2.RLConfig) -> bool:
    """Whether some of a config's actions span many frames: skills as macro actions, or a kept plan."""
    return bool(config.skills or config.plan)


def epochs(config: learner_pb2.RLConfig) -> int:
    """Passes over a batch: the config's, or by default one (:data:`MACRO_EPOCHS` with macro actions)."""
    return config.num_epochs or (MACRO_EPOCHS if has_macros(config) else 1)


def minibatches(config: learner_pb2.RLConfig, device: str) -> int:
    """Minibatches per pass over a batch: the config's, or by default as many as give each at least
    :data:`MINIBATCH_TRAJECTORIES` trajectories (:data:`MACRO_MINIBATCH_TRAJECTORIES` with macro actions) and
    divide the batch evenly."""
    if config.num_minibatches:
        return config.num_minibatches
    trajectories = batch_trajectories(config, device)
    most = trajectories // (MACRO_MINIBATCH_TRAJECTORIES if has_macros(config) else MINIBATCH_TRAJECTORIES)
    return max((n for n in range(1, most + 1) if trajectories % n == 0), default=1)


def update_problems(config: learner_pb2.RLConfig, filled: learner_pb2.RLConfig,
                    settings: LearnerSettings) -> list[str]:
    """Passes and minibatches: each in range, and the minibatches splitting a batch's trajectories evenly (Sample
    Factory's minibatch is a whole number of rollouts)."""
    problems = []
    for field in ("num_epochs", "num_minibatches"):
        if not 0 <= getattr(config, field) <= MAX_EPOCHS:
            problems.append(f"{field}={getattr(config, field)}: must be in 1..{MAX_EPOCHS} (0: the learner's "
                            "default)")
    device = "cuda" if config.gpu else settings.device
    trajectories, splits = batch_trajectories(filled, device), worker_splits(filled.envs_per_worker, device)
    if 0 < config.num_minibatches <= MAX_EPOCHS and trajectories % config.num_minibatches:
        problems.append(f"num_minibatches={config.num_minibatches}: a batch holds {trajectories} trajectories "
                        f"(num_workers x envs_per_worker{' / 2 worker splits' if splits > 1 else ''}), which it "
                        "must divide evenly; choose a divisor of it")
    return problems


def step_problems(where: str, step: learner_pb2.PlanStep | common_pb2.PrefixStep, vocabulary: EnvVocabulary
                  ) -> list[str]:
    """What is wrong with one step of a kept plan or of a prefix (``where`` names it: ``plan[0]``): a registered
    skill (or, for a plan step, a training job: checked when the job starts, :mod:`services.learner.plan_links`),
    and success conditions of known achievements and items."""
    problems = []
    planned = isinstance(step, learner_pb2.PlanStep)
    job = step.job_id if planned else ""  # a prefix's step: the env server runs it
    if step.skill and job:
        problems.append(f"{where}: set skill (a coded step) or job_id (a trained policy's step), not both")
    elif not step.skill and not job:
        problems.append(f"{where}.skill: empty; name the registered coded skill that does this step"
                        + (" (or the training job whose policy does it: job_id)" if planned else ""))
    elif step.skill and step.skill not in vocabulary.skills:
        problems.append(f"{where}.skill: unknown skill {shown(step.skill)} (register it on the env server first)")
    if not step.success:
        kind = where.split("[", 1)[0]
        problems.append(f"{where}.success: empty; a {kind} step needs the conditions that say it is done")
    for condition in step.success:
        if condition.achievement and condition.achievement not in vocabulary.achievements:
            problems.append(f"{where}.success: unknown achievement {shown(condition.achievement)}")
        if condition.HasField("inventory") and condition.inventory.item not in vocabulary.items:
            problems.append(f"{where}.success: unknown item {shown(condition.inventory.item)}")
    return problems


def prefix_problems(config: learner_pb2.RLConfig, vocabulary: EnvVocabulary) -> list[str]:
    """What is wrong with ``prefix`` (the chain's earlier links the env server runs after every reset): at most the
    env server's max_stages steps, each a step (:func:`step_problems`) with 1..max_episode_length frames."""
    problems = []
    if vocabulary.max_stages and len(config.prefix) > vocabulary.max_stages:
        problems.append(f"prefix: {len(config.prefix)} steps; the env server runs at most {vocabulary.max_stages} "
                        "(its max_stages): start the training at a later link")
    for i, step in enumerate(config.prefix[:vocabulary.max_stages or None]):
        problems += step_problems(f"prefix[{i}]", step, vocabulary)
        if not 1 <= step.max_frames <= vocabulary.max_episode_length:
            problems.append(f"prefix[{i}].max_frames={step.max_frames}: must be in "
                            f"1..{vocabulary.max_episode_length} (the env server's max_episode_length), the most "
                            "frames the link may take before the next starts")
    return problems


def validate_rl_config(config: learner_pb2.RLConfig, vocabulary: EnvVocabulary,
                       settings: LearnerSettings) -> learner_pb2.RLConfig:
    """Returns a copy with defaults filled in, or raises InvalidArgument listing every problem."""
    problems: list[str] = []
    filled = learner_pb2.RLConfig()
    filled.CopyFrom(config)
    filled.backend = config.backend or vocabulary.backend
    filled.runner = config.runner or settings.runner
    filled.num_workers = num_workers(config)
    filled.envs_per_worker = config.envs_per_worker or DEFAULT_ENVS_PER_WORKER
    # K: the env server's default (it owns K) for a config with skills or a plan, 1 without.
    filled.skill_max_steps = config.skill_max_steps or (vocabulary.default_skill_steps if has_macros(config) else 1)
    filled.episode_length = config.episode_length or DEFAULT_EPISODE_LENGTH

    if config.env_frames <= 0:
        problems.append(f"env_frames={config.env_frames}: the frame budget must be > 0")
    elif config.env_frames > settings.max_env_frames:
        problems.append(f"env_frames={config.env_frames}: above this learner's limit {settings.max_env_frames}")
    if config.skill_max_steps < 0:
        problems.append(f"skill_max_steps={config.skill_max_steps}: K must be >= 1 (0 means the default)")
    elif filled.skill_max_steps > vocabulary.max_skill_steps:
        problems.append(f"skill_max_steps={filled.skill_max_steps}: above the env server's limit "
                        f"{vocabulary.max_skill_steps}")
    if config.episode_length < 0 or filled.episode_length > vocabulary.max_episode_length:
        problems.append(f"episode_length={config.episode_length}: must be in 1..{vocabulary.max_episode_length}")
    max_workers = settings.max_workers or cpu_cores()
    if config.num_workers < 0 or filled.num_workers > max_workers:
        problems.append(f"num_workers={config.num_workers}: must be in 1..{max_workers} (this machine has "
                        f"{cpu_cores()} cores; RLGPT_LEARNER_MAX_WORKERS raises the cap)")
    if config.envs_per_worker < 0 or filled.envs_per_worker > settings.max_envs_per_worker:
        problems.append(f"envs_per_worker={config.envs_per_worker}: must be in 1..{settings.max_envs_per_worker}")
    elif filled.envs_per_worker > vocabulary.max_envs_per_session:
        problems.append(f"envs_per_worker={filled.envs_per_worker}: a rollout worker's envs share one env-server "
                        f"session and the env server allows {vocabulary.max_envs_per_session} envs per session; "
                        "use fewer envs per worker (and more workers), or raise the env server's "
                        "RLGPT_ENV_MAX_ENVS_PER_SESSION")
    if filled.runner not in ("local", "kubernetes"):
        problems.append(f"runner={shown(config.runner)}: must be local or kubernetes")
    if config.gpu and filled.runner == "local" and settings.device != "cuda":
        problems.append("gpu=true needs the kubernetes runner or a learner started with RLGPT_LEARNER_DEVICE=cuda")
    if not math.isfinite(config.learning_rate) or config.learning_rate < 0:
        problems.append(f"learning_rate={config.learning_rate}: must be a finite number >= 0")
    problems += update_problems(config, filled, settings)
    if not math.isfinite(config.plan_prior) or not 0 <= config.plan_prior < 1:
        problems.append(f"plan_prior={config.plan_prior}: must be a probability, at least 0 and below 1")
    elif config.plan_prior and not config.plan:
        problems.append("plan_prior is the plan action's starting probability: it needs a plan (RLConfig.plan)")
    problems += interrupt_problems(config, vocabulary)
    if filled.backend != vocabulary.backend:
        problems.append(f"backend={shown(filled.backend)}: the env server described {vocabulary.backend!r}")

    for name in config.primitive_actions:
        if name not in vocabulary.actions:
            problems.append(f"primitive_actions: unknown action {shown(name)}; known: {', '.join(vocabulary.actions)}")
    _, unknown = observed(vocabulary.vector_labels, list(config.observe))
    if unknown:
        problems.append(f"observe: unknown {', '.join(shown(n) for n in unknown[:5])}; name a vector label or "
                        f"group: {', '.join(choices(vocabulary.vector_labels))}")
    for name in config.skills:
        if name not in vocabulary.skills:
            known = ", ".join(vocabulary.skills) or "none registered"
            problems.append(f"skills: unknown skill {shown(name)} (register it on the env server first; "
                            f"known: {known})")
    for i, step in enumerate(config.plan):
        problems += step_problems(f"plan[{i}]", step, vocabulary)
    problems += prefix_problems(config, vocabulary)
    for i, term in enumerate(config.reward_terms):
        if term.kind not in vocabulary.reward_kinds:
            problems.append(f"reward_terms[{i}]: unknown kind {shown(term.kind)}; "
                            f"known: {', '.join(vocabulary.reward_kinds)}")
        elif takes_target(term.kind) and term.target != "*":
            known = vocabulary.achievements if term.kind == "achievement" else vocabulary.items
            if term.target not in known:
                problems.append(f"reward_terms[{i}]: unknown {term.kind} target {shown(term.target)}")
        if not math.isfinite(term.weight):
            problems.append(f"reward_terms[{i}]: weight must be finite")
    if problems:
        raise InvalidArgument("invalid RL config: " + "; ".join(problems))
    return filled
