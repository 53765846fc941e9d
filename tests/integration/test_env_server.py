"""The env server over a real gRPC channel: happy paths and every bad input of the issue."""

from __future__ import annotations

import io

import grpc
import numpy as np
import PIL.Image
import pytest
from env_server_support import assert_healthy, rpc_error

from rlgpt.frames import PNG_SIGNATURE
from rlgpt.tensors import from_tensor
from rlgpt.v1 import common_pb2, env_pb2
from services.env_server.skills.reference import COLLECT_WOOD

WOOD_TASK = common_pb2.TaskSpec(name="collect_wood")


pytestmark = pytest.mark.usefixtures("no_leftover_sessions")


@pytest.fixture(scope="module")
def wood_skill(env_server) -> str:
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="it_collect_wood", code=COLLECT_WOOD,
                                                               replace=True))
    return "it_collect_wood"


def test_describe_lists_actions_observations_and_skill_api(env_server) -> None:
    d = env_server.stub.Describe(env_pb2.DescribeRequest())
    assert d.backend == "crafter" and d.available
    assert len(d.actions) == 17 and d.actions[5] == "do"
    fields = {f.name: f for f in d.observation}
    assert list(fields["image"].shape) == [64, 64, 3]
    assert len(fields["vector"].labels) == fields["vector"].shape[0]
    assert "collect_diamond" in d.achievements and "wood" in d.items
    assert "agent.step_to" in d.skill_api
    assert d.limits.max_envs_per_session == 8 and d.limits.max_frames_per_episode > 0


def test_resolve_task_spells_out_what_a_task_means(env_server) -> None:
    resolve = env_server.stub.ResolveTask
    named = resolve(env_pb2.ResolveTaskRequest(task=common_pb2.TaskSpec(name="collect_wood", description="d"))).task
    assert [c.achievement for c in named.success] == ["collect_wood"] and named.description == "d"
    wood = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=3))
    explicit = resolve(env_pb2.ResolveTaskRequest(task=common_pb2.TaskSpec(name="logs", success=[wood]))).task
    assert list(explicit.success) == [wood]  # conditions given are kept as they are
    assert not resolve(env_pb2.ResolveTaskRequest(task=common_pb2.TaskSpec())).task.success  # open-ended
    code, details = rpc_error(resolve, env_pb2.ResolveTaskRequest(task=common_pb2.TaskSpec(name="fly")))
    assert code == grpc.StatusCode.NOT_FOUND and "no task 'fly' on crafter: crafter offers crafter" in details
    code, details = rpc_error(resolve, env_pb2.ResolveTaskRequest(task=common_pb2.TaskSpec(name="x" * 5_000_000)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "task.name" in details and len(details) < 2000
    code, details = rpc_error(resolve, env_pb2.ResolveTaskRequest(backend="atari", task=WOOD_TASK))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "unknown backend 'atari'" in details


def test_batched_step_is_reproducible_and_isolated(env_server) -> None:
    stub = env_server.stub
    a = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=4, seed=11, task=WOOD_TASK))
    b = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=4, seed=11, task=WOOD_TASK))
    c = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=4, seed=12, task=WOOD_TASK))
    images = [from_tensor(s.observations.image) for s in (a, b, c)]
    assert images[0].shape == (4, 64, 64, 3) and images[0].dtype == np.uint8
    assert np.array_equal(images[0], images[1])
    assert not np.array_equal(images[0], images[2])
    rng = np.random.default_rng(0)
    for _ in range(20):
        actions = rng.integers(0, 17, size=4).tolist()
        ra = stub.Step(env_pb2.StepRequest(session_id=a.session_id, actions=actions))
        rb = stub.Step(env_pb2.StepRequest(session_id=b.session_id, actions=actions))
        assert ra.observations.image.data == rb.observations.image.data
        assert list(ra.frames) == [1, 1, 1, 1]
    vector = from_tensor(ra.observations.vector)
    labels = next(f.labels for f in a.observation if f.name == "vector")
    assert vector.shape == (4, len(labels)) and vector.dtype == np.float32
    assert np.array_equal(vector, from_tensor(rb.observations.vector))
    for s in (a, b, c):
        stub.CloseSession(env_pb2.CloseSessionRequest(session_id=s.session_id))


def test_stream_steps_matches_unary(env_server) -> None:
    stub = env_server.stub
    a = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=2, seed=5))
    b = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=2, seed=5))
    actions = [[1, 2], [3, 4], [5, 5], [0, 1]]
    streamed = list(stub.StreamSteps(iter([env_pb2.StepRequest(session_id=a.session_id, actions=x)
                                           for x in actions])))
    unary = [stub.Step(env_pb2.StepRequest(session_id=b.session_id, actions=x)) for x in actions]
    assert len(streamed) == 4
    assert [s.observations.image.data for s in streamed] == [u.observations.image.data for u in unary]


def test_truncation_start_inventory_and_reward_terms(env_server) -> None:
    stub = env_server.stub
    task = common_pb2.TaskSpec(success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=5))],
                               start_inventory=[common_pb2.ItemCount(item="wood", count=2)])
    s = stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=1, seed=1, task=task, episode_length=3, autoreset=True,
        reward_terms=[common_pb2.RewardTerm(kind="step", weight=-0.5)]))
    labels = {f.name: f for f in s.observation}["vector"].labels
    vector = from_tensor(s.observations.vector)
    assert vector[0, list(labels).index("inventory/wood")] == 2
    rewards, truncated = [], []
    for _ in range(3):
        r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[0]))
        rewards.append(r.rewards[0])
        truncated.append(r.truncated[0])
    assert rewards == [-0.5, -0.5, -0.5]
    assert truncated == [False, False, True]
    assert r.infos[0].end_reason == "time_limit" and r.infos[0].was_reset and not r.terminated[0]


def test_a_session_fills_only_the_observed_vector_entries(env_server) -> None:
    stub = env_server.stub
    start = [common_pb2.ItemCount(item="wood", count=2)]
    s = stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=1, seed=1, task=common_pb2.TaskSpec(start_inventory=start), observe=["status", "inventory/wood"]))
    labels = list({f.name: f for f in s.observation}["vector"].labels)
    vector = from_tensor(stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[0])).observations.vector)[0]
    seen = {label for label, value in zip(labels, vector, strict=True) if value}
    assert {"status/health", "inventory/wood"} <= seen and all(
        label.startswith("status/") or label == "inventory/wood" for label in seen)
    assert vector[labels.index("facing/y")] == 0 and vector[labels.index("status/health")] == 9
    code, details = rpc_error(stub.CreateSession, env_pb2.CreateSessionRequest(num_envs=1, observe=["mood" * 30]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "observe: unknown 'moodmood" in details
    assert "name a vector label or group: status, inventory" in details and len(details) < 1200
    assert_healthy(env_server)


def test_stages_are_judged_like_the_task_every_step(env_server) -> None:
    stub = env_server.stub
    wood = common_pb2.Condition(inventory=common_pb2.ItemCount(item="wood", count=2))
    stages = [env_pb2.Stage(success=[wood]),  # given by the start inventory: done on the first step
              env_pb2.Stage(success=[common_pb2.Condition(achievement="make_wood_pickaxe")]),  # not yet
              env_pb2.Stage()]  # no conditions: never done
    s = stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=2, seed=4, task=common_pb2.TaskSpec(success=[wood],
                                                     start_inventory=[common_pb2.ItemCount(item="wood", count=2)]),
        stages=stages, episode_length=2, autoreset=True))
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[0, 0]))
    for info in r.infos:
        assert list(info.stages_done) == [True, False, False]
        assert info.success == info.stages_done[0]  # the same conditions, judged the same way
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[0, 0]))
    assert all(i.was_reset and list(i.stages_done) == [True, False, False] for i in r.infos)  # the ended episode's
    plain = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1))
    assert list(stub.Step(env_pb2.StepRequest(session_id=plain.session_id, actions=[0])).infos[0].stages_done) == []


def test_bad_stages_are_invalid_argument(env_server) -> None:
    stub = env_server.stub
    bad = [env_pb2.Stage(success=[common_pb2.Condition(achievement="fly_to_moon")]),
           env_pb2.Stage(success=[common_pb2.Condition(inventory=common_pb2.ItemCount(item="laser", count=1))])]
    code, details = rpc_error(stub.CreateSession, env_pb2.CreateSessionRequest(num_envs=1, stages=bad))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "stages[0].success[0]: unknown achievement 'fly_to_moon'" in details
    assert "stages[1].success[0]: unknown item 'laser'" in details
    limit = stub.Describe(env_pb2.DescribeRequest()).limits.max_stages
    assert limit == env_server.servicer.settings.max_list_entries
    code, details = rpc_error(stub.CreateSession, env_pb2.CreateSessionRequest(
        num_envs=1, stages=[env_pb2.Stage()] * (limit + 1)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"stages has {limit + 1} entries; the limit is {limit}" in details
    assert_healthy(env_server)


def test_skill_as_macro_action_counts_frames(env_server, wood_skill) -> None:
    stub = env_server.stub
    s = stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=3, seed=2, task=WOOD_TASK, skills=[wood_skill],
                                                        skill_max_steps=5, autoreset=True))
    assert s.actions[-1] == f"skill:{wood_skill}" and len(s.actions) == 18
    r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[17, 17, 0]))
    assert list(r.frames)[:2] == [5, 5] and r.frames[2] == 1  # K caps the skill; primitives take one frame
    total = 0
    for _ in range(40):
        r = stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[17, 17, 17]))
        total += sum(r.frames)
        if all(i.success or i.was_reset for i in r.infos):
            break
    assert any("collect_wood" in i.achievements for i in r.infos) or all(i.success for i in r.infos)
    assert total > 3


def assert_frames(frames: env_pb2.EpisodeFrames, episode: common_pb2.EpisodeSummary, k: int) -> None:
    """``k`` 64x64 RGB PNGs spread over the episode, from its first observation to its last frame."""
    assert len(frames.png) == len(frames.steps) == min(k, episode.steps + 1)
    assert frames.steps[0] == 0 and frames.steps[-1] == episode.steps and list(frames.steps) == sorted(frames.steps)
    for png in frames.png:
        image = PIL.Image.open(io.BytesIO(png))
        assert png.startswith(PNG_SIGNATURE) and image.format == "PNG" and image.mode == "RGB"
        assert image.size == (64, 64) and len(png) < 20_000
        assert np.asarray(image).std() > 0  # a picture of the world, not a blank


def test_run_skill_summarises_episodes_with_frames_where_asked(env_server, wood_skill) -> None:
    r = env_server.stub.RunSkill(env_pb2.RunSkillRequest(skill=wood_skill, episodes=3, max_steps=200, task=WOOD_TASK,
                                                         seed=7, frames_per_episode=3))
    assert len(r.episodes) == 3
    assert r.success_rate == pytest.approx(sum(e.success for e in r.episodes) / 3)
    assert r.success_rate >= 2 / 3  # trees are near the spawn point in Crafter
    ep = next(e for e in r.episodes if e.success)
    assert "collect_wood" in ep.achievements and "+1 wood" in ep.text and ep.end_reason == "success"
    assert {i.item: i.count for i in ep.final_inventory}["wood"] >= 1
    assert len(r.frames) == 3
    for frames, episode in zip(r.frames, r.episodes, strict=True):
        assert episode.steps >= 3
        assert_frames(frames, episode, 3)


# --- bad input: each gets a clear status, and the server stays healthy ------------------------------

def test_unknown_session(env_server) -> None:
    code, details = rpc_error(env_server.stub.Step, env_pb2.StepRequest(session_id="missing", actions=[0]))
    assert code == grpc.StatusCode.NOT_FOUND and "missing" in details
    assert_healthy(env_server)


def test_action_out_of_range(env_server) -> None:
    s = env_server.stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=2))
    code, details = rpc_error(env_server.stub.Step, env_pb2.StepRequest(session_id=s.session_id, actions=[0, 17]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "out of range" in details
    code, _ = rpc_error(env_server.stub.Step, env_pb2.StepRequest(session_id=s.session_id, actions=[-1, 0]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert_healthy(env_server)


def test_batch_larger_than_session(env_server) -> None:
    s = env_server.stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=2))
    code, details = rpc_error(env_server.stub.Step,
                              env_pb2.StepRequest(session_id=s.session_id, actions=[0] * 100000))
    # Refused by its size before the session is looked up: no session holds more envs than the server's limit.
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "actions has 100000 entries; the limit is 8" in details
    code, details = rpc_error(env_server.stub.Step, env_pb2.StepRequest(session_id=s.session_id, actions=[0] * 3))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "2 envs" in details
    assert_healthy(env_server)


def test_num_envs_over_limit_and_bad_fields(env_server) -> None:
    code, details = rpc_error(env_server.stub.CreateSession, env_pb2.CreateSessionRequest(num_envs=9))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "num_envs=9" in details and "1..8" in details
    code, details = rpc_error(env_server.stub.CreateSession, env_pb2.CreateSessionRequest(
        num_envs=1, reward_terms=[common_pb2.RewardTerm(kind="bogus")], primitive_actions=["teleport"]))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "bogus" in details
    # A task the backend does not offer is not found, with what it offers (the whole game and its achievements).
    code, details = rpc_error(env_server.stub.CreateSession, env_pb2.CreateSessionRequest(
        num_envs=1, task=common_pb2.TaskSpec(name="fly_to_moon")))
    assert code == grpc.StatusCode.NOT_FOUND and "fly_to_moon" in details and "collect_diamond" in details
    code, details = rpc_error(env_server.stub.CreateSession, env_pb2.CreateSessionRequest(
        num_envs=1, skills=["no_such_skill"]))
    assert code == grpc.StatusCode.NOT_FOUND and "no_such_skill" in details
    assert_healthy(env_server)


def test_sessions_per_server_limit(env_server) -> None:
    stub = env_server.stub
    opened = []
    with pytest.raises(grpc.RpcError) as info:
        for _ in range(10):
            opened.append(stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1)).session_id)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "CloseSession" in info.value.details()
    assert len(opened) == 4
    stub.CloseSession(env_pb2.CloseSessionRequest(session_id=opened[0]))
    assert_healthy(env_server)  # a closed session frees its slot


BAD_SKILLS = {
    "not_python": ("def skill(agent)\n    yield 'noop'\n", grpc.StatusCode.INVALID_ARGUMENT, "SyntaxError"),
    "import_os": ("import os\ndef skill(agent):\n    yield 'noop'\n", grpc.StatusCode.INVALID_ARGUMENT, "import"),
    "open_file": ("def skill(agent):\n    open('/etc/passwd')\n    yield 'noop'\n",
                  grpc.StatusCode.INVALID_ARGUMENT, "open"),
    "subclasses": ("def skill(agent):\n    x = ().__class__.__bases__[0].__subclasses__()\n    yield 'noop'\n",
                   grpc.StatusCode.INVALID_ARGUMENT, "__class__"),
    "busy_loop": ("def skill(agent):\n    while True:\n        pass\n    yield 'noop'\n",
                  grpc.StatusCode.INVALID_ARGUMENT, "line 2"),
    "never_yields": ("def skill(agent):\n    return\n    yield 'noop'\n", grpc.StatusCode.INVALID_ARGUMENT,
                     "NoYield"),
    "not_generator": ("def skill(agent):\n    return 'noop'\n", grpc.StatusCode.INVALID_ARGUMENT, "generator"),
    "invalid_action": ("def skill(agent):\n    yield 'fly'\n", grpc.StatusCode.INVALID_ARGUMENT, "InvalidAction"),
    "huge_power": ("def skill(agent):\n    x = 10 ** 10 ** 9\n    yield 'noop'\n",
                   grpc.StatusCode.DEADLINE_EXCEEDED, "line 2"),
    "ten_megabytes": ("#" * (10 * 1024 * 1024), grpc.StatusCode.INVALID_ARGUMENT, "limit"),
}


@pytest.mark.parametrize("case", sorted(BAD_SKILLS))
def test_bad_skill_is_rejected_and_server_survives(env_server, case: str) -> None:
    code_text, expected_code, expected_text = BAD_SKILLS[case]
    code, details = rpc_error(env_server.stub.RegisterSkill,
                              env_pb2.RegisterSkillRequest(name=f"bad_{case}", code=code_text))
    assert code == expected_code, details
    assert expected_text in details
    with pytest.raises(grpc.RpcError) as info:
        env_server.stub.RunSkill(env_pb2.RunSkillRequest(skill=f"bad_{case}", episodes=1))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND  # nothing half-registered
    assert_healthy(env_server)


# RegisterSkill runs a skill on test worlds first, so these fail only in a branch the test worlds do not
# reach: with the start inventory of RICH_TASK.
RICH_TASK = common_pb2.TaskSpec(name="collect_wood", start_inventory=[common_pb2.ItemCount(item="wood", count=9)])
IF_RICH = " if agent.inventory['wood'] >= 9 else 0"


def test_skill_failing_mid_episode_reports_line_and_episode_goes_on(env_server) -> None:
    code = ("def skill(agent):\n    yield 'noop'\n    yield 'noop'\n    x = [1][5]" + IF_RICH + "\n    yield 'noop'\n")
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="fails_late", code=code, replace=True))
    r = env_server.stub.RunSkill(env_pb2.RunSkillRequest(skill="fails_late", episodes=2, max_steps=50,
                                                         task=RICH_TASK, frames_per_episode=8))
    for ep, frames in zip(r.episodes, r.frames, strict=True):
        assert ep.error.type == "IndexError" and ep.error.line == 4 and ep.error.code_line == "x = [1][5]" + IF_RICH
        assert ep.steps == 2 and ep.end_reason == "error"
        assert list(frames.steps) == [0, 1, 2]  # a short episode: every frame, the failing one last
        assert_frames(frames, ep, 8)
    s = env_server.stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1, skills=["fails_late"],
                                                                   skill_max_steps=10, autoreset=True,
                                                                   task=RICH_TASK))
    step = env_server.stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[17]))
    assert step.infos[0].skill_error.type == "IndexError" and step.frames[0] == 2
    step = env_server.stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[0]))
    assert step.frames[0] == 1


def test_runaway_skill_at_runtime_is_killed_with_its_line(env_server) -> None:
    code = ("def skill(agent):\n    yield 'noop'\n    n = 10 ** 10 ** 9" + IF_RICH + "\n    yield 'noop'\n")
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="slow_late", code=code, replace=True))
    r = env_server.stub.RunSkill(env_pb2.RunSkillRequest(skill="slow_late", episodes=1, max_steps=20,
                                                         task=RICH_TASK))
    assert r.episodes[0].error.type == "Timeout" and r.episodes[0].error.line == 3
    assert_healthy(env_server)


def test_memory_bomb_is_contained(env_server) -> None:
    code = ("def skill(agent):\n    yield 'noop'\n    x = [0] * (10 ** 10)" + IF_RICH + "\n    yield 'noop'\n")
    env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name="mem_late", code=code, replace=True))
    r = env_server.stub.RunSkill(env_pb2.RunSkillRequest(skill="mem_late", episodes=1, max_steps=20,
                                                         task=RICH_TASK))
    assert r.episodes[0].error.type == "MemoryLimit"
    assert not r.frames  # none asked for, none sent
    assert_healthy(env_server)


def test_run_skill_limits(env_server, wood_skill) -> None:
    code, details = rpc_error(env_server.stub.RunSkill, env_pb2.RunSkillRequest(skill=wood_skill, episodes=1000))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "episodes=1000" in details
    code, details = rpc_error(env_server.stub.RunSkill, env_pb2.RunSkillRequest(skill=wood_skill, episodes=1,
                                                                                 frames_per_episode=9))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "frames_per_episode=9 must be in 0..8" in details
    code, details = rpc_error(env_server.stub.RunSkill, env_pb2.RunSkillRequest(skill=wood_skill, episodes=1,
                                                                                 frames_per_episode=-1))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "frames_per_episode=-1" in details
    code, _ = rpc_error(env_server.stub.RunSkill, env_pb2.RunSkillRequest(skill="nope", episodes=1))
    assert code == grpc.StatusCode.NOT_FOUND


def test_register_existing_name_needs_replace(env_server, wood_skill) -> None:
    code, details = rpc_error(env_server.stub.RegisterSkill,
                              env_pb2.RegisterSkillRequest(name=wood_skill, code=COLLECT_WOOD))
    assert code == grpc.StatusCode.ALREADY_EXISTS and "replace" in details
    reply = env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=wood_skill, code=COLLECT_WOOD,
                                                                       replace=True))
    assert reply.skill.version >= 2
    names = [s.name for s in env_server.stub.ListSkills(env_pb2.ListSkillsRequest()).skills]
    assert wood_skill in names


def test_idle_sessions_expire(env_server) -> None:
    manager = env_server.servicer.sessions
    s = env_server.stub.CreateSession(env_pb2.CreateSessionRequest(num_envs=1))
    manager.get(s.session_id).last_used -= 10_000  # pretend it sat idle past the limit
    assert s.session_id in manager.reap()
    code, _ = rpc_error(env_server.stub.Step, env_pb2.StepRequest(session_id=s.session_id, actions=[0]))
    assert code == grpc.StatusCode.NOT_FOUND


def test_recording_session_returns_episode_summaries(env_server) -> None:
    s = env_server.stub.CreateSession(env_pb2.CreateSessionRequest(
        num_envs=2, seed=4, episode_length=5, autoreset=True, record_trajectories=True, task=WOOD_TASK))
    for _ in range(5):
        r = env_server.stub.Step(env_pb2.StepRequest(session_id=s.session_id, actions=[1, 5]))
    for info in r.infos:
        assert info.episode.steps == 5 and info.episode.end_reason == "time_limit"
        assert "end: time_limit at step 5" in info.episode.text
