"""No Crafter word outside the env server: every game fact the planner, the learner and the critic use is read from
``Describe``.

Every prompt the planner and the critic can render for MineDojo is rendered from the MineDojo stand-in's Describe
(the env server's own ``describe`` over tests/fakes/fake_minedojo.py; the program prompts, which need Crafter's map
memory, only where the env supports programs) and searched for Crafter's text: its name, and its
action and achievement names that MineDojo does not have (read from the recorded Crafter Describe, so the list is
the game's own). With the stand-in's idle action renamed, "noop" is gone from them too: no prompt types it. Then
the planner's, learner's and critic's code (its strings, outside docstrings) and prompt files (outside their
header comments) are searched for the same words.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path
from typing import Any

import pytest
from describe_support import recorded_describe
from google.protobuf import text_format

from rlgpt.v1 import common_pb2, critic_pb2, env_pb2, learner_pb2, planner_pb2
from services.critic.judge import Judge, deterministic_checks
from services.critic.settings import CriticSettings
from services.env_server.describe import describe as describe_backend
from services.env_server.settings import EnvServerSettings
from services.planner.agents.fast import FastAgent
from services.planner.agents.kept_plan import kept_plan_prompt
from services.planner.agents.one import OneAgent
from services.planner.agents.slow import SlowAgent
from services.planner.program_writer import program_prompt
from services.planner.programs import programs_supported
from services.planner.prompts import EvalProtocol
from services.planner.skill_library import LibrarySkill, SkillLibrary

ROOT = Path(__file__).resolve().parents[3]
SERVICES = ("planner", "learner", "critic")
PROTOCOL = EvalProtocol(test_episodes=4, test_steps=300, env_frames=20000, eval_episodes=8, final_frames=1000)
STRINGS = {tokenize.STRING, *(getattr(tokenize, kind) for kind in ("FSTRING_START", "FSTRING_MIDDLE")
                              if hasattr(tokenize, kind))}
"""String tokens (Python 3.12 splits an f-string into parts)."""
IDLE = "stand_still"
"""The stand-in's idle action, renamed from MineDojo's "noop" (which is Crafter's name for it too)."""


def crafter_words() -> set[str]:
    """Crafter's name, and the names of its actions and achievements MineDojo does not share (read from the
    recorded Crafter Describe), and the naming Crafter gives collect achievements."""
    crafter = recorded_describe()
    return {"Crafter", "crafter", "collect_{"} | {name for name in (*crafter.actions, *crafter.achievements)
                                                  if "_" in name}


def minedojo_describe(fake: Any) -> env_pb2.DescribeResponse:
    """The env server's Describe of the MineDojo stand-in, its idle action renamed wherever it is named."""
    served = describe_backend("minedojo", EnvServerSettings())
    assert served.available, served.unavailable_reason
    text = re.sub(r"\bnoop\b", IDLE, text_format.MessageToString(served))
    return text_format.Parse(text, env_pb2.DescribeResponse())


def found(text: str, words: set[str]) -> list[str]:
    """The words of ``words`` in ``text`` (whole names: "do" in "undo" is not the action)."""
    return sorted(w for w in words if re.search(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])", text))


def rendered_prompts(describe: env_pb2.DescribeResponse, tmp_path: Path) -> dict[str, str]:
    """Every prompt the planner and the critic render, for a MineDojo task, a revision where there is one."""
    library = SkillLibrary(tmp_path / "library.json")
    library.add(LibrarySkill("get_logs", "Collect 3 logs.", "def skill(agent):\n    yield 'attack'\n", 0.75,
                             "get_logs"))
    task = common_pb2.TaskSpec(name="craft_planks", success=[common_pb2.Condition(achievement="craft_planks")])
    logs = [common_pb2.Condition(inventory=common_pb2.ItemCount(item="log", count=3))]
    first = planner_pb2.SubTask(name="get_logs", description="collect 3 logs", success=logs,
                                decision=planner_pb2.DECISION_CODE)
    goal = planner_pb2.SubTask(name="craft_planks", description="craft planks", success=list(task.success),
                               decision=planner_pb2.DECISION_RL, skills=["get_logs"])
    plan = planner_pb2.Plan(subtasks=[first, goal], rationale="logs first")
    start = [common_pb2.ItemCount(item="log", count=3)]
    previous = learner_pb2.RLConfig(name=goal.name, primitive_actions=[IDLE, "forward", "attack"],
                                    episode_length=300, env_frames=20000)
    fast = FastAgent(None, None, describe, library, seed=3, protocol=PROTOCOL)
    prompts = {
        "slow": SlowAgent(None, describe, library, PROTOCOL).prompt(task, previous=plan, feedback="- get_logs")[0],
        "fast_code": fast.skill_prompt(first, previous_code="def skill(agent):\n    yield 'forward'\n",
                                       error="(none)", feedback="walks into a wall", start_inventory=start),
        "fast_rl": fast.rl_prompt(goal, env_frames=20000, previous=previous, feedback="never crafts",
                                  start_inventory=start)[0],
        "kept_plan": kept_plan_prompt(fast, task, plan, success_rate=0.25, failed=[], env_frames=100000,
                                      own_reward="stage +1 and success +10")[0],
    }
    # Programs compile only where the skill API has map memory (Crafter's); elsewhere their prompts never render.
    formats = ("python", "program") if programs_supported(describe) else ("python",)
    if "program" in formats:
        prompts["fast_program"] = program_prompt(describe, PROTOCOL, first, feedback="none")
    for skill_format in formats:
        one = OneAgent(None, None, describe, library, protocol=PROTOCOL, skill_format=skill_format)
        prompts[f"one_{skill_format}"] = one.prompt(task, previous=plan, feedback="get_logs: failed")[0]
    request = critic_pb2.JudgeRequest(
        subtask=goal.name, description=goal.description, success=list(goal.success), decision="code",
        rollouts=[common_pb2.EpisodeSummary(steps=300, text="frame 0\nforward x40\nattack x20", end_reason="time")],
        code="def skill(agent):\n    yield 'forward'\n", rules=describe.rules, start_inventory=start,
        test_protocol=PROTOCOL.code_test(start), game=describe.display_name)
    judge = Judge(CriticSettings(use_llm=False))
    prompts["critic"] = judge.prompt(request, deterministic_checks(request, judge.settings))
    return prompts


def test_every_prompt_rendered_from_minedojos_describe_has_no_crafter_text(fake: Any, tmp_path: Path) -> None:
    describe = minedojo_describe(fake)
    prompts = rendered_prompts(describe, tmp_path)
    words = crafter_words() - set(describe.actions) - set(describe.achievements) | {"noop"}
    for name, prompt in prompts.items():
        assert not found(prompt, words), (name, found(prompt, words))
    assert "the game Minecraft (MineDojo)" in prompts["slow"] and "the game Minecraft (MineDojo)" in prompts["critic"]
    assert f'"primitive_actions": ["{IDLE}", "forward"' in prompts["fast_rl"]  # the example's actions: its roles


def _code_strings(path: Path) -> str:
    """The string literals of a module, docstrings left out (they may say what Describe serves)."""
    source = path.read_text()
    # Docstrings: every string that stands alone as a statement (of a module, class or function, or under an
    # attribute).
    docstrings = {(node.value.lineno, node.value.col_offset) for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                  and isinstance(node.value.value, str)}
    return "\n".join(token.string for token in tokenize.generate_tokens(io.StringIO(source).readline)
                     if token.type in STRINGS and token.start not in docstrings)


def _prompt_text(path: Path) -> str:
    """A prompt template without its header comment (what the model never sees)."""
    return "\n".join(line for line in path.read_text().splitlines() if not line.startswith("#"))


SOURCES = sorted(p for service in SERVICES for pattern in ("**/*.py", "prompts/*.txt")
                 for p in (ROOT / "services" / service).glob(pattern))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_crafter_word_in_the_code_or_prompts_of_planner_learner_and_critic(path: Path) -> None:
    text = _prompt_text(path) if path.suffix == ".txt" else _code_strings(path)
    words = crafter_words() | {"noop"}
    assert not found(text, words), found(text, words)
