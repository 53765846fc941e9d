"""The critic's deterministic checks: one function per check, composed by :func:`deterministic_checks`.

Each check reads one thing of a JudgeRequest and returns a :class:`Check`: its finding lines (what the verdict
lists) and the sentences it adds to the deterministic diagnosis and suggestion (used when no LLM answers).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

from rlgpt.prompts import shorten
from rlgpt.v1 import common_pb2, critic_pb2
from services.critic.prerequisites import missing_items
from services.critic.settings import CriticSettings
from services.critic.texts import join_texts

MAX_ERROR_FINDINGS = 6
TIMEOUT_TYPES = ("Timeout", "StepBudgetExceeded")
# A run line of the trajectory text: "<action> x30", "<action>/<action> x40 at (0, 33), map edge" (a stuck run).
_RUN = re.compile(r"^([A-Za-z_]\w*(?:/[A-Za-z_]\w*)?) x(\d+)(?: at .*)?$")

ErrorKey = tuple[str, int, str, str]  # type, line, message, code line


@dataclasses.dataclass
class Check:
    """What one check found: finding lines, and sentences for the deterministic diagnosis and suggestion."""

    findings: list[str] = dataclasses.field(default_factory=list)
    diagnosis: list[str] = dataclasses.field(default_factory=list)
    suggestion: list[str] = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.findings)


@dataclasses.dataclass
class Findings:
    """What the deterministic checks found.

    ``target`` follows the rule of :func:`deterministic_checks`; ``decisive`` says whether a hard
    rule fixed it (an LLM may then not change it). ``diagnosis`` and ``suggestion`` are the
    deterministic texts, used when no LLM answers.
    """

    success_rate: float
    findings: list[str]
    target: int
    decisive: bool = False
    success: bool = False
    episodes: int = 0
    diagnosis: str = ""
    suggestion: str = ""


def success_rate(rollouts: list[common_pb2.EpisodeSummary], curve: list[critic_pb2.CurvePoint],
                 threshold: float) -> tuple[float, Check]:
    """Successes over rollouts; with no rollouts, the last curve point's success rate; with neither, 0."""
    n = len(rollouts)
    if rollouts:
        successes = sum(r.success for r in rollouts)
        rate = successes / n
        return rate, Check(
            [f"success_rate {rate:.2f} {'>=' if rate >= threshold else '<'} threshold {threshold:.2f} "
             f"({successes}/{n} episodes)"],
            [f"{successes}/{n} test episodes succeeded (rate {rate:.2f}, threshold {threshold:.2f})."])
    if curve:
        rate = float(curve[-1].success_rate)
        return rate, Check(
            [f"no_rollouts: success rate {rate:.2f} taken from the last curve point ({curve[-1].env_frames} "
             "frames)"],
            [f"No evaluation episodes; training success rate {rate:.2f} at {curve[-1].env_frames} frames."])
    return 0.0, Check(["no_rollouts: no episodes and no learning curve, nothing was measured"],
                      ["Nothing ran: no episodes and no learning curve."],
                      ["Make the attempt run at least one test episode."])


def code_errors(request: critic_pb2.JudgeRequest) -> list[common_pb2.SkillError]:
    """The errors of the request and those that ended its episodes."""
    return list(request.errors) + [r.error for r in request.rollouts if r.HasField("error") and r.error.type]


def _grouped(errors: list[common_pb2.SkillError], timeouts: bool) -> list[tuple[ErrorKey, int]]:
    """Distinct errors (type, line, message, code line) with their counts, first seen first."""
    counts = Counter((e.type, e.line, e.message.strip(), e.code_line) for e in errors)
    return [(key, count) for key, count in counts.items() if (key[0] in TIMEOUT_TYPES) == timeouts]


def _error_findings(kind: str, items: list[tuple[ErrorKey, int]]) -> list[str]:
    lines = []
    for (type_, line, message, code_line), count in items[:MAX_ERROR_FINDINGS]:
        where = f" line {line}" if line else ""
        text = f"{kind} {type_}{where}: {shorten(message, 200)}"
        if code_line:
            text += f" (`{shorten(code_line, 120)}`)"
        if count > 1:
            text += f" [x{count}]"
        lines.append(text)
    if len(items) > MAX_ERROR_FINDINGS:
        lines.append(f"{kind}: {len(items) - MAX_ERROR_FINDINGS} more distinct errors left out")
    return lines


def _error_check(errors: list[common_pb2.SkillError], timeouts: bool) -> tuple[Check, ErrorKey | None]:
    """The findings on the distinct timeouts (with ``timeouts``) or other errors, and the first of them seen."""
    items = _grouped(errors, timeouts)
    return Check(_error_findings("timeout" if timeouts else "exception", items)), items[0][0] if items else None


def exceptions(errors: list[common_pb2.SkillError]) -> Check:
    """Exceptions the code raised, each with its line and source line; the first one diagnosed."""
    check, first = _error_check(errors, timeouts=False)
    if first is not None:
        type_, line, message, code_line = first
        where = f" at line {line}" + (f" (`{shorten(code_line, 80)}`)" if code_line else "") if line else ""
        said = shorten(message, 150)
        check.diagnosis.append(f"The code raised {type_}{where}: {said}{'' if said.endswith('.') else '.'}")
        check.suggestion.append(f"Fix the {type_}{where}; guard the case that triggers it.")
    return check


def timeouts(errors: list[common_pb2.SkillError]) -> Check:
    """Code that ran out of time or of its step budget."""
    check, first = _error_check(errors, timeouts=True)
    if first is not None:
        type_, line, _message, _code_line = first
        check.diagnosis.append(f"The code hit {type_}" + (f" at line {line}." if line else "."))
        check.suggestion.append("Yield an action on every game step, bound every loop and return when the goal "
                                "cannot be reached.")
    return check


def dead_loop(text: str, repeats: int) -> tuple[str, int] | None:
    """The longest run of one action with no inventory change in a text trajectory, if >= ``repeats``."""
    lines = [line.strip() for line in text.splitlines()]
    best: tuple[str, int] | None = None
    for i, line in enumerate(lines):
        match = _RUN.match(line)
        if not match:
            continue
        count = int(match.group(2))
        # A change line right after a run was caused by the run's last action.
        if i + 1 < len(lines) and lines[i + 1].startswith("step "):
            count -= 1
        if count >= repeats and (best is None or count > best[1]):
            best = (match.group(1), count)
    return best


def dead_loops(rollouts: list[common_pb2.EpisodeSummary], repeats: int) -> Check:
    """One action repeated with no inventory change, or time running out with nothing unlocked."""
    n = len(rollouts)
    check = Check()
    loops = [loop for r in rollouts if (loop := dead_loop(r.text, repeats))]
    if loops:
        action, count = max(loops, key=lambda loop: loop[1])
        check.findings.append(f"dead_loop: {action} x{count} with no inventory change ({len(loops)}/{n} episodes)")
        check.diagnosis.append(f"The agent repeated {action} {count} times without any progress.")
        check.suggestion.append(f"Stop repeating {action} when it changes nothing: check the target is seen and "
                                "reachable, explore otherwise, and give up after a bounded number of tries.")
    idle = sum(r.end_reason == "time_limit" and not r.achievements and not r.success for r in rollouts)
    if idle:
        check.findings.append(f"dead_loop: {idle}/{n} episodes hit the time limit with no achievement")
        if not loops:
            check.diagnosis.append(f"{idle}/{n} episodes ran out of time without unlocking anything.")
            check.suggestion.append("Make steady progress toward the goal; explore when the needed material is "
                                    "not in view.")
    return check


def gave_up(rollouts: list[common_pb2.EpisodeSummary]) -> Check:
    """Skills that returned before the success condition held."""
    count = sum(r.end_reason == "skill_finished" and not r.success for r in rollouts)
    if not count:
        return Check()
    n = len(rollouts)
    return Check([f"gave_up: {count}/{n} episodes: the skill returned before the task held"],
                 [f"In {count}/{n} episodes the skill returned before the success condition held."],
                 ["Loop until the success condition holds instead of returning early."])


def deaths(rollouts: list[common_pb2.EpisodeSummary]) -> Check:
    """Episodes in which the player died, by cause."""
    causes = Counter(r.death_cause for r in rollouts if r.death_cause)
    if not causes:
        return Check()
    died = sum(causes.values())
    listed = ", ".join(f"{cause} x{count}" for cause, count in causes.most_common())
    top = causes.most_common(1)[0][0]
    return Check([f"deaths: {listed} ({died}/{len(rollouts)} episodes)"],
                 [f"The player died in {died}/{len(rollouts)} episodes, mostly of {top}."],
                 [f"Avoid dying of {top}: keep health, food and drink up and move away from threats."])


def flat_curve(curve: list[critic_pb2.CurvePoint], settings: CriticSettings) -> Check:
    """A learning curve whose last points no longer move, below the success threshold."""
    n = settings.flat_curve_min_points
    if len(curve) < n:
        return Check()
    tail = curve[-n:]
    rates = [p.success_rate for p in tail]
    returns = [p.mean_return for p in tail]
    tol = settings.flat_curve_tolerance
    # Returns have the reward's scale, so their tolerance is relative (with a floor of 1).
    return_tol = tol * max(1.0, abs(sum(returns) / n))
    if (max(rates) - min(rates) <= tol and max(returns) - min(returns) <= return_tol
            and max(rates) < settings.success_threshold):
        return Check([f"flat_curve: last {n} points (to {tail[-1].env_frames} frames): success "
                      f"{min(rates):.2f}..{max(rates):.2f}, mean return {min(returns):.2f}..{max(returns):.2f}"],
                     ["Training has stopped improving."])
    return Check()


def stuck_at_zero(curve: list[critic_pb2.CurvePoint], settings: CriticSettings) -> bool:
    """The curve is flat and its last points never succeeded."""
    return bool(flat_curve(curve, settings)) and max(
        p.success_rate for p in curve[-settings.flat_curve_min_points:]) == 0


def missing_prerequisites(request: critic_pb2.JudgeRequest, errors: list[common_pb2.SkillError],
                          rate: float) -> Check:
    """Things the attempt needed but never had (see :func:`prerequisites.missing_items`)."""
    missing = missing_items(request, errors, rate)
    if not missing:
        return Check()
    items = ", ".join(missing)
    return Check([f"missing_prerequisite {item}: {why}" for item, why in missing.items()],
                 [f"The attempt lacks a prerequisite: {items}."],
                 [f"Add a sub-task that obtains {items} before this one (or start it with them)."])


@dataclasses.dataclass(frozen=True)
class Target:
    """Who acts next, whether that is fixed, and the rule's own suggestion (before or after the checks')."""

    target: int
    decisive: bool
    first: str = ""
    last: str = ""


def target_rule(*, success: bool, missing: bool, code_failed: bool, stuck: bool, decision: str) -> Target:
    """The target rule of :func:`deterministic_checks` (first match wins)."""
    if success:
        return Target(critic_pb2.TARGET_KEEP, True, first="No change needed; move on to the next sub-task.")
    if missing:
        return Target(critic_pb2.TARGET_SLOW, True)  # the missing check's own texts lead
    if code_failed:
        return Target(critic_pb2.TARGET_FAST, True)
    if stuck:
        return Target(critic_pb2.TARGET_SLOW, True, first="RL is stuck at zero success: split this sub-task, code "
                                                          "part of it, or reorder the plan.")
    if decision == "rl":
        return Target(critic_pb2.TARGET_FAST, False, last="Shape the reward toward the goal, narrow the action "
                                                          "space, or add coded skills as actions.")
    return Target(critic_pb2.TARGET_FAST, False, last="Revise the code to handle the failing episodes.")


def deterministic_checks(request: critic_pb2.JudgeRequest, settings: CriticSettings | None = None) -> Findings:
    """Measures the attempt and lists what went wrong, with no LLM.

    Success rate: successes over rollouts; with no rollouts, the last curve point's success rate;
    with neither, 0 (and never a success).

    Target rule (first match wins):

    1. success (rate >= threshold): ``TARGET_KEEP``, decisive: the sub-task is kept; the plan moves on.
    2. a missing prerequisite (a "needs wood_pickaxe"-style text, or a tool the rules require that no episode
       ever held while the rate is 0): ``TARGET_SLOW``, decisive: the plan lacks a step.
    3. code errors (exceptions, timeouts, refused code): ``TARGET_FAST``, decisive: fix the code.
    4. repeated failure: the curve is flat at a success rate of 0: ``TARGET_SLOW``, decisive: more
       of the same RL will not help; split the sub-task, code part of it, or reorder the plan.
    5. anything else (low success on a coded attempt, dead loops, deaths, an RL curve still
       moving, nothing run): ``TARGET_FAST``, not decisive: an LLM critic may pick the slow loop.
    """
    settings = settings or CriticSettings()
    rollouts, curve = list(request.rollouts), list(request.curve)
    rate, measured = success_rate(rollouts, curve, settings.success_threshold)
    success = rate >= settings.success_threshold and bool(rollouts or curve)
    errors = code_errors(request)
    raised, timed_out = exceptions(errors), timeouts(errors)
    checks = [measured, raised, timed_out, dead_loops(rollouts, settings.dead_loop_repeats), gave_up(rollouts),
              deaths(rollouts), flat_curve(curve, settings)]
    missing = Check() if success else missing_prerequisites(request, errors, rate)
    rule = target_rule(success=success, missing=bool(missing), code_failed=bool(raised or timed_out),
                       stuck=stuck_at_zero(curve, settings), decision=request.decision)
    # A missing prerequisite decides the target, so its texts lead the diagnosis and the suggestion.
    diagnosis = [text for check in (missing, *checks) for text in check.diagnosis]
    suggestion = [rule.first, *(text for check in (missing, *checks) for text in check.suggestion), rule.last]
    return Findings(success_rate=rate, findings=[f for check in (*checks, missing) for f in check.findings],
                    target=rule.target, decisive=rule.decisive, success=success, episodes=len(rollouts),
                    diagnosis=join_texts(diagnosis), suggestion=join_texts([text for text in suggestion if text]))
