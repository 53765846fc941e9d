"""The embedded server's requests get the longer timeout (an embedded run under load timed out 5 times in a row at
120 s, each retry queued behind the request the server was still answering, and the run paused)."""

from __future__ import annotations

from rlgpt.config import LLMSettings
from rlgpt.llm.factory import embedded_env, local_timeout


def test_the_services_talk_to_the_embedded_server_with_its_own_timeout() -> None:
    settings = LLMSettings.load(environ={})
    env = embedded_env(settings, "http://127.0.0.1:1234/v1")
    assert env["RLGPT_LLM_BASE_URL"] == "http://127.0.0.1:1234/v1"
    assert env["RLGPT_LLM_STRUCTURED"] == "json_object"
    assert float(env["RLGPT_LLM_TIMEOUT_SECONDS"]) == 900.0 > settings.timeout_seconds
    # what the services load from it
    assert LLMSettings.load(environ=env).timeout_seconds == 900.0


def test_a_longer_timeout_asked_for_is_kept_and_a_shorter_local_one_can_be_set() -> None:
    assert local_timeout(LLMSettings.load(environ={"RLGPT_LLM_TIMEOUT_SECONDS": "3600"})) == 3600.0
    assert local_timeout(LLMSettings.load(environ={"RLGPT_LLM_LOCAL_TIMEOUT_SECONDS": "60"})) == 120.0


def test_the_embedded_servers_calls_ask_for_at_most_1024_tokens_and_remote_ones_for_the_longest_answer() -> None:
    """A skill's code may be 8,000 characters and an RL answer carries up to 3 macro actions of that size: the
    default must leave room for them (an answer cut at 1,024 tokens is no JSON), while the embedded server's
    8,192-token context keeps its calls at 1,024."""
    import json

    from rlgpt.llm.chat_server import estimated_tokens
    from rlgpt.llm.factory import EMBEDDED_MAX_TOKENS
    from services.planner.schemas import MAX_MACRO_ACTIONS, SkillAnswer

    settings = LLMSettings.load(environ={})
    code = ("def skill(agent):\n" + "    yield agent.step_to('tree') or 'do'  # a line of typical skill code\n" * 200)
    longest = SkillAnswer(name="n" * 40, description="d" * 400, code=code[:8000]).model_dump_json()
    assert len(json.loads(longest)["code"]) == 8000
    tokens = len(longest) * 2 // 7  # code runs at about 3.5 characters per token (the relay counts 4)
    assert estimated_tokens(longest) < tokens < settings.max_tokens // 3
    assert MAX_MACRO_ACTIONS * tokens < settings.max_tokens  # an RL answer's macro actions, each that long
    env = embedded_env(settings, "http://127.0.0.1:1234/v1")
    assert LLMSettings.load(environ=env).max_tokens == EMBEDDED_MAX_TOKENS == 1024
    assert embedded_env(LLMSettings.load(environ={"RLGPT_LLM_MAX_TOKENS": "512"}), "u")["RLGPT_LLM_MAX_TOKENS"] == "512"
