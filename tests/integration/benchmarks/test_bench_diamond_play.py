"""bench-diamond's command line and its chain alone, on a real env server."""

from __future__ import annotations

from benchmarks.crafter.diamond import PLAN_RUN, SKILL_PREFIX, load_plan, plan_config, play_plan_alone
from rlgpt.v1 import env_pb2


def test_the_chain_alone_plays_each_world_once_and_says_how_far_it_got(env_server) -> None:
    plan = load_plan(PLAN_RUN)
    for name, code, _ in plan.steps:
        env_server.stub.RegisterSkill(env_pb2.RegisterSkillRequest(name=SKILL_PREFIX + name, code=code,
                                                                   replace=True))
    config = plan_config(plan, 1000, 0)
    response, seconds = play_plan_alone(f"127.0.0.1:{env_server.port}", config, 3, 40)
    assert len(response.episodes) == 3 and seconds > 0
    links = {link.name: link for link in response.links}
    assert list(links) == [SKILL_PREFIX + name for name, _, _ in plan.steps]
    # Every episode starts on the first step; each later step is reached by those that did the one before.
    assert links[SKILL_PREFIX + plan.steps[0][0]].reached == 3
    for before, after in zip(response.links, response.links[1:], strict=False):
        assert after.reached == before.succeeded


