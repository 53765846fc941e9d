"""bench-diamond's saved results read: where failed episodes ended, how they ended, and a policy against its chain
world by world."""

from __future__ import annotations

from benchmarks.crafter.diamond_results import end_kind, ended_in, p_text, paired

WON = {"success": True, "end_reason": "success", "death_cause": "", "steps": 50}


def lost(cause: str = "attacked by zombie") -> dict:
    return {"success": False, "end_reason": "death", "death_cause": cause, "steps": 50}


def played(ends: list[dict]) -> dict:
    return {"episodes": len(ends), "success_rate": sum(e["success"] for e in ends) / len(ends), "ends": ends}


def test_failed_episodes_are_placed_at_their_first_unfinished_step() -> None:
    chain = {"links": [{"name": "wood", "reached": 4, "succeeded": 4}, {"name": "iron", "reached": 4, "succeeded": 2},
                       {"name": "gem", "reached": 2, "succeeded": 1}]}
    assert ended_in(chain) == {"wood": 0, "iron": 2, "gem": 1}


def test_failed_episodes_end_in_a_few_kinds() -> None:
    causes = ("attacked by zombie", "attacked by zombie and no drink", "no food", "shot by skeleton arrow")
    assert [end_kind(lost(c)) for c in causes] == ["killed", "killed and worn out", "worn out", "killed"]
    assert end_kind({**lost(), "end_reason": "time_limit"}) == "time_limit"
    assert end_kind(lost("lava")) == "died (lava)"


def test_a_policy_and_its_chain_are_compared_world_by_world() -> None:
    assert paired(played([WON] * 10), played([lost()] * 10)) == (10, 0, 2 / 2 ** 10)
    assert paired(played([WON] * 5 + [lost()] * 5), played([lost()] * 5 + [WON] * 5))[2] == 1.0
    # Near 0.05, three decimals: 13 worlds won and 26 lost is p = 0.053, which "p = 0.05" would misstate.
    policy, chain = played([WON] * 13 + [lost()] * 26), played([lost()] * 13 + [WON] * 26)
    assert paired(policy, chain)[:2] == (13, 26)
    assert p_text(paired(policy, chain)[2]) == "p = 0.053"
    assert (p_text(0.004), p_text(0.2)) == ("p < 0.01", "p = 0.20")
