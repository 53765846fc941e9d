"""The critic's LLM prompt (``prompts/critic.txt``): the request and the checks' findings as text, frames
attached as images where configured."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from rlgpt.prompts import conditions_text, render, shorten
from rlgpt.v1 import common_pb2, critic_pb2
from services.critic.checks import Findings
from services.critic.settings import CriticSettings

PROMPT_DIR = Path(__file__).parent / "prompts"
MAX_PROMPT_ROLLOUTS = 4
MAX_PROMPT_CODE = 12000
"""Characters of numbered code a verdict shows: whole skills as long as coded skills get (a critic that saw only
the first half of a search said so and guessed the rest), cut at whole lines beyond."""
MAX_PROMPT_TRAJECTORY = 700
CURVE_TAIL = 10


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


def rl_config_text(text: str) -> str:
    """An RL attempt's config (JSON) in a line, then each of its macro actions' code with line numbers."""
    if not text.strip():
        return "(none)"
    config = json.loads(text)  # the servicer checked it is a JSON object
    macros = config.pop("macro_actions", None) or []
    lines = [json.dumps(config)]
    for macro in macros if isinstance(macros, list) else []:
        if isinstance(macro, dict):
            lines += [f"Macro action {macro.get('name', '?')}:", code_text(str(macro.get("code", "")))]
    return "\n".join(lines)


def curve_text(curve: list[critic_pb2.CurvePoint]) -> str:
    if not curve:
        return "(none)"
    lines = [f"frames={p.env_frames} success={p.success_rate:.2f} mean_return={p.mean_return:.2f}"
             for p in curve[-CURVE_TAIL:]]
    return (f"({len(curve)} points, last {len(lines)} shown)\n" if len(curve) > CURVE_TAIL else "") + "\n".join(lines)


def prompt_text(request: critic_pb2.JudgeRequest, findings: Findings, settings: CriticSettings) -> str:
    """The critic prompt for one attempt, with the checks' findings."""
    return render(
        PROMPT_DIR, "critic", subtask=request.subtask, description=request.description or "(none)",
        decision=request.decision or "(not given)", success=conditions_text(list(request.success), "(none given)"),
        threshold=f"{settings.success_threshold:.2f}", success_rate=f"{findings.success_rate:.2f}",
        findings="\n".join(f"- {f}" for f in findings.findings) or "(none)",
        rollouts=rollouts_text(list(request.rollouts)), code=code_text(request.code),
        rl_config=rl_config_text(request.rl_config),
        curve=curve_text(list(request.curve)), protocol=request.test_protocol.strip() or "(not given)",
        start=", ".join(f"{i.count} {i.item}" for i in request.start_inventory if i.count) or "nothing",
        rules=request.rules.text.strip() or "(not given)",
        game=f"the game {request.game}" if request.game else "a game")


def messages(request: critic_pb2.JudgeRequest, findings: Findings, settings: CriticSettings) -> list[dict[str, Any]]:
    """One user message; with ``attach_frames``, the PNG frames follow the text as image parts."""
    text = prompt_text(request, findings, settings)
    frames = list(request.frames)[: settings.max_frames] if settings.attach_frames else []
    if not frames:
        return [{"role": "user", "content": text}]
    parts: list[dict[str, Any]] = [{"type": "text", "text": text + f"\n{len(frames)} frames of the episodes follow "
                                    "(screenshots, failed episodes first; each episode's in step order, from its "
                                    "start to its last frame)."}]
    for frame in frames:
        url = "data:image/png;base64," + base64.b64encode(frame).decode("ascii")
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return [{"role": "user", "content": parts}]
