"""Sandbox worker process: runs skill generators for the env server, one request at a time.

Started by :class:`services.env_server.skills.executor.SandboxProcess` as
``python -m services.env_server.skills.worker MEMORY_MB TICK_BUDGET``. It speaks length-prefixed
JSON over stdin/stdout (never pickle: the server must not trust what comes back), caps its own
address space, and dumps its Python stack to stderr on SIGUSR1 so the server can name the line a
runaway skill was stuck on before killing it.
"""

from __future__ import annotations

import faulthandler
import json
import os
import resource
import signal
import struct
import sys
import traceback
from typing import Any, BinaryIO

from services.env_server.skills.api import make_agent
from services.env_server.skills.sandbox import (
    SKILL_FILENAME,
    Budget,
    SkillCheckError,
    StepBudgetExceeded,
    check_source,
    compile_skill,
    skill_globals,
    source_line,
)

_HEADER = struct.Struct("!I")
MAX_MESSAGE = 64 * 1024 * 1024


def read_message(stream: BinaryIO) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes exceeds {MAX_MESSAGE}")
    payload = stream.read(size)
    return json.loads(payload)


def write_message(stream: BinaryIO, message: Any) -> None:
    payload = json.dumps(message, separators=(",", ":")).encode()
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def error_dict(kind: str, message: str, line: int, source: str) -> dict[str, Any]:
    return {"type": kind, "message": message[:2000], "line": line, "code_line": source_line(source, line)}


def _skill_line(tb: Any) -> int:
    """Line of the innermost traceback frame that belongs to the skill's code."""
    line = 0
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == SKILL_FILENAME:
            line = lineno
    return line


class _Slot:
    def __init__(self, generator: Any, agent: Any, source: str, budget: Budget):
        self.generator = generator
        self.agent = agent
        self.source = source
        self.budget = budget
        self.steps = 0


class Worker:
    """Holds compiled skills and live generators (slots)."""

    def __init__(self, tick_budget: int):
        self._tick_budget = tick_budget
        self._skills: dict[str, tuple[Any, str, str]] = {}  # key -> (code, entry, source)
        self._slots: dict[int, _Slot] = {}

    def load(self, key: str, source: str, max_bytes: int) -> dict[str, Any]:
        try:
            checked = check_source(source, max_bytes)
            self._skills[key] = (compile_skill(checked), checked.entry, source)
        except SkillCheckError as exc:
            return {"error": error_dict(exc.kind, exc.message, exc.line, source)}
        return {"ok": True}

    def start(self, slot: int, key: str, backend: str, actions: list[str]) -> dict[str, Any]:
        if key not in self._skills:
            return {"error": error_dict("NotLoaded", f"skill {key} is not loaded in this worker", 0, "")}
        code, entry, source = self._skills[key]
        budget = Budget(self._tick_budget)
        glb = skill_globals(budget)
        agent = make_agent(backend, actions)
        try:
            exec(code, glb)  # module level: the checked function definitions and constants
            generator = glb[entry](agent)
        except BaseException as exc:
            return {"error": self._describe(exc, source)}
        if not hasattr(generator, "send"):
            return {"error": error_dict("NoYield", f"`{entry}` did not return a generator", 0, source)}
        self._slots[slot] = _Slot(generator, agent, source, budget)
        return {"ok": True}

    def advance(self, items: list[list[Any]]) -> dict[str, Any]:
        results = []
        for slot_id, perception in items:
            results.append([slot_id, self._advance_one(slot_id, perception)])
        return {"results": results}

    def _advance_one(self, slot_id: int, perception: dict[str, Any]) -> dict[str, Any]:
        slot = self._slots.get(slot_id)
        if slot is None:
            return {"error": error_dict("NotStarted", f"slot {slot_id} has no running skill", 0, "")}
        slot.agent._update(perception, slot.steps)
        slot.budget.used = 0
        try:
            action = next(slot.generator)
        except StopIteration:
            self._slots.pop(slot_id, None)
            return {"done": True, "yielded": slot.steps}
        except MemoryError:
            self._slots.pop(slot_id, None)
            return {"error": error_dict("MemoryLimit", "the skill ran out of memory", 0, slot.source)}
        except BaseException as exc:
            self._slots.pop(slot_id, None)
            return {"error": self._describe(exc, slot.source)}
        line = slot.generator.gi_frame.f_lineno if slot.generator.gi_frame else 0
        if not isinstance(action, str) or action not in slot.agent.actions:
            self._slots.pop(slot_id, None)
            shown = repr(action)[:80]
            return {"error": error_dict("InvalidAction", f"yielded {shown}, which is not an action name; "
                                        f"valid: {', '.join(slot.agent.actions)}", line, slot.source)}
        slot.steps += 1
        return {"action": action, "line": line}

    def stop(self, slots: list[int]) -> dict[str, Any]:
        for slot_id in slots:
            slot = self._slots.pop(slot_id, None)
            if slot is not None:
                try:
                    slot.generator.close()
                except BaseException:
                    pass
        return {"ok": True}

    @staticmethod
    def _describe(exc: BaseException, source: str) -> dict[str, Any]:
        line = _skill_line(exc.__traceback__)
        if isinstance(exc, StepBudgetExceeded):
            return error_dict("StepBudgetExceeded", str(exc), line, source)
        if isinstance(exc, RecursionError):
            return error_dict("RecursionError", "recursion too deep", line, source)
        return error_dict(type(exc).__name__, str(exc), line, source)


def main(argv: list[str]) -> int:
    memory_mb, tick_budget = int(argv[1]), int(argv[2])
    protocol_in = os.fdopen(os.dup(0), "rb")
    protocol_out = os.fdopen(os.dup(1), "wb")
    # Stray prints must never corrupt the protocol stream.
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=False)
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))  # no room to open much even if something slipped through
    sys.setrecursionlimit(400)
    worker = Worker(tick_budget)
    handlers = {
        "load": lambda m: worker.load(m["key"], m["source"], m["max_bytes"]),
        "start": lambda m: worker.start(m["slot"], m["key"], m["backend"], m["actions"]),
        "advance": lambda m: worker.advance(m["items"]),
        "stop": lambda m: worker.stop(m["slots"]),
        "ping": lambda m: {"ok": True, "pid": os.getpid()},
    }
    while True:
        message = read_message(protocol_in)
        if message is None:
            return 0
        try:
            reply = handlers[message["op"]](message)
        except MemoryError:
            reply = {"error": error_dict("MemoryLimit", "the sandbox worker ran out of memory", 0, "")}
        write_message(protocol_out, reply)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
