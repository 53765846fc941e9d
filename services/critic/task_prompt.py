"""The critic's LLM prompt for a whole task's evaluation (``prompts/critic_task.txt``): the links as a table, the
death causes, the checks' findings and the end of one trajectory per kind of failure; every game fact (its name,
its rules) is the request's."""

from __future__ import annotations

from typing import Any

from rlgpt.prompts import conditions_text, render
from rlgpt.v1 import common_pb2, critic_pb2
from services.critic.prompt import PROMPT_DIR
from services.critic.task_checks import (
    MAX_KINDS,
    FailureKind,
    TaskFindings,
    episodes_text,
    game_text,
    link_rate,
    own_text,
    tail_lines,
)

PROMPT_TAIL_LINES = 12
"""Last trajectory lines shown per kind of failure."""
PROMPT_LINE_CHARS = 160
"""Most characters of one shown trajectory line."""


def links_text(links: list[critic_pb2.TaskLink]) -> str:
    """One line per link, in plan order: its controller, its hand-over conditions and how the episodes went."""
    if not links:
        return "(none: no chain ran)"
    return "\n".join(
        f"{i}. {link.subtask} ({link.decision or 'controller not given'}), hands over when "
        f"{conditions_text(list(link.success), '(no conditions given)')}: reached {link.reached}, succeeded "
        f"{link.succeeded} ({link_rate(link):.0%} in the chain), {own_text(link)}, "
        f"{'mean frames unknown' if link.mean_frames == -1 else f'mean {link.mean_frames:.0f} frames'}"
        for i, link in enumerate(links, 1))


def failures_text(kinds: list[FailureKind], episodes: list[common_pb2.EpisodeSummary]) -> str:
    """The most frequent kinds of failure, each with the end of its first episode's trajectory."""
    if not kinds:
        return "(none: no episode failed)"
    blocks = []
    for kind in kinds[:MAX_KINDS]:
        first = episodes[kind.episodes[0]]
        inventory = ", ".join(f"{x.item} {x.count}" for x in first.final_inventory) or "empty"
        head = (f"- in {kind.link}, {kind.cause}: {episodes_text(len(kind.episodes))} (e.g. episode "
                f"{kind.episodes[0]}: {first.steps} steps, achievements [{', '.join(first.achievements)}], "
                f"inventory [{inventory}])")
        tail = tail_lines(first.text, PROMPT_TAIL_LINES, PROMPT_LINE_CHARS)
        blocks.append("\n".join([head, *(f"    {line}" for line in tail or ["(no trajectory kept)"])]))
    left = len(kinds) - len(blocks)
    return "\n".join(blocks) + (f"\n({left} more kinds not shown)" if left > 0 else "")


def prompt_text(request: critic_pb2.JudgeTaskRequest, findings: TaskFindings) -> str:
    """The critic prompt for one whole-task evaluation, with the checks' findings."""
    deaths = ", ".join(f"{cause} {count}" for cause, count in
                       sorted(findings.death_causes.items(), key=lambda x: -x[1])) or "none"
    if request.HasField("score"):  # the whole game: no episode succeeds, its score is the measure
        success = "none: the whole game, measured by its score (0..100) over its achievements' success rates"
        target = f"none; instead a score of {100 * request.target_success:.1f}"
        measured = f"none; instead: {game_text(request)}"
    else:
        success = conditions_text(list(request.success), "(none given)")
        target = f"{request.target_success:.2f}"
        measured = (f"{findings.success_rate:.2f} ({sum(e.success for e in request.episodes)}/"
                    f"{len(request.episodes)} episodes)")
    return render(
        PROMPT_DIR, "critic_task", game=f"the game {request.game}" if request.game else "a game",
        iteration=str(request.iteration), task=request.task, description=request.description or "(none)",
        success=success, target=target, success_rate=measured,
        links=links_text(list(request.links)), deaths=deaths,
        findings="\n".join(f"- {f}" for f in findings.findings) or "(none)",
        failures=failures_text(findings.kinds, list(request.episodes)),
        rules=request.rules.text.strip() or "(not given)")


def messages(request: critic_pb2.JudgeTaskRequest, findings: TaskFindings) -> list[dict[str, Any]]:
    """One user message: the prompt (a whole-task request carries no frames)."""
    return [{"role": "user", "content": prompt_text(request, findings)}]
