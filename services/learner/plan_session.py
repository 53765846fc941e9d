"""A kept plan whose steps include trained policies (``PlanStep.job_id``), played through one env-server session:
the policy around the plan sees its own action space, and where it takes the plan action at a step a policy
plays, the learner runs that policy instead of sending the env server the plan action.

The env server judges the stages (``StepInfo.stages_done``, sticky for the episode) and runs the coded steps in
its plan action, which ends where the first unfinished stage is a policy's. Per env this session keeps the stages
the server last reported and the last observation. A plan action whose first unfinished step is a policy's runs
that policy (frozen, on CPU, without gradients, sampling its own actions: primitives and its skills), one decision
at a time for the envs in such a step only, until the step's conditions hold, the episode ends or the action's K
frames are spent; a coded plan action that handed over there with frames left goes on with the policy the same
way. The steps of one plan action are reported as one (:func:`merge_step`); a link policy's skill error is the
plan action's ``plan_error`` (the episode goes on, as after a coded step's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from rlgpt.env_client import EnvBatch, Observation, env_batch
from rlgpt.env_contract import PLAN_ACTION, is_macro
from rlgpt.observation_choice import observed
from rlgpt.v1 import env_pb2, learner_pb2
from services.learner.plan_links import PlanLink, session_config
from services.learner.spaces import job_actions


class Actor(Protocol):
    """A trained policy choosing actions of its own space (:class:`services.learner.policy.Policy`)."""

    def act(self, images: np.ndarray, vectors: np.ndarray, generator: Any, greedy: bool = False) -> list[int]: ...


def load_actor(link: PlanLink, fields: Sequence[env_pb2.ObservationField], primitives: Sequence[str]) -> Actor:
    """The link's pinned policy, for the session's observation ``fields`` (``primitives``: the backend's)."""
    from services.learner.policy import Policy

    return Policy.load(link.directory, link.checkpoint, link.config, fields, len(job_actions(link.config, primitives)))


def as_plan_step(info: env_pb2.StepInfo) -> None:
    """A link policy's step reported as its plan action's: named ``plan``, a skill error of its as the plan's."""
    info.skill = PLAN_ACTION
    info.skill_finished = False
    if info.HasField("skill_error"):
        if not info.HasField("plan_error"):
            info.plan_error.CopyFrom(info.skill_error)
            info.plan_error.message = f"plan step's policy: {info.skill_error.message}"
        info.ClearField("skill_error")


def merge_step(total: env_pb2.StepResponse, row: int, part: env_pb2.StepResponse, k: int) -> None:
    """Adds row ``k`` of ``part`` (a later step of the same plan action) to row ``row`` of ``total``: rewards and
    frames summed, achievements joined, the episode's state (end, stages, success, summary) the later one's."""
    total.rewards[row] += part.rewards[k]
    total.frames[row] += part.frames[k]
    total.terminated[row], total.truncated[row] = part.terminated[k], part.truncated[k]
    info, later = total.infos[row], part.infos[k]
    as_plan_step(later)
    info.achievements.extend(later.achievements)
    info.success, info.episode_steps, info.episode_return = later.success, later.episode_steps, later.episode_return
    info.end_reason, info.was_reset = later.end_reason, later.was_reset
    info.stages_done[:] = later.stages_done
    if later.HasField("episode"):
        info.episode.CopyFrom(later.episode)
    if later.HasField("plan_error") and not info.HasField("plan_error"):
        info.plan_error.CopyFrom(later.plan_error)


class PlanPolicySession:
    """``session`` (its env server's actions: every policy's) serving ``config``'s policy, whose plan's policy steps
    are ``links``; ``load`` makes each link's actor; ``seed`` seeds their sampling. What ``SessionVecEnv`` and the
    evaluations step, as they step a ``RemoteSession``."""

    def __init__(self, session: Any, config: learner_pb2.RLConfig, links: Sequence[PlanLink], seed: int,
                 load: Callable[[PlanLink, Sequence[env_pb2.ObservationField], Sequence[str]], Actor] = load_actor):
        import torch

        self._session = session
        self.num_envs = session.num_envs
        self.fields = session.fields
        self.image_shape, self.vector_shape = session.image_shape, session.vector_shape
        self.vector_scale = session.vector_scale
        self._k = config.skill_max_steps
        primitives = [a for a in session.actions if not is_macro(a)]
        self.actions = job_actions(config, primitives)
        """The policy around the plan's own actions (the session may hold more: its links')."""
        index = {name: i for i, name in enumerate(session.actions)}
        self._to_session = np.array([index[a] for a in self.actions], np.int64)
        self._plan = self.actions.index(PLAN_ACTION)
        labels = list(self.fields["vector"].labels)
        served = list(session_config(config, links).observe)

        def mask(observe: Sequence[str]) -> np.ndarray | None:
            """What a policy must not see that the session shows it (None: nothing)."""
            return None if list(observe) == served else np.asarray(observed(labels, list(observe))[0], np.float32)

        self._mask = mask(config.observe)
        self._links = {link.step: (load(link, list(self.fields.values()), primitives),
                                   np.array([index[a] for a in job_actions(link.config, primitives)], np.int64),
                                   mask(link.config.observe)) for link in links}
        self._generator = torch.Generator().manual_seed(int(seed))
        self._stages = np.zeros((self.num_envs, len(config.plan)), bool)
        self._last = {key: value.copy() for key, value in session.first_observations.items()}
        self.first_observations = self._masked(session.first_observations)
        self.first_prefix_frames = getattr(session, "first_prefix_frames", np.zeros(self.num_envs, np.int64))
        self.prefix_frames = getattr(session, "prefix_frames", np.zeros(self.num_envs, np.int64))

    def _masked(self, obs: Observation) -> Observation:
        """``obs`` as the policy around the plan sees them (its own ``observe``)."""
        return obs if self._mask is None else {**obs, "vector": obs["vector"] * self._mask}

    def first_unfinished(self, i: int) -> int | None:
        """Env ``i``'s first plan step not done in its episode, as the env server last reported; None: all done."""
        return next((j for j, done in enumerate(self._stages[i]) if not done), None)

    def _book(self, envs: Sequence[int], obs: Observation, response: env_pb2.StepResponse) -> None:
        for row, i in enumerate(envs):
            for key, value in obs.items():
                self._last[key][i] = value[row]
            info = response.infos[row]
            self._stages[i] = False if info.was_reset or not info.stages_done else np.asarray(info.stages_done)

    def _choose(self, sent: np.ndarray, playing: Mapping[int, int], envs: Sequence[int]) -> None:
        """Fills ``sent[row]`` for each row in ``playing`` (row -> the step a policy plays) with its policy's action."""
        for step in set(playing.values()):
            actor, to_session, mask = self._links[step]
            rows = [row for row, s in playing.items() if s == step]
            at = [envs[row] for row in rows]
            vectors = self._last["vector"][at] if mask is None else self._last["vector"][at] * mask
            chosen = actor.act(self._last["image"][at], vectors, self._generator)
            sent[rows] = to_session[np.asarray(chosen, np.int64)]

    def _going(self, rows: Sequence[int], envs: Sequence[int], total: env_pb2.StepResponse,
               playing: Mapping[int, int]) -> dict[int, int]:
        """Of ``rows`` (plan actions), those that go on with a policy, and the step it plays: the episode goes on,
        frames of K are left, and either a policy played a step that is not done yet, or the env server's plan
        action handed over at a policy's step (not cut short by an interrupt or a skill error)."""
        going = {}
        for row in rows:
            i, info = envs[row], total.infos[row]
            if total.terminated[row] or total.truncated[row] or total.frames[row] >= self._k:
                continue
            if row in playing:
                if not self._stages[i][playing[row]] and not info.HasField("plan_error"):
                    going[row] = playing[row]
            elif not info.plan_interrupted and not info.HasField("plan_error"):
                step = self.first_unfinished(i)
                if step in self._links:
                    going[row] = step
        return going

    def step(self, actions: Sequence[int], env_indices: Sequence[int] = ()
             ) -> tuple[Observation, env_pb2.StepResponse]:
        """Steps every env, or the envs in ``env_indices`` (``actions``: the policy's, in their order)."""
        envs = list(env_indices) if len(env_indices) else list(range(self.num_envs))
        wanted = np.asarray(actions, np.int64).reshape(-1)
        sent = self._to_session[wanted]
        plans = [row for row, a in enumerate(wanted.tolist()) if a == self._plan]
        playing = {row: step for row in plans if (step := self.first_unfinished(envs[row])) in self._links}
        self._choose(sent, playing, envs)
        obs, total = self._session.step(sent.tolist(), env_indices)
        self._book(envs, obs, total)
        for row in playing:
            as_plan_step(total.infos[row])
        prefix = np.array(self._session.prefix_frames, np.int64)
        going = self._going(plans, envs, total, playing)
        if going:
            obs = {key: value.copy() for key, value in obs.items()}
        while going:
            rows = sorted(going)
            at = [envs[row] for row in rows]
            sub = np.zeros(len(rows), np.int64)
            self._choose(sub, {k: going[row] for k, row in enumerate(rows)}, at)
            part_obs, part = self._session.step(sub.tolist(), at)
            self._book(at, part_obs, part)
            for k, row in enumerate(rows):
                merge_step(total, row, part, k)
                for key in obs:
                    obs[key][row] = part_obs[key][k]
                prefix[row] = self._session.prefix_frames[k]
            going = self._going(rows, envs, total, going)
        self.prefix_frames = prefix
        return self._masked(obs), total

    def step_envs(self, actions: Sequence[int], env_indices: Sequence[int] = ()) -> EnvBatch:
        return env_batch(*self.step(actions, env_indices))

    def reset(self, env_indices: Sequence[int] = (), seed: int = 0) -> Observation:
        obs = self._session.reset(env_indices, seed)
        envs = list(env_indices) if len(env_indices) else list(range(self.num_envs))
        for row, i in enumerate(envs):
            for key, value in obs.items():
                self._last[key][i] = value[row]
            self._stages[i] = False
        self.prefix_frames = self._session.prefix_frames
        return self._masked(obs)

    def close(self) -> None:
        self._session.close()
