"""bench-diamond's scorings: the section and the headline cell list every scoring of the same policy that its raw
file records, name the settings chosen on the held-out worlds, and say that no declared set was scored once."""

from __future__ import annotations

from typing import Any

from benchmarks.crafter.diamond_scorings import ends_of, headline_text, section_lines, versus, worlds
from benchmarks.sections import CURRENT, Figures, load

CURRENT_RUN = "diamond-interrupt-revised-updates-1m"


def current() -> tuple[dict[str, Any], str, str]:
    """The current bench-diamond run's raw results, its rendered section and its headline cell."""
    section = next(s for s in CURRENT if s.key == CURRENT_RUN)
    assert section.headline is not None
    return load(section.raw[0]), section.render(Figures(draw=False)), section.headline().result


def test_the_section_lists_every_scoring_in_the_raw_file() -> None:
    results, text, _ = current()
    assert "**Not one declared scoring.**" in text
    for scoring in results["scorings"]:
        ends = ends_of(results, scoring)
        assert len(ends["chain"]) == scoring["worlds"]
        assert (f"- {scoring['commit']} ({scoring['committed_utc']}), {worlds(1, scoring['worlds'])}, "
                f"{scoring['why']}: sampling {versus(ends['policy'], ends['chain'])}") in text
    for setting in results["chosen_on_held_out"]:
        assert setting["setting"] in text.split("Chosen on these held-out worlds: ", 1)[1].split(". Chosen apart")[0]
    assert "Not done: a clean result needs a new held-out set, declared before it is scored and scored once" in text


def test_the_section_shows_the_re_scored_worlds_apart_from_the_new_ones() -> None:
    _, text, _ = current()
    assert ("worlds 1-512 again (sampling drawn anew): 14.3% against 14.8% (33 won, 36 lost, p = 0.81); "
            "worlds 513-1,024, new: 18.9% against 11.3% (56 won, 17 lost, p < 0.001)") in text
    assert "sampling 17.4% against 14.8% (40 won, 27 lost, p = 0.14)" in text
    assert "sampling 16.6% against 13.1% (89 won, 53 lost, p = 0.003)" in text


def test_the_headline_says_it_is_not_one_declared_scoring() -> None:
    results, _, cell = current()
    assert "not one declared scoring: scored first on worlds 1-512: 17.4% against 14.8%" in cell
    assert "16 gradient steps per batch chosen on them" in cell
    assert cell.endswith("no declared set scored once yet")
    assert results["declared_set"] is None


def test_an_earlier_scoring_played_the_same_chain_as_the_file() -> None:
    """The chain alone and the greedy policy are deterministic: the first scoring's worlds must give the same
    successes as the file's first worlds, or the copied data is not of these worlds."""
    results, _, _ = current()
    here = ends_of(results, results["scorings"][-1])
    for scoring in results["scorings"][:-1]:
        ends = ends_of(results, scoring)
        for controller in ("chain", "policy_greedy"):
            assert ends[controller] == [{"success": e["success"]} for e in here[controller][:scoring["worlds"]]]


def end(success: bool) -> dict[str, Any]:
    return {"success": success, "end_reason": "success" if success else "death", "death_cause": "", "steps": 9}


def synthetic(declared: dict[str, Any] | None = None) -> dict[str, Any]:
    chain, policy = [end(i % 4 == 0) for i in range(8)], [end(i % 2 == 0) for i in range(8)]
    return {"run": {"chain": {"ends": chain}, "policy": {"ends": policy}},
            "scorings": [{"commit": "aaa", "committed_utc": "day 1", "worlds": 2, "why": "first",
                          "chain": "10", "policy": "01"},
                         {"commit": "bbb", "committed_utc": "day 2", "worlds": 4, "why": "second",
                          "chain": "1000", "policy": "1111"},
                         {"commit": "ccc", "committed_utc": "day 3", "worlds": 8, "why": "third", "here": True}],
            "chosen_on_held_out": [{"setting": "a knob", "how": "looked"}], "declared_set": declared}


def test_every_scoring_is_listed_and_each_earlier_one_in_the_headline() -> None:
    lines = section_lines(synthetic())
    listed = [line for line in lines if line.startswith("- ")]
    assert [line.split(" ")[1] for line in listed] == ["aaa", "bbb", "ccc"]
    assert "worlds 1-4 again (sampling drawn anew): 50.0% against 25.0%" in listed[2]
    assert "worlds 1-2 again" in listed[1]
    cell = headline_text(synthetic())
    assert ("scored first on worlds 1-2: 50.0% against 50.0% (1 won, 1 lost, p = 1.00), then on worlds 1-4: 100.0% "
            "against 25.0%") in cell
    assert "a knob chosen on them" in cell


def test_a_declared_set_replaces_the_not_done_sentence() -> None:
    declared = {"worlds": 512, "first_seed": 9_000_001, "declared_utc": "day 4", "commit": "ddd"}
    text = "\n".join(section_lines(synthetic(declared)))
    assert "Not done" not in text and "Declared set: 512 worlds from seed 9,000,001, declared day 4" in text
    assert "no declared set" not in headline_text(synthetic(declared))


def test_a_run_without_scorings_gets_no_caveat() -> None:
    results = synthetic()
    del results["scorings"]
    assert section_lines(results) == [] and headline_text(results) == ""
