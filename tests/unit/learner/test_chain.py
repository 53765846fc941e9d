"""A chain request's checks and the session it asks for, without env server or model."""

import pytest

from rlgpt.errors import FailedPrecondition, InvalidArgument
from rlgpt.v1 import common_pb2, learner_pb2
from services.learner.chain import (
    MAX_CHAIN_LINKS,
    chain_backend,
    chain_skills,
    check_chain,
    evaluate_chain,
    skill_steps,
)
from services.learner.jobs import write_job_config
from services.learner.spaces import job_actions

TASK = common_pb2.TaskSpec(name="make_wood_pickaxe")


def request(*links: learner_pb2.ChainLink, **fields) -> learner_pb2.EvaluateRequest:
    return learner_pb2.EvaluateRequest(chain=list(links), episodes=2, **{"task": TASK, **fields})


def test_a_good_chain_passes() -> None:
    check_chain(request(learner_pb2.ChainLink(name="wood", skill="collect_wood"),
                        learner_pb2.ChainLink(name="pickaxe", job_id="j1", max_frames=200)))


@pytest.mark.parametrize(("req", "needle"), [
    (request(learner_pb2.ChainLink(name="wood")), "chain[0] ('wood'): set its controller"),
    (request(learner_pb2.ChainLink(name="wood", skill="")), "chain[0] ('wood'): set its controller"),
    (request(learner_pb2.ChainLink(name="w", skill="s", max_frames=-1)), "max_frames=-1 must be >= 0"),
    (request(*[learner_pb2.ChainLink(name="w", skill="s")] * (MAX_CHAIN_LINKS + 1)),
     f"chain length={MAX_CHAIN_LINKS + 1} must be in 1..{MAX_CHAIN_LINKS}"),
    (request(learner_pb2.ChainLink(name="w", skill="s"), task=common_pb2.TaskSpec()), "task is required"),
    (learner_pb2.EvaluateRequest(chain=[learner_pb2.ChainLink(name="w", skill="s")], episodes=1), "task is required"),
    (request(learner_pb2.ChainLink(name="w", skill="s"), episode_length=-5), "episode_length=-5 must be >= 0"),
])
def test_bad_chains_say_what_to_fix(req: learner_pb2.EvaluateRequest, needle: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        check_chain(req)
    assert needle in str(info.value)


def test_the_session_holds_every_skill_and_maps_each_job_onto_it() -> None:
    configs = {"j1": learner_pb2.RLConfig(backend="crafter", skills=["collect_wood", "place_table"],
                                          primitive_actions=["noop", "do"], skill_max_steps=8),
               "j2": learner_pb2.RLConfig(backend="crafter", skill_max_steps=1)}
    links = [learner_pb2.ChainLink(skill="place_table"), learner_pb2.ChainLink(job_id="j1"),
             learner_pb2.ChainLink(job_id="j2")]
    assert chain_skills(links, configs) == ["place_table", "collect_wood"]
    assert job_actions(configs["j1"], ["noop", "left", "do"]) == ["noop", "do", "skill:collect_wood",
                                                                 "skill:place_table"]
    assert job_actions(configs["j2"], ["noop", "left"]) == ["noop", "left"]
    assert chain_backend(configs) == "crafter" and chain_backend({}) == ""
    with pytest.raises(InvalidArgument, match="different backends"):
        chain_backend({**configs, "j3": learner_pb2.RLConfig(backend="minedojo")})


def test_k_lets_a_coded_link_run_its_budget_within_the_server_limit() -> None:
    configs = {"j1": learner_pb2.RLConfig(skill_max_steps=8)}
    coded = [learner_pb2.ChainLink(skill="s", max_frames=300), learner_pb2.ChainLink(job_id="j1")]
    assert skill_steps(coded, configs, episode_length=1000, server_max=1000) == 300
    assert skill_steps([learner_pb2.ChainLink(skill="s")], configs, episode_length=5000, server_max=1000) == 1000
    assert skill_steps([learner_pb2.ChainLink(job_id="j1")], configs, episode_length=1000, server_max=1000) == 8


def test_a_job_without_a_checkpoint_is_failed_precondition_before_any_session(tmp_path) -> None:
    job_dir = tmp_path / "20260101-000000-abcdef"
    job_dir.mkdir()
    write_job_config(job_dir, learner_pb2.RLConfig(name="table"), {})
    chain = request(learner_pb2.ChainLink(name="table", job_id=job_dir.name))
    with pytest.raises(FailedPrecondition, match=f"job {job_dir.name} has no checkpoint yet"):
        evaluate_chain(chain, {job_dir.name: job_dir}, "127.0.0.1:1")  # no env server there: never reached
