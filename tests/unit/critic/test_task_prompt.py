"""The critic's prompt for the whole task: the link table, the death causes, the trajectory tails of each kind of
failure, and every game fact (its name, its rules) from the request, none typed in the template."""

from __future__ import annotations

import re

from critic_samples import episode, link, task_request
from describe_support import recorded_describe

from rlgpt.v1 import common_pb2
from services.critic import task_prompt
from services.critic.prompt import PROMPT_DIR
from services.critic.task_checks import task_checks

TRAJECTORY = "\n".join(f"line {i:02d}" for i in range(40)) + "\nend: death (zombie)"


def request_with_rules():
    describe = recorded_describe()
    episodes = [episode(True, stages_done=[True, True]),
                episode(stages_done=[True, False], end_reason="death", death_cause="zombie", text=TRAJECTORY,
                        achievements=["get_a"], final_inventory=[common_pb2.ItemCount(item="a", count=2)]),
                episode(stages_done=[False, False], text="go x4\nend: time_limit")]
    return task_request(episodes=episodes, links=[link("get_a", 3, 2, own=1.0), link("make_b", 2, 1, decision="rl")],
                        rules=describe.rules, game=describe.display_name, iteration=2)


def test_the_prompt_holds_the_link_table_and_the_trajectory_tails() -> None:
    req = request_with_rules()
    text = task_prompt.prompt_text(req, task_checks(req))
    assert ("1. get_a (code), hands over when achievement get_a: reached 3, succeeded 2 (67% in the chain), own "
            "success 100%, mean 50 frames\n2. make_b (rl), hands over when achievement make_b: reached 2, succeeded 1 "
            "(50% in the chain), own success not measured, mean 50 frames\n") in text
    assert "Death causes over the failed episodes: zombie 1\n" in text
    assert ("- in make_b, died of zombie: 1 episode (e.g. episode 1: 100 steps, achievements [get_a], inventory "
            "[a 2])\n") in text
    tail = text.split("died of zombie")[1]
    assert "    line 39\n    end: death (zombie)\n" in tail and "line 28" not in tail  # its last 12 lines
    assert "- in get_a, time_limit: 1 episode" in text and "    go x4\n" in text
    assert "Measured success rate: 0.33 (1/3 episodes)\nTarget success rate" not in text
    assert "Target success rate: 0.75\nMeasured success rate: 0.33 (1/3 episodes)\n" in text
    assert "- weakest_link get_a: lost 1 of 3 episodes that reached it\n" in text
    assert "after outer iteration 2." in text


def test_game_facts_come_from_the_request_never_from_the_template() -> None:
    req = request_with_rules()
    describe = recorded_describe()
    text = task_prompt.prompt_text(req, task_checks(req))
    assert f"in the game {describe.display_name}, as a chain" in text
    assert describe.rules.text.strip() in text
    req.game, req.rules.text = "", ""
    bare = task_prompt.prompt_text(req, task_checks(req))
    assert "in a game, as a chain" in bare and "(generated from the game itself):\n(not given)\n" in bare
    # The template names no game, material, item, threat or achievement of the recorded game, nor an action of
    # its own naming (a one-word action such as "do" is also plain English).
    template = (PROMPT_DIR / "critic_task.txt").read_text().lower()
    words = {describe.display_name, *(a for a in describe.actions if "_" in a), *describe.achievements,
             *describe.rules.materials, *(i.item for i in describe.rules.items), *describe.threats}
    assert {"zombie", "wood", "diamond", "table"} <= words  # the list is the game's own, not empty
    typed = [w for w in words if w and re.search(rf"(?<![a-z0-9_]){re.escape(w.lower())}(?![a-z0-9_])", template)]
    assert typed == []


def test_sections_say_when_they_are_empty() -> None:
    req = task_request(links=[], episodes=[])
    text = task_prompt.prompt_text(req, task_checks(req))
    assert "(none: no chain ran)" in text and "(none: no episode failed)" in text
    assert "Death causes over the failed episodes: none\n" in text
    assert "{" not in text.split("Answer with")[0]  # every field filled
    many = task_request(episodes=[episode(stages_done=[True, False], end_reason="death", death_cause=f"c{i}")
                                  for i in range(6)])
    assert task_prompt.failures_text(task_checks(many).kinds, list(many.episodes)).endswith("(2 more kinds not shown)")
    [message] = task_prompt.messages(req, task_checks(req))
    assert message["role"] == "user" and isinstance(message["content"], str)


def test_a_game_prompt_states_the_score_and_its_target_not_a_success_rate() -> None:
    request = task_request(episodes=[episode(end_reason="death", death_cause="zombie")], target_success=0.273,
                           score=4.2, achievement_rates={"collect_wood": 100.0, "collect_diamond": 0.0})
    text = task_prompt.prompt_text(request, task_checks(request))
    assert "Target success rate: none; instead a score of 27.3" in text
    assert ("Measured success rate: none; instead: The whole game scored 4.2 (target 27.3). Never unlocked (1 of 2): "
            "collect_diamond.") in text
    assert "0.27" not in text and "0.00 (0/1 episodes)" not in text


def test_a_links_frames_not_known_are_said_to_be_unknown() -> None:
    req = request_with_rules()
    req.links[1].mean_frames = -1.0
    text = task_prompt.prompt_text(req, task_checks(req))
    assert "own success 100%, mean 50 frames\n" in text
    assert "(50% in the chain), own success not measured, mean frames unknown\n" in text
