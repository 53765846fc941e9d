"""The fast agent's revision prompt for RL around the kept plan: its training and its rules' results in words."""

from __future__ import annotations

from benchmarks.crafter.diamond_revision import probe_text, training_text
from benchmarks.crafter.diamond_rules import Tools, rule_text


def ends(wins: list[bool], cause: str = "attacked by zombie") -> list[dict]:
    return [{"success": w, "end_reason": "success" if w else "death", "death_cause": "" if w else cause,
             "steps": 150 if w else 250} for w in wins]


def played(wins: list[bool], cause: str = "attacked by zombie") -> dict:
    return {"episodes": len(wins), "success_rate": sum(wins) / len(wins), "ends": ends(wins, cause)}


def test_the_training_text_shows_the_curve_from_its_first_point_to_its_last() -> None:
    curve = [{"frames": 1000 * (i + 1), "success_rate": i / 100, "stages_done": 5 + i / 10, "deaths": 0.9}
             for i in range(22)]
    text = training_text({"frames": 22_050, "train_episodes": 300, "curve": curve}, 10)
    lines = text.splitlines()
    assert lines[0].startswith("A policy was trained with this configuration for 22,050 frames (APPO, 300 training")
    assert "(of 10)" in lines[0] and len(lines) == 7
    assert lines[1] == "- 1,000: 0.0% success, 5.0 sub-tasks, 90% died" and lines[-1].startswith("- 22,000: 21.0%")


def test_the_probe_text_holds_each_rule_to_the_chain_world_by_world() -> None:
    chain = [i < 4 for i in range(40)]
    probe = {"k": 60, "hurt": True, "threat_within": 3, "tools": vars(Tools()),
             "rules": {"chain": rule_text("chain"), "shelter": rule_text("shelter")},
             "results": {"chain": played(chain), "shelter": played([i < 14 for i in range(40)], "starved")}}
    text = probe_text(probe)
    assert "on 40 worlds seeded apart from the training worlds and from those results are scored on" in text
    assert "with your K (60) and your hand-back conditions (hurt or a threat 3 cells away or closer)" in text
    assert "shelter: `shelter_and_sleep`" in text
    assert "- `chain` (every action the plan action (the chain alone)): 10.0% success; mean episode 240 frames; " \
           "failed episodes: killed 36 (death causes: attacked by zombie 36)." in text
    assert "- `shelter` (at night (world/daylight below 0.3), the shelter macro, again as long as it acts): 35.0% " \
           "success; won 10 worlds the chain lost and lost 0 it won (p < 0.01); mean episode 215 frames; failed " \
           "episodes: worn out 26 (death causes: starved 26)." in text
    assert text.endswith("a macro action keeps its rule by keeping its name.")
