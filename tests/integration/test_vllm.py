"""The agents against a real vLLM server on CPU (`make test-e2e`): every answer comes back schema-valid.

vLLM runs from ``.venv-vllm`` with the embedded Gemma 3 270M converted to a Hugging Face folder (`make
vllm-setup`; a missing setup fails with that command, it never skips). The prompts are the product's: the game's
names and rules come from a real env server's Describe, the coded skill is tested by RegisterSkill/RunSkill, and the
critic judges that skill's measured episodes. A 270M model writes poor skills; what is checked is the protocol:
``response_format`` json_schema is enforced (strict JSON, no free whitespace, the env's enums). Each call's latency
and tokens are printed (and the server's start-up time).
"""

from __future__ import annotations

import json
import time

import pytest

from rlgpt.config import LLMSettings
from rlgpt.llm import CallRecord, LLMClient
from rlgpt.llm.vllm_server import VllmServer, VllmSettings
from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, planner_pb2
from services.critic.judge import Judge
from services.critic.settings import CriticSettings
from services.planner.agents.answers import SkillCandidate
from services.planner.agents.fast import FastAgent
from services.planner.agents.slow import SlowAgent
from services.planner.schemas import SkillAnswer
from services.planner.skill_library import SkillLibrary

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]
SUBTASK = planner_pb2.SubTask(name="collect_wood", description="collect wood from a tree",
                              success=[common_pb2.Condition(achievement="collect_wood")])


class Report:
    """Lines for the terminal (shown without -s: output capture is suspended for them) and for a log file."""

    def __init__(self, pytestconfig: pytest.Config, path):
        self.capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
        self.terminal = pytestconfig.pluginmanager.get_plugin("terminalreporter")
        self.path = path

    def line(self, text: str) -> None:
        with self.path.open("a") as out:
            out.write(text + "\n")
        if self.capture is not None and self.terminal is not None:
            with self.capture.global_and_fixture_disabled():
                self.terminal.write_line(f"[vllm e2e] {text}")

    def call(self, what: str, record: CallRecord) -> None:
        rate = record.completion_tokens / record.latency_seconds if record.latency_seconds else 0.0
        self.line(f"{what}: {record.latency_seconds:.1f} s, {record.prompt_tokens} prompt + "
                  f"{record.completion_tokens} completion tokens ({rate:.1f} tokens/s), attempts {record.attempts}")


@pytest.fixture(scope="module")
def report(pytestconfig, tmp_path_factory) -> Report:
    return Report(pytestconfig, tmp_path_factory.mktemp("vllm-e2e") / "calls.log")


@pytest.fixture(scope="module")
def server(tmp_path_factory, report: Report):
    log_path = tmp_path_factory.mktemp("vllm-server") / "vllm.log"
    start = time.monotonic()
    with VllmServer(VllmSettings.load(), log_path=log_path) as running:
        report.line(f"server {running.settings.served_model_name} up in {time.monotonic() - start:.1f} s "
                    f"at {running.base_url} (log {log_path})")
        yield running


@pytest.fixture(scope="module")
def llm(server: VllmServer, tmp_path_factory) -> LLMClient:
    settings = LLMSettings(model=server.settings.served_model_name, temperature=0.0, max_tokens=768,
                           timeout_seconds=900, max_retries=0)
    return LLMClient(settings, base_url=server.base_url, record_dir=tmp_path_factory.mktemp("llm"),
                     structured="json_schema")


@pytest.fixture(scope="module")
def describe(env_server) -> env_pb2.DescribeResponse:
    return env_server.stub.Describe(env_pb2.DescribeRequest())


@pytest.fixture(scope="module")
def fast(llm: LLMClient, env_server, describe, tmp_path_factory) -> FastAgent:
    library = SkillLibrary(tmp_path_factory.mktemp("library") / "library.json")
    return FastAgent(llm, env_server.stub, describe, library, test_episodes=2, test_steps=100)


@pytest.fixture(scope="module")
def skill(fast: FastAgent, report: Report) -> SkillCandidate:
    [candidate] = fast.write_skill(SUBTASK)
    assert candidate.record is not None, f"no answer: {candidate.error}"
    report.call("fast agent, code skill", candidate.record)
    return candidate


def strict_json(record: CallRecord) -> dict:
    """The answer as the server sent it: plain JSON (no fences, no prose) with no whitespace outside strings."""
    assert "\n" not in record.response and ": " not in record.response.split('"')[0], record.response[:300]
    return json.loads(record.response)


def conditions_use_env_names(conditions: list[dict], describe: env_pb2.DescribeResponse) -> None:
    for condition in conditions:
        assert (condition.get("achievement") in describe.achievements) != (condition.get("item") in describe.items)


def test_slow_agent_plans_with_the_envs_names(llm: LLMClient, describe, report: Report, tmp_path) -> None:
    agent = SlowAgent(llm, describe, SkillLibrary(tmp_path / "library.json"))
    plan, record = agent.plan(common_pb2.TaskSpec(name="collect_wood"))
    report.call("slow agent, plan", record)
    answer = strict_json(record)
    assert 1 <= len(answer["subtasks"]) == len(plan.subtasks)
    for subtask in answer["subtasks"]:
        assert subtask["decision"] in ("code", "rl") and subtask["skills"] == []  # the library is empty
        conditions_use_env_names(subtask["success"], describe)
    assert all(s.success for s in plan.subtasks)


def test_fast_agent_writes_a_skill_the_env_server_tests(skill: SkillCandidate) -> None:
    answer = strict_json(skill.record)
    assert set(answer) == {"name", "description", "code"} and all(isinstance(v, str) for v in answer.values())
    # The name's pattern and the code's minimum length travel in the schema, so the grammar enforces them.
    assert isinstance(skill.answer, SkillAnswer), skill.error
    # Judged by the env server: registered and run (a rate), or refused with a reason.
    assert skill.success_rate >= 0 or (skill.error is not None and skill.error.message)


def test_fast_agent_writes_an_rl_config_from_the_envs_names(fast: FastAgent, describe, report: Report) -> None:
    config, record = fast.write_rl_config(SUBTASK, env_frames=10000)
    report.call("fast agent, RL config", record)
    answer = strict_json(record)
    assert set(answer["primitive_actions"]) <= set(describe.actions) and answer["primitive_actions"]
    targets = {"", "*", *describe.achievements, *describe.items}
    for term in answer["reward_terms"]:
        assert term["kind"] in describe.reward_kinds and term.get("target", "") in targets
    assert answer["skills"] == [] and config.env_frames == 10000 and config.primitive_actions


def test_critic_judges_the_skills_episodes(llm: LLMClient, fast: FastAgent, skill: SkillCandidate, describe,
                                           report: Report) -> None:
    # The request the planner's loop sends after a coded skill's test (services/planner/loops.py, _judge).
    request = critic_pb2.JudgeRequest(
        subtask=SUBTASK.name, description=SUBTASK.description, success=list(SUBTASK.success),
        rollouts=skill.episodes, code=skill.answer.code if skill.answer else "",
        errors=[skill.error] if skill.error else [],
        decision="code", rules=describe.rules, test_protocol=fast.protocol.judge_text("code", []))
    verdict, record = Judge(CriticSettings(), llm).judge_with_record(request)
    assert record is not None, list(verdict.findings)  # the LLM answered: no deterministic fallback
    report.call("critic, verdict", record)
    answer = strict_json(record)
    assert answer["target"] in ("keep", "fast", "slow") and isinstance(answer["success"], bool)
    assert not [f for f in verdict.findings if f.startswith("llm_unavailable")]
    assert verdict.diagnosis and verdict.target in (critic_pb2.TARGET_KEEP, critic_pb2.TARGET_FAST,
                                                    critic_pb2.TARGET_SLOW)
