"""The critic's deterministic checks of a whole task's evaluation (``JudgeTask``): its numbers, where the episodes
end and why, and who acts next.

Measured:

- success rate: successful episodes over the evaluation's episodes (0 with none); success when at least one
  episode ran and the rate is at or above the request's ``target_success``. The whole game (a request with a
  ``score``): success when the score is at or above ``target_success`` x 100; the diagnosis names the achievements
  never unlocked and the lowest rates (what holds the score down).
- death causes (``Verdict.death_causes``): the failed episodes per ``death_cause``; one that ended in "death"
  with no cause counts as "unknown". An episode *died* when it has either.
- where a failed episode ended: the first link whose conditions never held in it (``stages_done``, one flag per
  link, read as the planner counts a link reached: every earlier link held); "after the chain" when every link
  held; "link unknown" when the episode has no flag per link (e.g. a chain whose runner keeps no stages).
- a link's losses: ``reached - succeeded``. The weakest link loses the most; among equals the earlier one.
- a kind of failure: (where the episode ended, what ended it: its death cause, else its end reason). One episode
  of each kind, the most frequent kinds first (at most :data:`MAX_KINDS`), has the last lines of its trajectory
  quoted in the diagnosis; the whole diagnosis stays within :data:`MAX_TASK_TEXT` characters.

Target rule (first match wins):

1. success: ``TARGET_KEEP``, decisive.
2. no links (no chain ran): ``TARGET_SLOW``, decisive: there is no link to revise; the plan must give its
   sub-tasks controllers.
3. the weakest link fails its own tests too (its own success rate, when measured, is below the critic's success
   threshold): ``TARGET_FAST`` on it, not decisive: the link itself is what fails, whatever ends the episodes.
4. most failed episodes died (more than half): ``TARGET_SLOW``, not decisive: the plan needs a survival sub-task
   or macro action against the main causes (the suggestion says so).
5. a link loses episodes: ``TARGET_FAST`` on the weakest link (``Verdict.subtask``), not decisive: revise its
   skill, or continue or reconfigure its training. When its own success (its test) is at or above the critic's
   success threshold while its success in the chain is below it, the finding ``handover_gap`` and the suggestion
   say its tests do not start where the chain hands over.
6. otherwise (no link loses an episode, yet the task failed): ``TARGET_SLOW``, not decisive: the links do not add
   up to the task; the plan misses a step.

``Verdict.subtask`` is the weakest link whatever the target but keep (with ``TARGET_SLOW`` the fast agent revises
it beside the slow agent's re-plan). Where a rule is not decisive an LLM may choose the other
loop, and the link (see :mod:`services.critic.task_judge`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from rlgpt.prompts import shorten
from rlgpt.v1 import common_pb2, critic_pb2
from services.critic.settings import CriticSettings
from services.critic.texts import MAX_TEXT, join_texts

MAX_TASK_TEXT = 2000
"""Most characters of a whole-task verdict's diagnosis (it quotes trajectories)."""
MAX_KINDS = 4
"""Most kinds of failure whose trajectory is quoted (diagnosis and prompt)."""
TAIL_LINES = 3
"""Last trajectory lines quoted per kind of failure in the diagnosis."""
TAIL_LINE_CHARS = 120
"""Most characters of one quoted trajectory line."""
MAX_LINKS = 64
"""Most links in one JudgeTask request (a plan has far fewer sub-tasks)."""
AFTER_CHAIN = "after the chain"
UNKNOWN_LINK = "link unknown"


@dataclasses.dataclass(frozen=True)
class FailureKind:
    """Failed episodes that ended in the same place for the same reason; the first is the one quoted."""

    link: str
    cause: str
    episodes: tuple[int, ...]


@dataclasses.dataclass
class TaskFindings:
    """What the checks of a whole task's evaluation found; ``target`` and ``decisive`` as the rule says."""

    success_rate: float
    success: bool
    target: int
    decisive: bool
    subtask: str
    weakest: str
    death_causes: dict[str, int]
    kinds: list[FailureKind]
    findings: list[str]
    diagnosis: str
    suggestion: str


def died(episode: common_pb2.EpisodeSummary) -> bool:
    return bool(episode.death_cause) or episode.end_reason == "death"


def ended_in(episode: common_pb2.EpisodeSummary, links: list[critic_pb2.TaskLink]) -> str:
    """The link a failed episode ended in (its first link not done), :data:`AFTER_CHAIN` or :data:`UNKNOWN_LINK`."""
    if not links or len(episode.stages_done) != len(links):
        return UNKNOWN_LINK
    return next((link.subtask for link, done in zip(links, episode.stages_done, strict=True) if not done),
                AFTER_CHAIN)


def cause_of(episode: common_pb2.EpisodeSummary) -> str:
    """What ended a failed episode: "died of <cause>", else its end reason."""
    if died(episode):
        return f"died of {episode.death_cause or 'unknown'}"
    return episode.end_reason or "unknown end"


def failure_kinds(episodes: list[common_pb2.EpisodeSummary], links: list[critic_pb2.TaskLink]) -> list[FailureKind]:
    """The kinds of failure, the most frequent first (among equals, the first seen first)."""
    grouped: dict[tuple[str, str], list[int]] = {}
    for i, episode in enumerate(episodes):
        if not episode.success:
            grouped.setdefault((ended_in(episode, links), cause_of(episode)), []).append(i)
    kinds = [FailureKind(link, cause, tuple(found)) for (link, cause), found in grouped.items()]
    return sorted(kinds, key=lambda kind: (-len(kind.episodes), kind.episodes[0]))


def death_causes(episodes: list[common_pb2.EpisodeSummary]) -> Counter[str]:
    """Failed episodes per death cause."""
    return Counter(e.death_cause or "unknown" for e in episodes if not e.success and died(e))


def weakest_link(links: list[critic_pb2.TaskLink]) -> critic_pb2.TaskLink | None:
    """The link that loses the most episodes (the earlier among equals); None when none loses any."""
    best = max(links, key=lambda link: link.reached - link.succeeded, default=None)
    return best if best is not None and best.reached > best.succeeded else None


def link_rate(link: critic_pb2.TaskLink) -> float:
    return link.succeeded / link.reached if link.reached else 0.0


def own_text(link: critic_pb2.TaskLink) -> str:
    return f"own success {link.own_success_rate:.0%}" if link.own_success_rate >= 0 else "own success not measured"


def tail_lines(text: str, lines: int, line_chars: int) -> list[str]:
    """The last ``lines`` non-empty lines of a trajectory, each within ``line_chars`` characters."""
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return [shorten(line, line_chars) for line in kept[-lines:]]


def quote(kind: FailureKind, episodes: list[common_pb2.EpisodeSummary]) -> str:
    """One kind of failure and the end of its first episode's trajectory."""
    first = kind.episodes[0]
    tail = tail_lines(episodes[first].text, TAIL_LINES, TAIL_LINE_CHARS)
    said = " | ".join(tail) if tail else "(no trajectory kept)"
    return f"[{kind.link}, {kind.cause}, {episodes_text(len(kind.episodes))}] episode {first} ends: {said}" + (
        "" if said.endswith((".", "!", "?", ")")) else ".")


def episodes_text(count: int) -> str:
    return f"{count} episode" + ("" if count == 1 else "s")


def _counted(counts: Counter[str], failed: int) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.most_common()) + f" of {failed} failed episodes"


def game_text(request: critic_pb2.JudgeTaskRequest, shown: int = 6) -> str:
    """The whole game's measure in words: its score against the target, the achievements never unlocked and the
    lowest rates of the others (what holds the score down)."""
    rates = dict(request.achievement_rates)
    never = sorted(name for name, rate in rates.items() if rate <= 0)
    low = sorted(((rate, name) for name, rate in rates.items() if 0 < rate < 100))[:shown]
    text = f"The whole game scored {request.score:.1f} (target {100 * request.target_success:.1f})."
    if never:
        text += f" Never unlocked ({len(never)} of {len(rates)}): {', '.join(never)}."
    if low:
        text += " Lowest rates: " + ", ".join(f"{name} {rate:.0f}%" for rate, name in low) + "."
    return text


def task_checks(request: critic_pb2.JudgeTaskRequest, settings: CriticSettings | None = None) -> TaskFindings:
    """Measures the whole task's evaluation and applies the target rule of this module, with no LLM."""
    settings = settings or CriticSettings()
    episodes, links = list(request.episodes), list(request.links)
    n, successes = len(episodes), sum(e.success for e in episodes)
    rate, target = (successes / n if n else 0.0), float(request.target_success)
    game = request.HasField("score")  # the whole game: measured by its score, no episode "succeeds"
    success = bool(n) and (request.score / 100.0 >= target if game else rate >= target)
    failed = n - successes
    deaths = death_causes(episodes)
    died_count = sum(deaths.values())
    ends = Counter(e.end_reason or "unknown end" for e in episodes if not e.success and not died(e))
    kinds = failure_kinds(episodes, links)
    weak = weakest_link(links)

    if game:
        findings = [f"score {request.score:.1f} {'>=' if success else '<'} target {100 * target:.1f} ({n} episodes)"
                    if n else "no_episodes: the evaluation ran no episode"]
        diagnosis = [game_text(request)]
    else:
        findings = [f"success_rate {rate:.2f} {'>=' if success else '<'} target {target:.2f} ({successes}/{n} "
                    "episodes)" if n else "no_episodes: the evaluation ran no episode"]
        diagnosis = [f"The whole task succeeded in {successes}/{n} episodes ({rate:.0%}; target {target:.0%})."]
    findings += [f"link {link.subtask}: {link.reached} reached, {link.succeeded} succeeded ({own_text(link)})"
                 for link in links]
    if weak is not None:
        lost = weak.reached - weak.succeeded
        findings.append(f"weakest_link {weak.subtask}: lost {lost} of {weak.reached} episodes that reached it")
        diagnosis.append(f"Link {weak.subtask} loses the most episodes: {lost} of the {weak.reached} that reached "
                         f"it ({link_rate(weak):.0%} in the chain, {own_text(weak)}).")
    if deaths:
        findings.append(f"deaths: {_counted(deaths, failed)}")
        diagnosis.append(f"{died_count} of {failed} failed episodes died: "
                         + ", ".join(f"{cause} {count}" for cause, count in deaths.most_common()) + ".")
    findings += [f"{reason}: {count} of {failed} failed episodes" for reason, count in ends.most_common()]
    diagnosis += [quote(kind, episodes) for kind in kinds[:MAX_KINDS]]

    gap = (weak is not None and weak.own_success_rate >= settings.success_threshold
           and link_rate(weak) < settings.success_threshold)
    rule = _rule(request, success=success, died=died_count, failed=failed, weak=weak, gap=gap, deaths=deaths,
                 settings_threshold=settings.success_threshold)
    findings += rule.findings
    return TaskFindings(success_rate=rate, success=success, target=rule.target, decisive=rule.decisive,
                        subtask=weak.subtask if weak is not None and rule.target != critic_pb2.TARGET_KEEP else "",
                        weakest=weak.subtask if weak is not None else "", death_causes=dict(deaths), kinds=kinds,
                        findings=findings, diagnosis=join_texts(diagnosis, MAX_TASK_TEXT),
                        suggestion=join_texts(rule.suggestion, MAX_TEXT))


@dataclasses.dataclass(frozen=True)
class _Rule:
    target: int
    decisive: bool
    findings: list[str]
    suggestion: list[str]


def _rule(request: critic_pb2.JudgeTaskRequest, *, success: bool, died: int, failed: int,
          weak: critic_pb2.TaskLink | None, gap: bool, deaths: Counter[str], settings_threshold: float) -> _Rule:
    """The target rule of the module docstring (first match wins)."""
    if success:
        return _Rule(critic_pb2.TARGET_KEEP, True, [], ["No change needed: the whole task reached its target."])
    if not request.links:
        return _Rule(critic_pb2.TARGET_SLOW, True, ["no_links: no chain ran"],
                     ["No chain ran: revise the plan so that every sub-task gets a controller (a coded skill or a "
                      "trained policy)."])
    if weak is not None and 0 <= weak.own_success_rate < settings_threshold:
        how = "continue or reconfigure its training" if weak.decision == "rl" else "revise its skill"
        return _Rule(critic_pb2.TARGET_FAST, False,
                     [f"own_tests_fail {weak.subtask}: own success {weak.own_success_rate:.0%} < threshold "
                      f"{settings_threshold:.0%}"],
                     [f"{weak.subtask} fails its own tests too ({weak.own_success_rate:.0%}): {how} first."])
    if failed and died * 2 > failed:
        causes = ", ".join(cause for cause, _ in deaths.most_common(3))
        return _Rule(critic_pb2.TARGET_SLOW, False, [f"mostly_deaths: {died} of {failed} failed episodes died"],
                     [f"Most failed episodes died ({causes}): re-plan with a survival sub-task or a macro action "
                      f"that keeps the player alive against {causes}, before or around the links that die."])
    if weak is not None:
        how = ("continue its training from its checkpoint or reconfigure it (reward terms, actions, episode "
               "length)" if weak.decision == "rl" else "revise its skill")
        if gap:
            rate = link_rate(weak)
            return _Rule(critic_pb2.TARGET_FAST, False,
                         [f"handover_gap {weak.subtask}: own success {weak.own_success_rate:.0%}, in the chain "
                          f"{rate:.0%}: its tests do not start where the chain hands over"],
                         [f"{weak.subtask} passes its own tests ({weak.own_success_rate:.0%}) but succeeds in "
                          f"{rate:.0%} of the chain's episodes that reach it: its tests do not start where the chain "
                          f"hands over. Test and train it from the states the earlier links leave, and {how}."])
        return _Rule(critic_pb2.TARGET_FAST, False, [],
                     [f"Make {weak.subtask} succeed where the chain hands it over: {how} for the failing episodes "
                      "quoted in the diagnosis."])
    return _Rule(critic_pb2.TARGET_SLOW, False,
                 ["links_hold: no link loses an episode that reached it, yet the task failed"],
                 ["Every link met its conditions wherever the chain reached it, yet the task failed: revise the plan "
                  "(a missing step, or a last link whose conditions are not the task's)."])
