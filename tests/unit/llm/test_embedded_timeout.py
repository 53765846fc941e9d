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
