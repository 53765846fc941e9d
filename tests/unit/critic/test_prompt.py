"""The critic's LLM prompt: each section's text, and the message with frames attached where allowed."""

from __future__ import annotations

import base64
import json

from critic_samples import curve, episode, request

from rlgpt.v1 import common_pb2
from services.critic import prompt
from services.critic.checks import deterministic_checks
from services.critic.settings import CriticSettings

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def test_rollouts_show_failures_first_and_one_success_in_episode_order() -> None:
    rollouts = [episode(True), episode(True), episode(), episode(death_cause="zombie"), episode(), episode()]
    text = prompt.rollouts_text(rollouts)
    assert [line.split(":")[0] for line in text.splitlines() if line.startswith("episode")] == [
        "episode 0", "episode 2", "episode 3", "episode 4"]
    assert text.endswith("(2 more episodes not shown)")
    assert ("episode 3: success=False steps=100 return=0.00 end=time_limit death=zombie achievements=[] "
            "inventory=[empty]\n  noop x3\n  end: ...") in text
    assert prompt.rollouts_text([]) == "(none)"


def test_long_trajectories_keep_their_head_and_tail_lines() -> None:
    text = "\n".join(f"line {i:03d}" for i in range(200))
    cut = prompt._truncate_middle(text, 100)
    assert len(cut) <= 100 + len("... (190 lines left out) ...")
    assert cut.startswith("line 000\n") and cut.endswith("line 199") and "lines left out) ..." in cut
    assert prompt._truncate_middle("word " * 100, 50).endswith(" ...")  # one long line: whole words
    assert prompt._truncate_middle("short", 50) == "short"


def test_code_is_numbered_and_cut_at_whole_lines() -> None:
    assert prompt.code_text("def skill(agent):\n    yield 'do'") == "  1 | def skill(agent):\n  2 |     yield 'do'"
    skill = "\n".join(f"    step_{i:03d} = agent.step_to('stone')  # {'x' * 12}" for i in range(160))
    assert len(skill) > 8000 and prompt.code_text(skill).count("\n") == 159  # a long skill is shown whole
    long = prompt.code_text("\n".join("x = 1" * 100 for _ in range(40)))
    assert long.endswith("more lines not shown)") and len(long) <= prompt.MAX_PROMPT_CODE + 40
    assert prompt.code_text("  \n") == "(none)"


def test_an_rl_config_shows_its_macro_actions_code_with_line_numbers() -> None:
    config = {"primitive_actions": ["do"], "skill_max_steps": 8,
              "macro_actions": [{"name": "hit", "code": "def skill(agent):\n    yield 'do'"}]}
    assert prompt.rl_config_text(json.dumps(config)).splitlines() == [
        '{"primitive_actions": ["do"], "skill_max_steps": 8}', "Macro action hit:", "  1 | def skill(agent):",
        "  2 |     yield 'do'"]
    assert prompt.rl_config_text("") == "(none)"


def test_curve_shows_its_last_points() -> None:
    text = prompt.curve_text(curve([0.1 * i for i in range(12)], [float(i) for i in range(12)]))
    assert text.splitlines()[0] == "(12 points, last 10 shown)"
    assert text.splitlines()[-1] == "frames=12000 success=1.10 mean_return=11.00"
    assert prompt.curve_text(curve([0.5])) == "frames=1000 success=0.50 mean_return=0.00"
    assert prompt.curve_text([]) == "(none)"


def test_prompt_text_fills_every_field() -> None:
    req = request(success=[], decision="", start_inventory=[common_pb2.ItemCount(item="wood", count=2),
                                                            common_pb2.ItemCount(item="stone", count=0)],
                  rollouts=[episode()], test_protocol="  four episodes  ")
    settings = CriticSettings(success_threshold=0.5)
    text = prompt.prompt_text(req, deterministic_checks(req, settings), settings)
    assert "Success when: (none given)\n" in text and "Solved by: (not given)\n" in text
    assert "Success threshold: 0.50\nMeasured success rate: 0.00\n" in text
    assert "four episodes\nItems every test episode started with: 2 wood\n" in text
    assert "- success_rate 0.00 < threshold 0.50 (0/1 episodes)\n" in text
    assert "{" not in text.split("Example")[0]  # no field left unfilled before the JSON examples


def test_frames_are_attached_only_when_allowed_and_up_to_the_limit() -> None:
    req = request(rollouts=[episode()], frames=[PNG] * 3)
    findings = deterministic_checks(req)
    [plain] = prompt.messages(req, findings, CriticSettings())
    assert isinstance(plain["content"], str)
    [message] = prompt.messages(req, findings, CriticSettings(attach_frames=True, max_frames=2))
    text, *images = message["content"]
    assert text["text"].endswith("\n2 frames of the episodes follow (screenshots, failed episodes first; each "
                                 "episode's in step order, from its start to its last frame).")
    assert [i["image_url"]["url"] for i in images] == ["data:image/png;base64," + base64.b64encode(PNG).decode()] * 2


def test_the_prompt_names_the_game_the_request_names() -> None:
    settings = CriticSettings(use_llm=False)
    named = request(code="def skill(agent):\n    yield 'x'\n")
    named.game = "Minecraft (MineDojo)"
    text = prompt.prompt_text(named, deterministic_checks(named, settings), settings)
    assert "one sub-task in the game Minecraft (MineDojo), either" in text
    named.game = ""
    unnamed = prompt.prompt_text(named, deterministic_checks(named, settings), settings)
    assert "one sub-task in a game, either" in unnamed
