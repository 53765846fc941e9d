"""How far episodes got through a kept plan, from StepInfo.stages_done."""

from rlgpt.v1 import env_pb2
from services.learner.plan_progress import PlanProgress


def step(*envs: tuple[list[bool], int, bool]) -> env_pb2.StepResponse:
    return env_pb2.StepResponse(
        terminated=[ended for _, _, ended in envs], truncated=[False] * len(envs),
        infos=[env_pb2.StepInfo(stages_done=done, episode_steps=steps) for done, steps, _ in envs])


def test_steps_reached_done_and_the_frames_spent_in_each() -> None:
    progress = PlanProgress(["wood", "table", "pickaxe"], num_envs=2)
    progress.record(step(([True, False, False], 10, False), ([False, True, False], 5, False)))
    progress.record(step(([True, True, False], 30, True), ([False, True, False], 8, True)))
    progress.record(step(([True, True, True], 40, True), ([True, True, True], 9, True)))  # later episodes: ignored
    wood, table, pickaxe = progress.links()
    assert (wood.reached, wood.succeeded, wood.mean_frames) == (2, 1, (10 + 8) / 2)
    # env 1 did the table early, out of order, but never reached it: its wood was never done
    assert (table.reached, table.succeeded, table.mean_frames) == (1, 1, 20)
    assert (pickaxe.reached, pickaxe.succeeded, pickaxe.mean_frames) == (1, 0, 0)
    assert progress.first_unfinished(0) == 2 and progress.first_unfinished(1) == 0
