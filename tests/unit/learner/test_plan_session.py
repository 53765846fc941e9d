"""A kept plan's policy steps played by the learner (PlanPolicySession) over a scripted session: which plan actions
a link policy plays and for how long, how its steps are reported as one plan action, its skill errors, what each
policy observes, and the policy around the plan's own action space."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlgpt.v1 import common_pb2, env_pb2, learner_pb2
from services.learner.plan_links import PlanLink
from services.learner.plan_session import PlanPolicySession

SESSION_ACTIONS = ["noop", "do", "skill:own", "skill:chop", "plan"]
"""The session's: the policy's primitives and skill, the link's skill, the plan."""
DO, CHOP, PLAN = 1, 3, 4
STAGES = (1, 3, 4)
"""Wood that gets each stage of the plan done: coded, the link policy's, coded."""
CODED = (True, False, True)


class ScriptedSession:
    """Envs that gain one wood per ``do`` (a reward of 1 each); the env server's plan action gives the first
    unfinished coded stage its wood, one frame each, and ends at the link's stage or after K frames; four wood end
    the episode (autoreset). ``chop`` fails."""

    def __init__(self, num_envs: int = 1, k: int = 8):
        self.actions, self.num_envs, self.k = SESSION_ACTIONS, num_envs, k
        self.fields = {"image": env_pb2.ObservationField(name="image", shape=[2, 2, 3]),
                       "vector": env_pb2.ObservationField(name="vector", shape=[2], scale=10,
                                                          labels=["inventory/wood", "status/health"])}
        self.image_shape, self.vector_shape, self.vector_scale = (2, 2, 3), (2,), 10.0
        self.wood = [0] * num_envs
        self.done = [[False] * 3 for _ in range(num_envs)]
        self.sent: list[tuple[list[int], list[int]]] = []
        self.first_observations = self._obs(range(num_envs))
        self.prefix_frames = self.first_prefix_frames = np.zeros(num_envs, np.int64)

    def _obs(self, envs) -> dict[str, np.ndarray]:
        return {"image": np.zeros((len(envs), 2, 2, 3), np.uint8),
                "vector": np.array([[self.wood[i], 9] for i in envs], np.float32)}

    def _gain(self, i: int) -> None:
        self.wood[i] += 1
        self.done[i] = [d or self.wood[i] >= need for d, need in zip(self.done[i], STAGES, strict=True)]

    def step(self, actions, env_indices=()):
        envs = list(env_indices) or list(range(self.num_envs))
        self.sent.append((list(actions), envs))
        response = env_pb2.StepResponse()
        for i, action in zip(envs, actions, strict=True):
            info, frames = env_pb2.StepInfo(), 1
            if action == DO:
                self._gain(i)
            elif action == CHOP:
                info.skill_error.CopyFrom(common_pb2.SkillError(type="ValueError", message="no tree"))
            elif action == PLAN:
                info.skill, frames = "coded", 0
                while frames < self.k and (stage := next((j for j, d in enumerate(self.done[i]) if not d), None)
                                           ) is not None and CODED[stage]:
                    self._gain(i)
                    frames += 1
                frames = max(frames, 1)
            ended = self.wood[i] >= 4
            info.stages_done[:] = self.done[i]
            info.success, info.was_reset = ended, ended
            response.rewards.append(float(action in (DO, PLAN) and frames))
            response.frames.append(frames)
            response.terminated.append(ended)
            response.truncated.append(False)
            response.infos.append(info)
            if ended:
                self.wood[i], self.done[i] = 0, [False] * 3
        self.prefix_frames = np.zeros(len(envs), np.int64)
        return self._obs(envs), response

    def reset(self, env_indices=(), seed=0):
        envs = list(env_indices) or list(range(self.num_envs))
        for i in envs:
            self.wood[i], self.done[i] = 0, [False] * 3
        return self._obs(envs)

    def close(self) -> None:
        self.closed = True


class Actor:
    """The link's policy: always the same action of its own space (noop, do, chop), remembering what it saw."""

    def __init__(self, action: int = 1):
        self.action, self.seen = action, []

    def act(self, images, vectors, generator, greedy=False):
        self.seen.append(vectors.copy())
        return [self.action] * len(images)


def plan_session(num_envs: int = 1, k: int = 8, actor: Actor | None = None, observe=(), link_observe=()):
    steps = [learner_pb2.PlanStep(skill="coded_a"), learner_pb2.PlanStep(job_id="link"),
             learner_pb2.PlanStep(skill="coded_b")]
    config = learner_pb2.RLConfig(primitive_actions=["noop", "do"], skills=["own"], plan=steps, skill_max_steps=k,
                                  observe=list(observe))
    link = PlanLink(step=1, job_id="link", directory=Path("unused"), checkpoint=Path("unused"),
                    config=learner_pb2.RLConfig(primitive_actions=["noop", "do"], skills=["chop"],
                                                observe=list(link_observe)))
    scripted = ScriptedSession(num_envs, k)
    actor = actor or Actor()
    return PlanPolicySession(scripted, config, [link], seed=1, load=lambda *_: actor), scripted, actor


def test_the_policy_around_the_plan_sees_its_own_actions_mapped_onto_the_sessions() -> None:
    session, scripted, _ = plan_session()
    assert session.actions == ["noop", "do", "skill:own", "plan"]
    session.step([2])
    assert scripted.sent == [([2], [0])]  # skill:own: the session's index 2, the link's chop not in the policy's


def test_a_plan_action_goes_on_with_the_links_policy_until_its_step_is_done() -> None:
    session, scripted, actor = plan_session()
    obs, step = session.step([3])
    # The env server's plan action did the coded step (1 wood) and handed over; the policy chopped twice more.
    assert scripted.sent == [([PLAN], [0]), ([DO], [0]), ([DO], [0])]
    assert (list(step.frames), list(step.rewards)) == ([3], [3.0]) and list(step.infos[0].stages_done) == [1, 1, 0]
    assert obs["vector"][0].tolist() == [3, 9] and len(actor.seen) == 2
    assert session.first_unfinished(0) == 2
    obs, step = session.step([3])  # the next coded step, sent as the plan action; the episode ends
    assert scripted.sent[-1] == ([PLAN], [0]) and step.terminated[0] and step.infos[0].was_reset
    assert session.first_unfinished(0) == 0  # a new episode: no step done


def test_a_plan_action_ends_after_k_frames_and_the_next_goes_on_with_the_policy() -> None:
    session, scripted, _ = plan_session(k=2)
    _, step = session.step([3])
    assert list(step.frames) == [2] and list(step.infos[0].stages_done) == [1, 0, 0]
    _, step = session.step([3])  # the link's step is the first unfinished: its policy acts, the plan is not sent
    assert scripted.sent[2:] == [([DO], [0])] and list(step.frames) == [1] and step.infos[0].skill == "plan"
    assert list(step.infos[0].stages_done) == [1, 1, 0]


def test_a_link_policys_skill_error_ends_its_plan_action_not_the_episode() -> None:
    session, scripted, _ = plan_session(actor=Actor(action=2))  # its chop, the session's index 3
    _, step = session.step([3])
    info = step.infos[0]
    assert scripted.sent == [([PLAN], [0]), ([CHOP], [0])] and list(step.frames) == [2]
    assert not info.HasField("skill_error") and info.plan_error.type == "ValueError"
    assert info.plan_error.message == "plan step's policy: no tree" and not step.terminated[0]


def test_only_envs_in_a_policys_step_are_stepped_again() -> None:
    session, scripted, _ = plan_session(num_envs=3)
    _, step = session.step([1, 3], [2, 0])  # env 2 does, env 0 takes the plan action
    assert scripted.sent == [([DO, PLAN], [2, 0]), ([DO], [0]), ([DO], [0])]
    assert list(step.frames) == [1, 3] and list(step.rewards) == [1.0, 3.0]
    session.reset([0])
    assert session.first_unfinished(0) == 0 and session.first_unfinished(2) == 1  # env 2's wood did step 0


@pytest.mark.parametrize(("observe", "link_observe", "policy_sees", "link_sees"), [
    ((), (), [1, 9], [1, 9]),
    (("inventory",), (), [1, 0], [1, 9]),
    ((), ("status",), [1, 9], [0, 9]),
])
def test_each_policy_sees_what_it_observes(observe, link_observe, policy_sees, link_sees) -> None:
    session, _, actor = plan_session(actor=Actor(action=0), observe=observe, link_observe=link_observe)
    obs, _ = session.step([3])  # one wood by the plan, then the link's policy acts (noop) until K
    assert obs["vector"][0].tolist() == policy_sees and actor.seen[0][0].tolist() == link_sees
