import pytest

from rlgpt.config import ServerSettings
from rlgpt.errors import ConfigError
from services.env_server.settings import EnvServerSettings


def test_env_vars_then_overrides() -> None:
    s = EnvServerSettings.load({"max_sessions": 3}, environ={"RLGPT_ENV_MAX_SESSIONS": "9",
                                                             "RLGPT_ENV_SESSION_IDLE_SECONDS": "2.5"})
    assert s.max_sessions == 3 and s.session_idle_seconds == 2.5


def test_all_problems_are_reported_together() -> None:
    with pytest.raises(ConfigError) as info:
        EnvServerSettings.load({"bogus": 1}, environ={"RLGPT_ENV_MAX_SESSIONS": "many",
                                                      "RLGPT_ENV_MAX_CODE_BYTES": "1.5"})
    problems = info.value.problems
    assert len(problems) == 3
    assert any("bogus" in p for p in problems)
    assert any("RLGPT_ENV_MAX_SESSIONS='many'" in p for p in problems)


def test_range_and_cross_field_checks_are_reported_together() -> None:
    with pytest.raises(ConfigError) as info:
        EnvServerSettings.load({"max_sessions": 0, "default_skill_steps": 50, "max_skill_steps": 10})
    text = str(info.value)
    assert "max_sessions=0: must be >= 1" in text and "default_skill_steps=50" in text


def test_every_field_is_documented() -> None:
    for cls in (ServerSettings, EnvServerSettings):
        assert all(help_text.strip() for help_text in cls.help().values()), cls


def test_bool_parsing() -> None:
    from rlgpt.config import _coerce

    assert _coerce("yes", bool) is True and _coerce("0", bool) is False
    with pytest.raises(ValueError):
        _coerce("maybe", bool)
