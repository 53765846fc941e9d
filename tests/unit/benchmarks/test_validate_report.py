"""bench-validate's section: each arm's task success and its paired comparison with the run's first arm, computed
from the episodes alone."""

from benchmarks.validate.report import latest_change, render_section


def arm(label: str, wins: list[bool], first_seed: int = 7_500_001) -> dict:
    return {"run": "a-run", "task": "collect_diamond", "label": label, "code": "abc1234", "date_utc": "2026-11-29T15",
            "first_seed": first_seed,
            "episodes": [{"seed": first_seed + i, "length": 100 + i,
                          "achievements": ["collect_wood"] + (["collect_diamond"] if won else []),
                          "death_cause": "" if won else "attacked by zombie and no drink"}
                         for i, won in enumerate(wins)]}


def test_each_arm_is_paired_with_the_first_on_the_worlds_both_played() -> None:
    old = arm("before", [True, False, False, True])
    new = arm("after", [True, True, True, False])
    text = render_section({"arms": [old, new, arm("elsewhere", [True], first_seed=9)]})
    rows = [line for line in text.splitlines() if line.startswith("| ")][1:]
    assert "50% (2/4" in rows[0] and "| the first arm |" in rows[0]
    assert "75% (3/4" in rows[1]
    assert "paired on 4 worlds: 2 solved only by the new, 1 only by the old (exact McNemar p=1)" in rows[1]
    assert "attacked by zombie 1, no drink 1" in rows[1]  # death kinds, an episode once per kind
    assert "no world in common" in rows[2] and "7,500,001..7,500,004" in rows[0]


def test_the_headline_names_the_latest_arm_against_its_runs_first() -> None:
    results = {"arms": [arm("before", [True, False, False, True]), arm("memory: more", [True, True, True, False])]}
    assert latest_change(results) == ("a-run's controller, collect_diamond: 75% with memory against 50% (2 solved "
                                      "only by the new, 1 only by the old (exact McNemar p=1))")


def test_an_arms_guards_are_listed_under_the_table() -> None:
    from benchmarks.validate.report import render_section

    episode = {"seed": 1, "achievements": [], "length": 10, "death_cause": ""}
    arm = {"run": "r", "task": "collect_diamond", "label": "with guards", "code": "abc", "first_seed": 1,
           "date_utc": "2026-11-29T18:00:00Z", "episodes": [episode],
           "guards": {"written_by": "a fresh helper", "guards": [
               {"name": "drink", "code": "...", "max_frames": 90, "when": [{"label": "status/drink", "value": 3}]},
               {"name": "hide", "code": "...", "max_frames": 9,
                "when": [{"label": "threat/seen", "value": 0.5, "above": True}]}]}}
    text = render_section({"arms": [arm]})
    assert ('Guards of the arm "with guards" (a fresh helper; their code is in the raw file): `drink` when '
            "status/drink below 3, at most 90 frames; `hide` when threat/seen above 0.5, at most 9 frames.") in text
