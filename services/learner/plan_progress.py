"""How far each evaluated episode got through a kept plan (RLConfig.plan): per step, the episodes that reached
it (every earlier step done), that did it, and the frames spent while it was the first unfinished step, read
from StepInfo.stages_done after every step. Reported as EvaluateResponse.links, as a chain's links are."""

from __future__ import annotations

from collections.abc import Sequence

from rlgpt.v1 import env_pb2, learner_pb2


def step_name(step: learner_pb2.PlanStep) -> str:
    """How reports name a plan step: its skill, or ``policy:<job id>`` for a trained policy's step."""
    return step.skill or f"policy:{step.job_id}"


class PlanProgress:
    """Counts each env's first episode only (as FirstEpisodes does)."""

    def __init__(self, names: Sequence[str], num_envs: int):
        self.names = list(names)
        self._done_at: list[list[int | None]] = [[None] * len(self.names) for _ in range(num_envs)]
        self._ended: dict[int, int] = {}  # env -> frames of its first episode

    def record(self, step: env_pb2.StepResponse, envs: Sequence[int] | None = None) -> None:
        """Books a step whose row r is env ``envs[r]`` (row r is env r when None)."""
        for row, info in enumerate(step.infos):
            i = row if envs is None else envs[row]
            if i in self._ended or not self.names:
                continue
            for j, done in enumerate(info.stages_done):
                if done and self._done_at[i][j] is None:
                    self._done_at[i][j] = info.episode_steps  # an ended episode's own, even when reset
            if step.terminated[row] or step.truncated[row]:
                self._ended[i] = info.episode_steps

    def first_unfinished(self, i: int) -> int | None:
        """Index of env ``i``'s first step not done in its (ended) first episode; None when all were done."""
        return next((j for j, at in enumerate(self._done_at[i]) if at is None), None)

    def links(self) -> list[learner_pb2.LinkStats]:
        stats = []
        for j, name in enumerate(self.names):
            reached = succeeded = 0
            frames = 0
            for i, end in self._ended.items():
                earlier = self._done_at[i][:j]
                if any(at is None for at in earlier):
                    continue
                reached += 1
                start = max((at for at in earlier if at is not None), default=0)
                at = self._done_at[i][j]
                succeeded += at is not None
                frames += max(0, (at if at is not None else end) - start)
            stats.append(learner_pb2.LinkStats(name=name, reached=reached, succeeded=succeeded,
                                               mean_frames=frames / reached if reached else 0.0))
        return stats
