"""RegisterSkill's test run: a candidate skill plays a few test worlds before it is accepted.

A skill whose first step works can still crash in a branch it only reaches later (after walking 50
steps, once it holds wood, ...). So the candidate runs, in a sandbox worker of its own, for up to
``skill_probe_frames`` frames on each of ``skill_probe_worlds`` test worlds (seeds 0, 1, ...) of its
backend, driving a real env, and the first code error is refused at once with its type, line and
source line. Game outcomes are not judged: a skill that dies, finishes (returns) after yielding, gives up
on purpose (its own ``raise`` statement, e.g. ``raise ValueError("needs a pickaxe")`` when the test world's
empty inventory lacks what it needs) or does nothing useful passes; one that returns without yielding on the
first world (NoYield) does not.

Cost, bounded: at most worlds x frames env frames (900 by default, well under a second for
Crafter), and at most ``skill_probe_seconds`` of wall clock plus one ``skill_call_seconds`` (the
limit of the resume in flight when the budget runs out) plus a worker start. When the budget is
spent, the skill is judged on what ran. One env per backend is kept and reused between probes; the
caller serialises probes.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import logging
import time
from typing import Any

from rlgpt.errors import DeadlineExceeded, InvalidArgument, ResourceExhausted
from services.env_server.backends.base import Backend
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.executor import SkillExecutor, SkillRecord, error_words, with_code_line

log = logging.getLogger(__name__)
_SLOT = 0
FRESH_WORLD = "fresh world {world} (the game's start, nothing an earlier sub-task makes)"
"""How a refusal names registration's own test world (a critic read "test world 0" as one of the skill's test
episodes and blamed the earlier links)."""


@dataclasses.dataclass(frozen=True)
class ProbeReport:
    """What the test run covered."""

    worlds: int
    frames: int
    seconds: float
    budget_spent: bool


def _refuse(name: str, error: dict[str, Any], code: str, world: int, steps: int) -> None:
    message = (f"skill {name!r} failed in registration's test run, on {FRESH_WORLD.format(world=world)} after "
               f"{steps} steps: {error_words(with_code_line(dict(error), code))}")
    if error.get("type") == "Timeout":
        raise DeadlineExceeded(message)
    if error.get("type") == "SandboxBusy":
        raise ResourceExhausted(f"skill {name!r} cannot be tested now: {error.get('message', '')}")
    raise InvalidArgument(message)


def gave_up(error: dict[str, Any], code: str) -> bool:
    """Whether the skill's error is its own ``raise`` statement (it judged the world and gave up, a game outcome)
    rather than a code error (NameError, TypeError, an API misuse, ...), which the interpreter raises elsewhere.
    A raise statement anywhere on the error's line counts: ``if not ok: raise ValueError(...)`` on one line is as
    much the skill's own as a ``raise`` line of its own (run 6's diamond skill was refused for it)."""
    if error.get("type") in ("Timeout", "SandboxBusy", "NoYield"):
        return False
    line = int(error.get("line") or 0)
    return line > 0 and line in _raise_lines(code)


@functools.lru_cache(maxsize=64)
def _raise_lines(code: str) -> frozenset[int]:
    """The lines a raise statement of ``code`` starts on (none when it does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()
    return frozenset(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Raise))


def probe_skill(settings: EnvServerSettings, name: str, code: str, backend: Backend,
                envs: dict[str, Any]) -> ProbeReport:
    """Runs the candidate on the test worlds; raises InvalidArgument (code error, NoYield), DeadlineExceeded
    (a resume ran past its time limit) or ResourceExhausted (no room for a sandbox worker)."""
    spec = backend.spec
    record = SkillRecord(name=name, description="", code=code, backend=spec.name, version=0)
    env = envs.get(spec.name)
    if env is None:
        env = envs[spec.name] = backend.make_env()
    actions = list(spec.actions)
    index = {action: i for i, action in enumerate(actions)}
    began = time.monotonic()
    deadline = began + settings.skill_probe_seconds
    frames = worlds = 0
    executor = SkillExecutor(settings)  # a fresh worker: no version-0 copy of an earlier candidate survives
    try:
        for world in range(settings.skill_probe_worlds):
            if time.monotonic() >= deadline:
                break
            env.reset(world)
            error = executor.start(_SLOT, record, spec.name, actions)
            if error:
                _refuse(name, error, code, world, 0)
            worlds += 1
            for steps in range(settings.skill_probe_frames):
                if time.monotonic() >= deadline:
                    break
                result = executor.advance({_SLOT: env.perception()})[_SLOT]
                if "error" in result:
                    if gave_up(result["error"], code):
                        break  # the skill's own raise: a game outcome, like dying
                    _refuse(name, result["error"], code, world, steps)
                if "done" in result:
                    if world == 0 and steps == 0:
                        raise InvalidArgument(
                            f"skill {name!r} returned without yielding any action in registration's test run, on "
                            f"{FRESH_WORLD.format(world=world)} (NoYield): a skill must `yield \"<action>\"` at least "
                            "once; one that cannot act in such a world should say why with `raise ValueError(\"...\")` "
                            "(its own raise is accepted as giving up, a plain return is not)")
                    break
                frames += 1
                if env.step(index[result["action"]]).dead:
                    break  # dying is a game outcome, not a code error
            executor.stop([_SLOT])
    finally:
        executor.close()
    report = ProbeReport(worlds=worlds, frames=frames, seconds=time.monotonic() - began,
                         budget_spent=time.monotonic() >= deadline)
    log.info("skill %s passed its test run: %d frames on %d worlds in %.2f s%s", name, report.frames, report.worlds,
             report.seconds, " (time budget spent)" if report.budget_spent else "")
    return report
