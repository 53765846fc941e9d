"""The critic's deterministic checks on hand-made episodes and curves: each check alone, then composed."""

from __future__ import annotations

import pytest
from critic_samples import curve, episode, has, request

from rlgpt.v1 import common_pb2, critic_pb2
from services.critic import checks
from services.critic.checks import deterministic_checks
from services.critic.settings import CriticSettings
from services.critic.texts import MAX_TEXT

SETTINGS = CriticSettings()


def error(type_: str, line: int = 0, message: str = "boom", code_line: str = "") -> common_pb2.SkillError:
    return common_pb2.SkillError(type=type_, line=line, message=message, code_line=code_line)


# --- each check alone ----------------------------------------------------------------------------------------


def test_success_rate_from_rollouts_then_the_curve_then_nothing() -> None:
    rate, check = checks.success_rate([episode(True), episode(), episode(), episode()], [], 0.5)
    assert rate == 0.25 and check.findings == ["success_rate 0.25 < threshold 0.50 (1/4 episodes)"]
    assert check.diagnosis == ["1/4 test episodes succeeded (rate 0.25, threshold 0.50)."] and not check.suggestion
    rate, check = checks.success_rate([], curve([0.1, 0.6]), 0.5)
    assert rate == pytest.approx(0.6)
    assert check.findings == ["no_rollouts: success rate 0.60 taken from the last curve point (2000 frames)"]
    rate, check = checks.success_rate([], [], 0.5)
    assert rate == 0 and check.suggestion == ["Make the attempt run at least one test episode."]


def test_exceptions_are_grouped_with_their_lines_and_capped() -> None:
    raised = [error("KeyError", 4, "'tree'", "agent.nearest['tree']")] * 3 + [error("Timeout", 2)]
    raised += [error(f"Error{i}", i + 10) for i in range(checks.MAX_ERROR_FINDINGS)]
    check = checks.exceptions(raised)
    assert check.findings[0] == "exception KeyError line 4: 'tree' (`agent.nearest['tree']`) [x3]"
    assert len(check.findings) == checks.MAX_ERROR_FINDINGS + 1 and not any("Timeout" in f for f in check.findings)
    assert check.findings[-1] == "exception: 1 more distinct errors left out"
    assert check.diagnosis == ["The code raised KeyError at line 4 (`agent.nearest['tree']`): 'tree'."]
    assert check.suggestion == ["Fix the KeyError at line 4 (`agent.nearest['tree']`); guard the case that "
                                "triggers it."]
    assert not checks.exceptions([error("Timeout", 2), error("StepBudgetExceeded")])


def test_timeouts_are_only_the_time_and_step_budget_errors() -> None:
    check = checks.timeouts([error("ValueError", 1), error("StepBudgetExceeded", 7, "too many steps")])
    assert check.findings == ["timeout StepBudgetExceeded line 7: too many steps"]
    assert check.diagnosis == ["The code hit StepBudgetExceeded at line 7."]
    assert checks.timeouts([error("Timeout")]).diagnosis == ["The code hit Timeout."]
    assert not checks.timeouts([error("ValueError", 1)])


def test_code_errors_come_from_the_request_and_from_the_episodes_they_ended() -> None:
    found = checks.code_errors(request(errors=[error("Timeout")], rollouts=[
        episode(error=error("KeyError", 2)), episode(), episode(error=common_pb2.SkillError(message="no type"))]))
    assert [e.type for e in found] == ["Timeout", "KeyError"]


def test_dead_loop_is_the_longest_run_that_changed_nothing() -> None:
    assert checks.dead_loop("do x30\nstep 31: +1 wood\nmove_left x26 at (0, 3), map edge", 25) == ("do", 29)
    assert checks.dead_loop("move_left/move_right x40 at (0, 33), map edge", 25) == ("move_left/move_right", 40)
    assert checks.dead_loop("do x25\nstep 30: +1 wood", 25) is None


def test_dead_loops_and_idle_episodes() -> None:
    check = checks.dead_loops([episode(text="noop x30"), episode(text="noop x40"), episode(True)], 25)
    assert check.findings == ["dead_loop: noop x40 with no inventory change (2/3 episodes)",
                              "dead_loop: 2/3 episodes hit the time limit with no achievement"]
    assert check.diagnosis == ["The agent repeated noop 40 times without any progress."]  # the loop explains idling
    idle = checks.dead_loops([episode(), episode(achievements=["collect_wood"])], 25)
    assert idle.findings == ["dead_loop: 1/2 episodes hit the time limit with no achievement"]
    assert idle.diagnosis == ["1/2 episodes ran out of time without unlocking anything."]
    assert not checks.dead_loops([episode(True), episode(end_reason="death")], 25)


def test_gave_up_counts_skills_that_returned_early() -> None:
    check = checks.gave_up([episode(end_reason="skill_finished"), episode(True, end_reason="skill_finished"),
                            episode()])
    assert check.findings == ["gave_up: 1/3 episodes: the skill returned before the task held"]
    assert check.suggestion == ["Loop until the success condition holds instead of returning early."]
    assert not checks.gave_up([episode()])


def test_deaths_by_cause_most_common_first() -> None:
    check = checks.deaths([episode(death_cause="lava"), episode(death_cause="zombie"),
                           episode(death_cause="zombie"), episode()])
    assert check.findings == ["deaths: zombie x2, lava x1 (3/4 episodes)"]
    assert check.diagnosis == ["The player died in 3/4 episodes, mostly of zombie."]
    assert not checks.deaths([episode()])


def test_flat_curve_only_below_the_threshold_and_within_the_tolerances() -> None:
    flat = checks.flat_curve(curve([0.0, 0.3, 0.3, 0.3, 0.3, 0.3], [0.0, 10.0, 10.1, 9.95, 10.0, 10.05]),
                             SETTINGS)
    assert flat.findings == ["flat_curve: last 5 points (to 6000 frames): success 0.30..0.30, mean return "
                             "9.95..10.10"]  # returns of scale 10: a tolerance of 10x the rates'
    assert flat.diagnosis == ["Training has stopped improving."]
    assert not checks.flat_curve(curve([0.3, 0.3, 0.3, 0.3, 0.3], [1.0, 1.0, 1.5, 1.0, 1.0]), SETTINGS)
    assert not checks.flat_curve(curve([0.9] * 5), SETTINGS)  # flat at a pass is not a problem
    assert not checks.flat_curve(curve([0.0] * 4), SETTINGS)  # too few points
    assert checks.stuck_at_zero(curve([0.0] * 5), SETTINGS)
    assert not checks.stuck_at_zero(curve([0.3] * 5), SETTINGS)


def test_missing_prerequisites_name_the_items_in_their_texts() -> None:
    rules = common_pb2.WorldRules(make=[common_pb2.MakeRule(item="wood_pickaxe", action="make_wood_pickaxe")])
    check = checks.missing_prerequisites(request(rules=rules, rollouts=[episode(text="needs a wood_pickaxe")]),
                                         [], 0.0)
    assert check.findings == ["missing_prerequisite wood_pickaxe: named in text: 'needs a wood_pickaxe'"]
    assert check.diagnosis == ["The attempt lacks a prerequisite: wood_pickaxe."]
    assert check.suggestion == ["Add a sub-task that obtains wood_pickaxe before this one (or start it with them)."]
    assert not checks.missing_prerequisites(request(rollouts=[episode(text="needs a wood_pickaxe")]), [], 0.0)


@pytest.mark.parametrize(("flags", "target", "decisive"), [
    ({"success": True, "missing": True, "code_failed": True, "stuck": True}, critic_pb2.TARGET_KEEP, True),
    ({"missing": True, "code_failed": True, "stuck": True}, critic_pb2.TARGET_SLOW, True),
    ({"code_failed": True, "stuck": True}, critic_pb2.TARGET_FAST, True),
    ({"stuck": True}, critic_pb2.TARGET_SLOW, True),
    ({}, critic_pb2.TARGET_FAST, False),
])
def test_target_rule_first_match_wins(flags, target, decisive) -> None:
    rule = checks.target_rule(**{"success": False, "missing": False, "code_failed": False, "stuck": False,
                                 "decision": "code", **flags})
    assert (rule.target, rule.decisive) == (target, decisive)


def test_target_rule_suggestions_for_an_open_choice_depend_on_the_decision() -> None:
    open_rl = checks.target_rule(success=False, missing=False, code_failed=False, stuck=False, decision="rl")
    assert open_rl.last.startswith("Shape the reward") and not open_rl.first
    open_code = checks.target_rule(success=False, missing=False, code_failed=False, stuck=False, decision="code")
    assert open_code.last == "Revise the code to handle the failing episodes."


def test_composed_texts_put_the_deciding_check_first() -> None:
    rules = common_pb2.WorldRules(make=[common_pb2.MakeRule(item="table", action="place_table")])
    found = deterministic_checks(request(rules=rules, rollouts=[episode(death_cause="zombie", text="needs a table")]))
    assert [f.split(" ", 1)[0].rstrip(":") for f in found.findings] == [
        "success_rate", "dead_loop", "deaths", "missing_prerequisite"]
    assert found.diagnosis.startswith("The attempt lacks a prerequisite: table. 0/1 test episodes succeeded")
    assert found.suggestion.startswith("Add a sub-task that obtains table")
    passed = deterministic_checks(request(rollouts=[episode(True)]))
    assert passed.suggestion == "No change needed; move on to the next sub-task."


def test_composed_texts_stay_within_the_limit() -> None:
    many = [episode(text=f"noop x{30 + i}", death_cause="zombie", end_reason="skill_finished") for i in range(5)]
    found = deterministic_checks(request(rollouts=many, errors=[error("ValueError", 1, "x" * 500)]))
    assert len(found.diagnosis) <= MAX_TEXT and len(found.suggestion) <= MAX_TEXT
    assert found.diagnosis.endswith(".")  # whole sentences only


# --- composed (the rules of deterministic_checks) -------------------------------------------------------------


def test_success_rate_against_the_threshold() -> None:
    ok = deterministic_checks(request(rollouts=[episode(True, achievements=["collect_wood"])] * 4 + [episode()]))
    assert ok.success_rate == pytest.approx(0.8) and ok.success and ok.target == critic_pb2.TARGET_KEEP
    assert has(ok.findings, "success_rate") == "success_rate 0.80 >= threshold 0.80 (4/5 episodes)"
    low = deterministic_checks(request(rollouts=[episode(True), episode(), episode(), episode()]))
    assert low.success_rate == 0.25 and not low.success
    assert low.target == critic_pb2.TARGET_FAST and not low.decisive  # low success on a coded attempt


def test_exceptions_and_timeouts_name_their_lines() -> None:
    error = common_pb2.SkillError(type="ZeroDivisionError", message="division by zero", line=3,
                                  code_line="return 1 / 0")
    found = deterministic_checks(request(
        rollouts=[episode(error=error, end_reason="error"), episode(error=error, end_reason="error")],
        errors=[common_pb2.SkillError(type="Timeout", message="no action within 2.0 s", line=5)]))
    assert has(found.findings, "exception") == \
        "exception ZeroDivisionError line 3: division by zero (`return 1 / 0`) [x2]"
    assert has(found.findings, "timeout Timeout line 5")
    assert found.target == critic_pb2.TARGET_FAST and found.decisive
    assert "line 3" in found.diagnosis and found.suggestion


def test_dead_loop_from_the_text_trajectory() -> None:
    looping = episode(text="move_left x3\nstep 4: +1 sapling\nmove_left x57\nend: time_limit at step 300, near tree",
                      achievements=["collect_sapling"])
    chopping = episode(text="do x5\nstep 6: +1 wood\nend: success", success=True, achievements=["collect_wood"])
    found = deterministic_checks(request(rollouts=[looping, chopping]))
    assert has(found.findings, "dead_loop") == "dead_loop: move_left x57 with no inventory change (1/2 episodes)"
    # The run's last action caused the change, so 24 repeats changed nothing: under the threshold of 25.
    slow_chop = episode(text="do x25\nstep 30: +1 wood\nend: success", success=True, achievements=["collect_wood"])
    quiet = deterministic_checks(request(rollouts=[slow_chop]), CriticSettings(dead_loop_repeats=25))
    assert not [f for f in quiet.findings if f.startswith("dead_loop")]
    assert has(deterministic_checks(request(rollouts=[slow_chop]), CriticSettings(dead_loop_repeats=24)).findings,
               "dead_loop: do x24")
    idle = deterministic_checks(request(rollouts=[episode(), episode(True)]))
    assert has(idle.findings, "dead_loop") == "dead_loop: 1/2 episodes hit the time limit with no achievement"


def test_death_causes_are_counted() -> None:
    rollouts = [episode(death_cause="zombie", end_reason="death")] * 3 + [
        episode(death_cause="lava", end_reason="death"), episode(True)]
    found = deterministic_checks(request(rollouts=rollouts, decision="rl"))
    assert has(found.findings, "deaths") == "deaths: zombie x3, lava x1 (4/5 episodes)"
    assert "zombie" in found.suggestion


def test_flat_curve_at_zero_goes_to_the_slow_agent() -> None:
    flat = deterministic_checks(request(decision="rl", curve=curve([0.3, 0.0, 0.0, 0.0, 0.0, 0.0],
                                                                   [5.0, 1.0, 1.01, 0.99, 1.0, 1.0])))
    assert has(flat.findings, "flat_curve").startswith("flat_curve: last 5 points (to 6000 frames)")
    assert flat.target == critic_pb2.TARGET_SLOW and flat.decisive
    assert has(flat.findings, "no_rollouts")  # the rate then comes from the curve
    rising = deterministic_checks(request(decision="rl", curve=curve([0.0, 0.1, 0.2, 0.3, 0.4])))
    assert not [f for f in rising.findings if f.startswith("flat_curve")]
    assert rising.success_rate == pytest.approx(0.4) and rising.target == critic_pb2.TARGET_FAST
    short = deterministic_checks(request(decision="rl", curve=curve([0.0, 0.0, 0.0])))
    assert not [f for f in short.findings if f.startswith("flat_curve")]


def test_no_rollouts_at_all() -> None:
    found = deterministic_checks(request(), CriticSettings(success_threshold=0.0))
    assert found.success_rate == 0 and not found.success and found.episodes == 0
    assert has(found.findings, "no_rollouts")
    assert found.target == critic_pb2.TARGET_FAST


