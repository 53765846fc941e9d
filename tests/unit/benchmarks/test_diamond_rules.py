"""bench-diamond-rules: each rule's choices, one rule played on a real env server, the section from results, and
its command line (a tag keeps another answer's run apart)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.bench_diamond_rules import main
from benchmarks.crafter.diamond import AGENT_MACRO_PREFIX, PLAN_RUN, SKILL_PREFIX
from benchmarks.crafter.diamond_rules import (
    ANSWER,
    Rule,
    Tools,
    rule_text,
)
from benchmarks.crafter.diamond_rules_report import SECTION_TITLE, plot_rules, render_section
from rlgpt.env_contract import PLAN_ACTION
from rlgpt.v1 import env_pb2
from services.env_server.backends.crafter import VECTOR_LABELS

ACTIONS = ["noop", *(f"skill:{AGENT_MACRO_PREFIX}{m}" for m in ("fight_threat", "shelter_and_sleep", "make_sword")),
           PLAN_ACTION]
STAGES = [SKILL_PREFIX + s for s in ("collect_wood", "make_stone_pickaxe", "collect_diamond")]
DAY = VECTOR_LABELS.index("world/daylight")


def rule(name: str) -> Rule:
    return Rule(name, ACTIONS, list(VECTOR_LABELS), STAGES, Tools())


def vector(daylight: float) -> np.ndarray:
    v = np.zeros(len(VECTOR_LABELS), np.float32)
    v[DAY] = daylight
    return v


def test_each_rule_uses_its_macro_only_when_its_condition_holds() -> None:
    plan, fight, shelter, sword = (ACTIONS.index(a) for a in (PLAN_ACTION, ACTIONS[1], ACTIONS[2], ACTIONS[3]))
    calm, handed_back = env_pb2.StepInfo(), env_pb2.StepInfo(plan_interrupted="threat")
    assert rule("chain").next(0, handed_back, vector(0.0), 16) == plan
    assert rule("fight").next(0, handed_back, vector(1.0), 3) == fight
    assert rule("fight").next(0, calm, vector(1.0), 16) == plan
    night = rule("shelter")
    assert night.next(0, calm, vector(0.1), 16) == shelter and night.next(0, calm, vector(0.9), 16) == plan
    gave_up = env_pb2.StepInfo(skill=f"{AGENT_MACRO_PREFIX}shelter_and_sleep")
    assert night.next(0, gave_up, vector(0.1), 1) == plan  # nowhere to dig: the plan goes on
    assert night.next(0, gave_up, vector(0.1), 40) == shelter  # still sheltering: again
    early = rule("sword+fight")
    assert early.next(0, env_pb2.StepInfo(stages_done=[True, False, False]), vector(1.0), 16) == plan
    done = env_pb2.StepInfo(stages_done=[True, True, False], plan_interrupted="damage")
    assert early.next(0, done, vector(1.0), 16) == sword  # once, and before fighting
    assert early.next(0, done, vector(1.0), 16) == fight
    assert early.next(1, done, vector(1.0), 16) == sword  # each env makes its own


def test_an_unknown_rule_or_a_missing_macro_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown rule 'dance'; one of chain, fight"):
        rule("dance")
    with pytest.raises(ValueError, match="rule sword: the answer has no macro action diamond_macro_make_sword"):
        Rule("sword", [*ACTIONS[:3], PLAN_ACTION], list(VECTOR_LABELS), STAGES, Tools())
    assert rule_text("shelter+fight").startswith("at night") and "; otherwise after a plan action" in \
        rule_text("shelter+fight")


def test_a_rule_chooses_for_the_live_envs_from_their_last_steps() -> None:
    plan, fight = ACTIONS.index(PLAN_ACTION), ACTIONS.index(ACTIONS[1])
    last = {2: (env_pb2.StepInfo(plan_interrupted="threat"), 3), 5: (env_pb2.StepInfo(), 60)}
    vectors = np.stack([vector(1.0)] * 3)
    assert rule("fight").choose([0, 2, 5], None, vectors, last) == [plan, fight, plan]  # env 0: not stepped yet


def ends(wins: list[bool]) -> list[dict]:
    return [{"success": w, "end_reason": "success" if w else "death", "death_cause": "" if w else
             "attacked by zombie", "steps": 200} for w in wins]


def results(chain: list[bool], shelter: list[bool]) -> dict:
    def played(wins: list[bool]) -> dict:
        return {"episodes": len(wins), "success_rate": sum(wins) / len(wins), "frames": 200 * len(wins),
                "seconds": 1.0, "links": [], "ends": ends(wins)}

    return {"date_utc": "2026-11-27T12:00:00Z", "machine": {"cpu_model": "test", "cpu_count": 2, "ram_gib": 1.0,
                                                             "python": "3.11", "crafter": "1.8.3"},
            "answer": str(ANSWER), "answer_llm": "a capable model",
            "run": {"task": "collect_diamond", "llm": "a capable model", "run": str(PLAN_RUN), "k": 60, "night": 0.3,
                    "tools": vars(Tools()), "rules": {"chain": rule_text("chain"), "shelter": rule_text("shelter")},
                    "macro_actions": ["diamond_macro_shelter_and_sleep"],
                    "results": {"chain": played(chain), "shelter": played(shelter)}}}


def test_the_section_says_how_each_rule_did_against_the_chain_world_by_world(tmp_path: Path) -> None:
    # 40 worlds: the chain wins the first 4; shelter wins those and 10 more, and loses none the chain won.
    chain = [i < 4 for i in range(40)]
    shelter = [i < 14 for i in range(40)]
    text = render_section(results(chain, shelter), "figures/rules.png")
    assert "| `shelter` | at night (world/daylight below 0.3)" in text
    assert "| 35.0% | 10 / 0 (p < 0.01) | 200 | killed 26 |" in text
    assert "`shelter`: 35.0%, 25.0 points above the chain alone; it won 10 worlds the chain lost and lost 0" in text
    assert "The best rule, `shelter`, beats the chain alone beyond chance." in text
    even = render_section(results(chain, [i < 5 for i in range(40)]), None)
    assert "does not beat the chain alone beyond chance." in even and "![" not in even
    worse = render_section(results([i < 12 for i in range(40)], [False] * 40), None)
    assert "(exact McNemar, p < 0.01; beyond chance)." in worse and "Below it beyond chance: `shelter`." in worse
    assert plot_rules(results(chain, shelter), tmp_path / "rules.png").stat().st_size > 5000


def test_a_tag_that_cannot_name_files_is_refused_before_anything_runs(tmp_path: Path, invoke) -> None:
    code, output = invoke(main, "--tag", "Revised 2", "--work", str(tmp_path), "--output", str(tmp_path / "B.md"))
    assert code == 2 and "'Revised 2': use 1 to 32 lowercase letters, digits and '-'" in output
    assert not any(tmp_path.iterdir())


def test_a_tagged_run_has_its_own_raw_results_figure_and_section(tmp_path: Path, invoke) -> None:
    # A tag no run has used: --report-only says where it looked, the tag's own results file.
    code, output = invoke(main, "--tag", "never-run-9", "--report-only", "--output", str(tmp_path / "B.md"))
    assert code == 2 and "diamond-rules-never-run-9" in output and "run without --report-only first" in output
    saved = {**results([i < 4 for i in range(40)], [i < 6 for i in range(40)]), "tag": "revised"}
    raw = tmp_path / "results.json"
    raw.write_text(json.dumps(saved))
    doc = tmp_path / "B.md"
    doc.write_text(f"# Benchmarks\n\n{SECTION_TITLE}\n\nthe untagged run's section\n")
    figures = tmp_path / "figures"
    figures.mkdir()
    code, output = invoke(main, "--tag", "revised", "--report-only", "--raw-json", str(raw), "--output", str(doc),
                          "--figure", str(figures / "rules-revised.png"))
    assert code == 0, output
    text = doc.read_text()
    assert "the untagged run's section" in text and f"{SECTION_TITLE}, run revised\n" in text
    assert "](figures/rules-revised.png)" in text and (figures / "rules-revised.png").stat().st_size > 5000
