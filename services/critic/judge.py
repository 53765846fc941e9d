"""The critic's judgement: deterministic checks first, then (optionally) an LLM's diagnosis.

The numbers of a verdict (success rate, success) always come from :func:`deterministic_checks`;
an LLM only writes the diagnosis and suggestion, and picks the target where the checks leave the
choice open. When the LLM is off or fails, the checks' own diagnosis and suggestion are used.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, BeforeValidator, Field

from rlgpt.config import CriticSettings
from rlgpt.errors import RlgptError
from rlgpt.llm.client import CallRecord
from rlgpt.prompts import render_file, shorten
from rlgpt.v1 import common_pb2, critic_pb2
from rlgpt.world_rules import Requirement, achievement_items, achievement_rule, ways_to_get

log = logging.getLogger(__name__)

PROMPT_DIR = Path(__file__).parent / "prompts"
MAX_TEXT = 600  # diagnosis and suggestion, chars
MAX_PROMPT_ROLLOUTS = 4
MAX_PROMPT_CODE = 4000
MAX_PROMPT_TRAJECTORY = 700
CURVE_TAIL = 10
MAX_ERROR_FINDINGS = 6
TIMEOUT_TYPES = ("Timeout", "StepBudgetExceeded")
DECISIONS = ("code", "rl", "")
TARGET_NAMES = {critic_pb2.TARGET_UNSPECIFIED: "none", critic_pb2.TARGET_FAST: "fast",
                critic_pb2.TARGET_SLOW: "slow", critic_pb2.TARGET_KEEP: "keep"}
_TARGETS = {"fast": critic_pb2.TARGET_FAST, "slow": critic_pb2.TARGET_SLOW, "keep": critic_pb2.TARGET_KEEP}
# A run line of the trajectory text: "do x30", "move_left/move_right x40 at (0, 33), map edge" (a stuck run).
_RUN = re.compile(r"^([A-Za-z_]\w*(?:/[A-Za-z_]\w*)?) x(\d+)(?: at .*)?$")
MAX_TOOL_DEPTH = 8


class CompletesJSON(Protocol):
    """What the critic needs from an LLM client (LLMClient, ReplayClient, or a scripted double)."""

    def complete(self, agent: str, messages: list[dict[str, Any]], schema: type[Any], *, iteration: int = 0,
                 validate: Any = None) -> tuple[Any, CallRecord]: ...




def _clip(value: Any) -> Any:
    # Over-long prose is shortened at a sentence end rather than rejected: a repair round trip costs more.
    return shorten(value, MAX_TEXT) if isinstance(value, str) else value


class CriticAnswer(BaseModel):
    """The LLM's verdict; ``success`` is advisory (the measured rate decides)."""

    success: bool = Field(description="whether the attempt solves the sub-task")
    diagnosis: Annotated[str, BeforeValidator(_clip), Field(max_length=MAX_TEXT,
                                                            description="what went wrong or right")]
    suggestion: Annotated[str, BeforeValidator(_clip), Field(max_length=MAX_TEXT,
                                                             description="the one change to make next")]
    target: Literal["keep", "fast", "slow"] = Field(
        description="keep: the sub-task passed, keep it; fast: revise code/config; slow: revise the plan")


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


def _error_key(error: common_pb2.SkillError) -> tuple[str, int, str, str]:
    return error.type, error.line, error.message.strip(), error.code_line


def _error_text(kind: str, key: tuple[str, int, str, str], count: int) -> str:
    type_, line, message, code_line = key
    where = f" line {line}" if line else ""
    text = f"{kind} {type_}{where}: {shorten(message, 200)}"
    if code_line:
        text += f" (`{shorten(code_line, 120)}`)"
    if count > 1:
        text += f" [x{count}]"
    return text


def _dead_loop(text: str, repeats: int) -> tuple[str, int] | None:
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


def _rule_for(rules: common_pb2.WorldRules, name: str) -> Requirement | None:
    """The rule that unlocks an achievement, or the one way the rules give an item (None when several or none)."""
    rule = achievement_rule(rules, name)
    if rule is None:
        ways = ways_to_get(rules, name)
        rule = ways[0] if len(ways) == 1 else None
    return rule


def required_tools(rules: common_pb2.WorldRules, name: str, start: dict[str, int], depth: int = 0) -> list[str]:
    """Items that must be held (not used up) to reach ``name`` (an achievement or an item), read from the rules:
    the tools of the rule itself and of the rules that give the materials it uses which ``start`` lacks
    (place_furnace uses stone; stone needs a wood_pickaxe)."""
    rule = _rule_for(rules, name)
    if rule is None or depth > MAX_TOOL_DEPTH:
        return []
    tools = list(rule.holds)
    for item, count in rule.uses.items():
        if start.get(item, 0) < count:
            tools += required_tools(rules, item, start, depth + 1)
    return list(dict.fromkeys(tools))


def prerequisite_words(rules: common_pb2.WorldRules) -> tuple[str, ...]:
    """Names a text can say it lacks ("needs a wood_pickaxe"): tools, made and placed things, nearby stations."""
    words = [i.item for r in rules.collect for i in r.requires] + [r.item for r in rules.make]
    words += [r.item for r in rules.place] + [m for r in (*rules.place, *rules.make) for m in r.nearby]
    return tuple(sorted(set(words), key=lambda w: (-len(w), w)))


@functools.lru_cache(maxsize=8)
def _needs_pattern(words: tuple[str, ...]) -> re.Pattern[str] | None:
    if not words:
        return None
    return re.compile(r"\b(?:needs?|requires?|missing|without)\s+(?:an?\s+|the\s+)?("
                      + "|".join(re.escape(w) for w in words) + r")\b")


def _obtained(rules: common_pb2.WorldRules, rollouts: list[common_pb2.EpisodeSummary],
              start: dict[str, int]) -> set[str]:
    """What some episode held or put into the world: start items, final inventories, and what the unlocked
    achievements give or place (a placed table never shows in the inventory; its achievement does)."""
    held = {item for item, count in start.items() if count > 0}
    held |= {i.item for r in rollouts for i in r.final_inventory if i.count > 0}
    placed = {rule.achievement: rule.item for rule in rules.place if rule.achievement}
    for achievement in {a for r in rollouts for a in r.achievements}:
        held |= set(achievement_items(rules, achievement))
        if achievement in placed:
            held.add(placed[achievement])
    return held


def _missing_prerequisites(request: critic_pb2.JudgeRequest, errors: list[common_pb2.SkillError],
                           success_rate: float) -> list[str]:
    """Things the attempt needed but never had: named in errors/trajectories, or required by the rules.

    Every name and requirement comes from ``request.rules`` (the game's rules the planner passes on); without
    rules no prerequisite is checked.
    """
    rules = request.rules
    rollouts = list(request.rollouts)
    start = {i.item: i.count for i in request.start_inventory}
    held = _obtained(rules, rollouts, start)
    found: dict[str, str] = {}
    pattern = _needs_pattern(prerequisite_words(rules))
    if pattern is not None:
        for text in [e.message for e in errors] + [r.text for r in rollouts]:
            for match in pattern.finditer(text.lower()):
                item = match.group(1)
                if item not in held and item not in found:
                    found[item] = f"named in text: {match.group(0)!r}"
    if rollouts and success_rate == 0:
        for condition in request.success:
            name = condition.achievement if condition.WhichOneof("kind") == "achievement" else condition.inventory.item
            for tool in required_tools(rules, name, start):
                if tool not in found and tool not in held:
                    found[tool] = (f"the rules say {name} needs a {tool} held, and no episode ever held one (nor "
                                   "started with one)")
    return [f"missing_prerequisite {item}: {why}" for item, why in found.items()]


def _flat_curve(curve: list[critic_pb2.CurvePoint], settings: CriticSettings) -> str:
    n = settings.flat_curve_min_points
    if len(curve) < n:
        return ""
    tail = curve[-n:]
    rates = [p.success_rate for p in tail]
    returns = [p.mean_return for p in tail]
    tol = settings.flat_curve_tolerance
    # Returns have the reward's scale, so their tolerance is relative (with a floor of 1).
    return_tol = tol * max(1.0, abs(sum(returns) / n))
    if (max(rates) - min(rates) <= tol and max(returns) - min(returns) <= return_tol
            and max(rates) < settings.success_threshold):
        return (f"flat_curve: last {n} points (to {tail[-1].env_frames} frames): success "
                f"{min(rates):.2f}..{max(rates):.2f}, mean return {min(returns):.2f}..{max(returns):.2f}")
    return ""


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
    threshold = settings.success_threshold
    rollouts = list(request.rollouts)
    curve = list(request.curve)
    n = len(rollouts)
    findings: list[str] = []
    diagnosis: list[str] = []
    suggestion: list[str] = []

    if rollouts:
        successes = sum(r.success for r in rollouts)
        rate = successes / n
        findings.append(f"success_rate {rate:.2f} {'>=' if rate >= threshold else '<'} threshold "
                        f"{threshold:.2f} ({successes}/{n} episodes)")
        diagnosis.append(f"{successes}/{n} test episodes succeeded (rate {rate:.2f}, threshold {threshold:.2f}).")
    elif curve:
        rate = float(curve[-1].success_rate)
        findings.append(f"no_rollouts: success rate {rate:.2f} taken from the last curve point "
                        f"({curve[-1].env_frames} frames)")
        diagnosis.append(f"No evaluation episodes; training success rate {rate:.2f} at {curve[-1].env_frames} "
                         "frames.")
    else:
        rate = 0.0
        findings.append("no_rollouts: no episodes and no learning curve, nothing was measured")
        diagnosis.append("Nothing ran: no episodes and no learning curve.")
        suggestion.append("Make the attempt run at least one test episode.")
    success = rate >= threshold and bool(rollouts or curve)

    # Code errors, from the request and from the episodes they ended.
    errors = list(request.errors) + [r.error for r in rollouts if r.HasField("error") and r.error.type]
    grouped = Counter(_error_key(e) for e in errors)
    exceptions = [(k, c) for k, c in grouped.items() if k[0] not in TIMEOUT_TYPES]
    timeouts = [(k, c) for k, c in grouped.items() if k[0] in TIMEOUT_TYPES]
    for kind, items in (("exception", exceptions), ("timeout", timeouts)):
        for key, count in items[:MAX_ERROR_FINDINGS]:
            findings.append(_error_text(kind, key, count))
        if len(items) > MAX_ERROR_FINDINGS:
            findings.append(f"{kind}: {len(items) - MAX_ERROR_FINDINGS} more distinct errors left out")
    if exceptions:
        (type_, line, message, code_line), _ = exceptions[0]
        where = f" at line {line}" + (f" (`{shorten(code_line, 80)}`)" if code_line else "") if line else ""
        said = shorten(message, 150)
        diagnosis.append(f"The code raised {type_}{where}: {said}{'' if said.endswith('.') else '.'}")
        suggestion.append(f"Fix the {type_}{where}; guard the case that triggers it.")
    if timeouts:
        (type_, line, _message, _code_line), _ = timeouts[0]
        diagnosis.append(f"The code hit {type_}" + (f" at line {line}." if line else "."))
        suggestion.append("Yield an action on every game step, bound every loop and return when the goal "
                          "cannot be reached.")

    # Dead loops: one action repeated with no inventory change, or time running out with nothing unlocked.
    loops = [(i, loop) for i, r in enumerate(rollouts) if (loop := _dead_loop(r.text, settings.dead_loop_repeats))]
    if loops:
        _i, (action, count) = max(loops, key=lambda x: x[1][1])
        findings.append(f"dead_loop: {action} x{count} with no inventory change ({len(loops)}/{n} episodes)")
        diagnosis.append(f"The agent repeated {action} {count} times without any progress.")
        suggestion.append(f"Stop repeating {action} when it changes nothing: check the target is seen and "
                          "reachable, explore otherwise, and give up after a bounded number of tries.")
    idle = sum(r.end_reason == "time_limit" and not r.achievements and not r.success for r in rollouts)
    if idle:
        findings.append(f"dead_loop: {idle}/{n} episodes hit the time limit with no achievement")
        if not loops:
            diagnosis.append(f"{idle}/{n} episodes ran out of time without unlocking anything.")
            suggestion.append("Make steady progress toward the goal; explore when the needed material is not "
                              "in view.")
    gave_up = sum(r.end_reason == "skill_finished" and not r.success for r in rollouts)
    if gave_up:
        findings.append(f"gave_up: {gave_up}/{n} episodes: the skill returned before the task held")
        diagnosis.append(f"In {gave_up}/{n} episodes the skill returned before the success condition held.")
        suggestion.append("Loop until the success condition holds instead of returning early.")

    deaths = Counter(r.death_cause for r in rollouts if r.death_cause)
    if deaths:
        causes = ", ".join(f"{cause} x{count}" for cause, count in deaths.most_common())
        findings.append(f"deaths: {causes} ({sum(deaths.values())}/{n} episodes)")
        top = deaths.most_common(1)[0][0]
        diagnosis.append(f"The player died in {sum(deaths.values())}/{n} episodes, mostly of {top}.")
        suggestion.append(f"Avoid dying of {top}: keep health, food and drink up and move away from threats.")

    flat = _flat_curve(curve, settings)
    if flat:
        findings.append(flat)
        diagnosis.append("Training has stopped improving.")
    flat_at_zero = bool(flat) and max(p.success_rate for p in curve[-settings.flat_curve_min_points:]) == 0

    missing = [] if success else _missing_prerequisites(request, errors, rate)
    findings.extend(missing)

    # The target rule (see the docstring).
    if success:
        target, decisive = critic_pb2.TARGET_KEEP, True
        suggestion.insert(0, "No change needed; move on to the next sub-task.")
    elif missing:
        target, decisive = critic_pb2.TARGET_SLOW, True
        items = ", ".join(m.split(":", 1)[0].removeprefix("missing_prerequisite ") for m in missing)
        diagnosis.insert(0, f"The attempt lacks a prerequisite: {items}.")
        suggestion.insert(0, f"Add a sub-task that obtains {items} before this one (or start it with them).")
    elif exceptions or timeouts:
        target, decisive = critic_pb2.TARGET_FAST, True
    elif flat_at_zero:
        target, decisive = critic_pb2.TARGET_SLOW, True
        suggestion.insert(0, "RL is stuck at zero success: split this sub-task, code part of it, or reorder "
                             "the plan.")
    else:
        target, decisive = critic_pb2.TARGET_FAST, False
        if request.decision == "rl":
            suggestion.append("Shape the reward toward the goal, narrow the action space, or add coded skills "
                              "as actions.")
        else:
            suggestion.append("Revise the code to handle the failing episodes.")
    return Findings(success_rate=rate, findings=findings, target=target, decisive=decisive, success=success,
                    episodes=n, diagnosis=_join(diagnosis), suggestion=_join(suggestion))


def _join(parts: list[str]) -> str:
    text = ""
    for part in parts:
        if len(text) + len(part) + 1 > MAX_TEXT:
            break
        text = f"{text} {part}".strip()
    return text or "(none)"


def render(name: str, **fields: str) -> str:
    return render_file(PROMPT_DIR / f"{name}.txt", **fields)


def conditions_text(conditions: list[common_pb2.Condition]) -> str:
    parts = []
    for c in conditions:
        if c.WhichOneof("kind") == "achievement":
            parts.append(f"achievement {c.achievement}")
        elif c.WhichOneof("kind") == "inventory":
            parts.append(f"at least {c.inventory.count} {c.inventory.item}")
    return " and ".join(parts) or "(none given)"


def _truncate_middle(text: str, limit: int) -> str:
    """Whole lines of the head (what the agent did first) and of the tail (how the episode ended), within
    ``limit`` characters; the lines left out in between are counted."""
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    head: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > limit * 2 // 3:
            break
        head.append(line)
        used += len(line) + 1
    tail: list[str] = []
    for line in reversed(lines[len(head):]):
        if used + len(line) + 1 > limit:
            break
        tail.insert(0, line)
        used += len(line) + 1
    if not head and not tail:  # one line longer than the limit: its words
        return shorten(text, limit)
    left = len(lines) - len(head) - len(tail)
    return "\n".join([*head, f"... ({left} lines left out) ...", *tail])


def rollouts_text(rollouts: list[common_pb2.EpisodeSummary]) -> str:
    """Up to four episodes, failures first (they carry the diagnosis), one success for contrast."""
    if not rollouts:
        return "(none)"
    indexed = list(enumerate(rollouts))
    chosen = ([x for x in indexed if not x[1].success][:MAX_PROMPT_ROLLOUTS - 1]
              + [x for x in indexed if x[1].success][:1])
    chosen += [x for x in indexed if x not in chosen][:MAX_PROMPT_ROLLOUTS - len(chosen)]
    blocks = []
    for i, r in sorted(chosen, key=lambda x: x[0])[:MAX_PROMPT_ROLLOUTS]:
        inventory = ", ".join(f"{x.item} {x.count}" for x in r.final_inventory) or "empty"
        head = (f"episode {i}: success={r.success} steps={r.steps} return={r.episode_return:.2f} "
                f"end={r.end_reason or '?'} death={r.death_cause or 'none'} "
                f"achievements=[{', '.join(r.achievements)}] inventory=[{inventory}]")
        text = _truncate_middle(r.text.strip(), MAX_PROMPT_TRAJECTORY)
        blocks.append(head + ("\n" + "\n".join(f"  {line}" for line in text.splitlines()) if text else ""))
    left = len(rollouts) - len(blocks)
    return "\n".join(blocks) + (f"\n({left} more episodes not shown)" if left > 0 else "")


def code_text(code: str) -> str:
    """The code with line numbers (errors cite them); whole lines only, the rest counted."""
    if not code.strip():
        return "(none)"
    lines = [f"{i:3d} | {line}" for i, line in enumerate(code.splitlines(), 1)]
    shown: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > MAX_PROMPT_CODE:
            break
        shown.append(line)
        used += len(line) + 1
    if len(shown) < len(lines):
        shown.append(f"... ({len(lines) - len(shown)} more lines not shown)")
    return "\n".join(shown)


def curve_text(curve: list[critic_pb2.CurvePoint]) -> str:
    if not curve:
        return "(none)"
    lines = [f"frames={p.env_frames} success={p.success_rate:.2f} mean_return={p.mean_return:.2f}"
             for p in curve[-CURVE_TAIL:]]
    return (f"({len(curve)} points, last {len(lines)} shown)\n" if len(curve) > CURVE_TAIL else "") + "\n".join(lines)


class Judge:
    """Turns a JudgeRequest into a Verdict: deterministic checks, then the LLM where configured."""

    def __init__(self, settings: CriticSettings, llm: CompletesJSON | None = None):
        self.settings = settings
        self.llm = llm

    def prompt(self, request: critic_pb2.JudgeRequest, findings: Findings) -> str:
        return render(
            "critic", subtask=request.subtask, description=request.description or "(none)",
            decision=request.decision or "(not given)", success=conditions_text(list(request.success)),
            threshold=f"{self.settings.success_threshold:.2f}", success_rate=f"{findings.success_rate:.2f}",
            findings="\n".join(f"- {f}" for f in findings.findings) or "(none)",
            rollouts=rollouts_text(list(request.rollouts)), code=code_text(request.code),
            curve=curve_text(list(request.curve)), protocol=request.test_protocol.strip() or "(not given)",
            start=", ".join(f"{i.count} {i.item}" for i in request.start_inventory if i.count) or "nothing",
            rules=request.rules.text.strip() or "(not given)")

    def messages(self, request: critic_pb2.JudgeRequest, findings: Findings) -> list[dict[str, Any]]:
        """One user message; with ``attach_frames``, the PNG frames follow the text as image parts."""
        text = self.prompt(request, findings)
        frames = list(request.frames)[: self.settings.max_frames] if self.settings.attach_frames else []
        if not frames:
            return [{"role": "user", "content": text}]
        parts: list[dict[str, Any]] = [{"type": "text", "text": text + f"\n{len(frames)} frames from failed "
                                                                      "episodes follow."}]
        for frame in frames:
            url = "data:image/png;base64," + base64.b64encode(frame).decode("ascii")
            parts.append({"type": "image_url", "image_url": {"url": url}})
        return [{"role": "user", "content": parts}]

    def judge(self, request: critic_pb2.JudgeRequest) -> critic_pb2.Verdict:
        """The verdict; an LLM failure degrades to the deterministic one (finding ``llm_unavailable``)."""
        return self.judge_with_record(request)[0]

    def judge_with_record(self, request: critic_pb2.JudgeRequest) -> tuple[critic_pb2.Verdict, CallRecord | None]:
        """The verdict and the record of the LLM call behind it (None when no LLM answered)."""
        record: CallRecord | None = None
        findings = deterministic_checks(request, self.settings)
        verdict = critic_pb2.Verdict(success=findings.success, success_rate=findings.success_rate,
                                     diagnosis=findings.diagnosis, suggestion=findings.suggestion,
                                     target=findings.target)
        notes: list[str] = []
        if self.llm is not None and self.settings.use_llm:
            try:
                answer, record = self.llm.complete("critic", self.messages(request, findings), CriticAnswer)
            except RlgptError as exc:  # LLMError, StructuredOutputError, Unavailable, an exhausted replay
                log.warning("critic LLM failed, deterministic verdict for %s: %s", request.subtask, exc)
                record = getattr(exc, "record", None)  # a failed answer is still a call a replay must meet
                notes.append(f"llm_unavailable: {type(exc).__name__}: {shorten(str(exc), 300)}")
            else:
                self._merge(verdict, findings, answer, notes)
        verdict.findings.extend(findings.findings + notes)
        return verdict, record

    def _merge(self, verdict: critic_pb2.Verdict, findings: Findings, answer: CriticAnswer,
               notes: list[str]) -> None:
        verdict.diagnosis = answer.diagnosis.strip() or findings.diagnosis
        verdict.suggestion = answer.suggestion.strip() or findings.suggestion
        if answer.success != findings.success:
            # The measured rate decides; the LLM's opinion is kept for the agents and the record.
            notes.append(f"llm_disagrees: the LLM judged success={answer.success}; measured success rate "
                         f"{findings.success_rate:.2f} vs threshold {self.settings.success_threshold:.2f}")
        llm_target = _TARGETS[answer.target]
        # "keep" only where the measured rate passed; the checks' target stands where their rule is decisive.
        if findings.decisive or llm_target == critic_pb2.TARGET_KEEP:
            if llm_target != findings.target:
                notes.append(f"llm_target_overruled: the LLM chose {answer.target}; the checks' rule says "
                             f"{TARGET_NAMES[findings.target]}")
        else:
            verdict.target = llm_target
