"""The settings loader (rlgpt/config.py) and the settings dataclasses: the shared ones and each service's."""

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from rlgpt.config import LLMSettings, ServerSettings
from rlgpt.errors import ConfigError
from services.critic.settings import CriticSettings
from services.env_server.settings import EnvServerSettings
from services.learner.settings import LearnerSettings
from services.planner.settings import PlannerSettings

README = Path(__file__).resolve().parents[3] / "README.md"
# What the services load (rlgpt/app/cli.py); backends' own settings (RLGPT_MINEDOJO_*) are documented with them.
SERVICE_SETTINGS = (ServerSettings, EnvServerSettings, LearnerSettings, PlannerSettings, CriticSettings, LLMSettings)


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


def test_choices_are_checked_with_the_ranges() -> None:
    with pytest.raises(ConfigError) as info:
        LearnerSettings.load({"runner": "slurm", "max_envs_per_worker": 0}, environ={"RLGPT_LEARNER_DEVICE": "tpu"})
    assert info.value.problems == ["runner='slurm': must be local or kubernetes", "max_envs_per_worker=0: must be >= 1",
                                   "device='tpu': must be cpu or cuda"]


def test_every_field_is_documented() -> None:
    for cls in SERVICE_SETTINGS:
        assert all(help_text.strip() for help_text in cls.help().values()), cls


def shown(default: Any) -> str:
    """A default as the README's tables write it."""
    if default == "":
        return "(empty)"
    return f"`{str(default).lower() if isinstance(default, bool) else default}`"


def test_readme_lists_every_setting_with_its_default() -> None:
    section = README.read_text().split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(RLGPT_[A-Z0-9_]+)` \| ([^|]*) \|", section, flags=re.MULTILINE)
    assert len(listed) == len(dict(listed)), "a variable is listed twice"
    expected = {f"{cls.env_prefix}_{f.name.upper()}": shown(f.default)
                for cls in SERVICE_SETTINGS for f in dataclasses.fields(cls)}
    assert dict((name, default.strip()) for name, default in listed) == expected


def test_bool_parsing() -> None:
    from rlgpt.config import _coerce

    assert _coerce("yes", bool) is True and _coerce("0", bool) is False
    with pytest.raises(ValueError):
        _coerce("maybe", bool)
