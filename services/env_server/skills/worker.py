"""Sandbox worker process: runs skill generators for the env server, one request at a time.

Started by :class:`services.env_server.skills.executor.SandboxProcess` as
``python -m services.env_server.skills.worker CONFIG_JSON``. It speaks length-prefixed JSON over
stdin/stdout (never pickle: the server must not trust what comes back), isolates itself from the
host where it can (:mod:`.isolation`), caps its own address space, writes the id of the slot it is
running into a shared 8-byte marker (so that when it is killed for a timeout, or crashes, the
server knows which skill of a batch did it), and dumps its Python stack to stderr on SIGUSR1 and
on fatal signals so the server can name the skill line.
"""

from __future__ import annotations

import faulthandler
import inspect
import json
import mmap
import os
import reprlib
import resource
import signal
import struct
import sys
import traceback
from typing import Any, BinaryIO

from services.env_server.skills import minedojo_api  # noqa: F401 - imported before the uid drop (make_agent loads it lazily)
from services.env_server.skills.api import make_agent
from services.env_server.skills.compiler import compile_skill
from services.env_server.skills.isolation import isolate
from services.env_server.skills.recipes import Recipes
from services.env_server.skills.sandbox import (
    SKILL_FILENAME,
    Budget,
    SkillCheckError,
    StepBudgetExceeded,
    check_source,
    skill_globals,
    source_line,
)

_HEADER = struct.Struct("!I")
MAX_MESSAGE = 64 * 1024 * 1024
MARKER = struct.Struct("q")
"""Layout of the shared slot marker: the running slot id, or -1 between slots."""
IDLE = -1
RECURSION_LIMIT = 400
_COMPILE_RECURSION_LIMIT = 3000  # compiling is our code, not the skill's: it may recurse per nesting level

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict = 3, 60, 60, 6, 6


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


def safe_repr(value: Any, limit: int = 80) -> str:
    """A short repr that survives values nested thousands deep or with failing reprs."""
    try:
        text = _REPR.repr(value)
    except BaseException:  # any failure of a skill value's repr must not kill the worker
        text = f"<{type(value).__name__}>"
    return text[:limit]


def yielded_text(value: Any, agent: Any) -> str:
    """What a skill yielded instead of an action name, as its author would recognise it: no module path, no
    address (a default repr reads ``<services.env_server.skills.api.CrafterAgent object at 0x7f...>``)."""
    if value is agent:
        return "the agent object"
    if inspect.isgenerator(value):
        name = value.__name__
        return f"a generator from {name}(...) (to run it, write `yield from {name}(...)`)"
    if inspect.ismethod(value) and value.__self__ is agent:
        return f"the method agent.{value.__name__} itself (call it: agent.{value.__name__}(...))"
    if inspect.isroutine(value):
        return f"the function {value.__name__} itself (call it: {value.__name__}(...))"
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return safe_repr(value)
    if isinstance(value, (list, tuple, dict, set)):
        text = safe_repr(value)
        return text if " at 0x" not in text else f"a {type(value).__name__} of {len(value)} items"
    return f"a {type(value).__name__} object"


def exception_text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # e.g. RecursionError from a deeply nested argument
        text = ", ".join(safe_repr(arg, 200) for arg in getattr(exc, "args", ()))
    return text[:2000]


def error_dict(kind: str, message: str, line: int, source: str) -> dict[str, Any]:
    return {"type": kind, "message": message[:2000], "line": line, "code_line": source_line(source, line)}


def _skill_line(tb: Any) -> int:
    """Line of the innermost traceback frame that belongs to the skill's code."""
    line = 0
    for frame, lineno in traceback.walk_tb(tb):
        if frame.f_code.co_filename == SKILL_FILENAME:
            line = lineno
    return line


class SlotMarker:
    """The shared 8 bytes the server reads to learn which slot was running when it lost the worker."""

    def __init__(self, fd: int):
        self._map: mmap.mmap | None = None
        if fd >= 0:
            self._map = mmap.mmap(fd, MARKER.size)
            os.close(fd)

    def set(self, slot: int) -> None:
        if self._map is not None:
            MARKER.pack_into(self._map, 0, slot)


class _Slot:
    def __init__(self, generator: Any, agent: Any, source: str, budget: Budget):
        self.generator = generator
        self.agent = agent
        self.source = source
        self.budget = budget
        self.steps = 0


class Worker:
    """Holds compiled skills and live generators (slots)."""

    def __init__(self, tick_budget: int, marker: SlotMarker | None = None):
        self._tick_budget = tick_budget
        self._marker = marker or SlotMarker(-1)
        self._skills: dict[str, tuple[Any, str, str]] = {}  # key -> (code, entry, source)
        self._slots: dict[int, _Slot] = {}
        self._recipes: dict[str, Recipes] = {}  # backend -> the world's rules, as the agent's helpers read them

    def load(self, key: str, source: str, max_bytes: int) -> dict[str, Any]:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, _COMPILE_RECURSION_LIMIT))
        try:
            checked = check_source(source, max_bytes)
            self._skills[key] = (compile_skill(checked), checked.entry, source)
        except SkillCheckError as exc:
            return {"error": error_dict(exc.kind, exc.message, exc.line, source)}
        finally:
            sys.setrecursionlimit(limit)
        return {"ok": True}

    def start(self, slot: int, key: str, backend: str, actions: list[str],
              rules: dict[str, Any] | None = None, remembered: dict[str, Any] | None = None) -> dict[str, Any]:
        if rules is not None:  # sent once per backend and worker (see SkillExecutor.start)
            self._recipes[backend] = Recipes(rules)
        if key not in self._skills:
            return {"error": error_dict("NotLoaded", f"skill {key} is not loaded in this worker", 0, "")}
        code, entry, source = self._skills[key]
        budget = Budget(self._tick_budget)
        glb = skill_globals(budget)
        agent = make_agent(backend, actions, self._recipes.get(backend))
        if remembered is not None:  # the map the episode showed before this skill (BackendEnv.remembered)
            agent._remember(remembered)
        self._marker.set(slot)
        try:
            exec(code, glb)  # module level: the checked function definitions and constants
            generator = glb[entry](agent)
        except BaseException as exc:
            return {"error": self._describe(exc, source)}
        finally:
            self._marker.set(IDLE)
        if not hasattr(generator, "send"):
            return {"error": error_dict("NoYield", f"`{entry}` did not return a generator", 0, source)}
        self._slots[slot] = _Slot(generator, agent, source, budget)
        return {"ok": True}

    def advance(self, items: list[list[Any]]) -> dict[str, Any]:
        results = []
        try:
            for slot_id, perception in items:
                self._marker.set(slot_id)
                results.append([slot_id, self._advance_one(slot_id, perception)])
        finally:
            self._marker.set(IDLE)
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
            return {"error": error_dict("InvalidAction", f"yielded {yielded_text(action, slot.agent)}, which is not "
                                        f"an action name; valid: {', '.join(slot.agent.actions)}", line, slot.source)}
        slot.steps += 1
        return {"action": str(action), "line": line}

    def stop(self, slots: list[int]) -> dict[str, Any]:
        for slot_id in slots:
            slot = self._slots.pop(slot_id, None)
            if slot is not None:
                self._marker.set(slot_id)  # closing runs the skill's finally blocks
                try:
                    slot.generator.close()
                except BaseException:  # a skill failing while being stopped is not an error
                    pass
                finally:
                    self._marker.set(IDLE)
        return {"ok": True}

    @staticmethod
    def _describe(exc: BaseException, source: str) -> dict[str, Any]:
        line = _skill_line(exc.__traceback__)
        if isinstance(exc, StepBudgetExceeded):
            return error_dict("StepBudgetExceeded", str(exc), line, source)
        if isinstance(exc, RecursionError):
            return error_dict("RecursionError", f"recursion too deep: more than about {RECURSION_LIMIT} nested calls, "
                              "or a chain of that many map/filter/zip/generators wrapped around each other; use a "
                              "loop, or build a list at each step instead of wrapping the previous iterator", line,
                              source)
        return error_dict(type(exc).__name__, exception_text(exc), line, source)


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    protocol_in = os.fdopen(os.dup(0), "rb")
    protocol_out = os.fdopen(os.dup(1), "wb")
    # Stray prints must never corrupt the protocol stream.
    os.dup2(2, 1)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - lives as long as the process
    faulthandler.enable(file=sys.stderr)  # a fatal signal (C stack overflow) still names the skill line
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=False)
    marker = SlotMarker(int(config.get("slot_fd", -1)))
    isolation = isolate(int(config["uid"])) if config.get("isolate") else {}
    limit = int(config["memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))  # no room to open much even if something slipped through
    sys.setrecursionlimit(RECURSION_LIMIT)
    worker = Worker(int(config["tick_budget"]), marker)
    handlers = {
        "load": lambda m: worker.load(m["key"], m["source"], m["max_bytes"]),
        "start": lambda m: worker.start(m["slot"], m["key"], m["backend"], m["actions"], m.get("rules"),
                                           m.get("remembered")),
        "advance": lambda m: worker.advance(m["items"]),
        "stop": lambda m: worker.stop(m["slots"]),
        "ping": lambda m: {"ok": True, "pid": os.getpid(), "isolation": isolation},
    }
    while True:
        message = read_message(protocol_in)
        if message is None:
            return 0
        try:
            reply = handlers[message["op"]](message)
        except MemoryError:
            reply = {"error": error_dict("MemoryLimit", "the sandbox worker ran out of memory", 0, "")}
        except BaseException as exc:  # one bad request must not take the worker down
            traceback.print_exc()  # for the server's log only: never quoted to clients
            reply = {"error": error_dict("SandboxError", f"the sandbox worker failed: {type(exc).__name__}", 0, "")}
        write_message(protocol_out, reply)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
