"""Where the env server's time goes: py-spy on the server process (categories of its sampled stacks), or
cProfile on an in-process server's Step handler when py-spy is not available."""

from __future__ import annotations

import cProfile
import logging
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import psutil

from benchmarks.env.grpc_paths import close_session, create_session, step_requests
from benchmarks.env.measure import Plan
from rlgpt.app.launcher import ServiceProcess
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import env_pb2, env_pb2_grpc
from services.env_server.settings import EnvServerSettings

log = logging.getLogger("benchmarks.env")

# Categories by priority: a sample belongs to the first category any of its frames matches, so
# e.g. World.__getitem__ called by the renderer counts as rendering, not as world update.
PROFILE_CATEGORIES: tuple[tuple[str, Callable[[str, str], bool]], ...] = (
    ("Crafter render (LocalView/ItemView, textures)",
     lambda func, file: (file.endswith("crafter/engine.py") and func.startswith(("LocalView", "ItemView", "_draw",
                                                                                   "Textures")))
     or (file.endswith("crafter/env.py") and func in ("Env.render", "Env._obs"))),
    ("Crafter semantic map (info['semantic'], unused)",
     lambda func, file: file.endswith("crafter/engine.py") and func.startswith("SemanticView")),
    ("Crafter reset (world generation)",
     lambda func, file: file.endswith("crafter/worldgen.py") or (file.endswith("crafter/env.py")
                                                                 and func == "Env.reset")),
    ("Crafter world update (objects, chunk balancing)",
     lambda func, file: ("crafter/" in file and not file.endswith("backends/crafter.py"))
     or func == "_DeterministicCrafter._balance_chunk"),
    ("Backend wrapper (vector, inventory, achievements)",
     lambda func, file: file.endswith("backends/crafter.py")),
    ("Prometheus metrics",
     lambda func, file: "prometheus_client" in file),
    ("Response building (np.stack, to_tensor, StepInfo messages)",
     lambda func, file: (file.endswith("env_server/servicer.py") and func.startswith(("EnvServicer._step_response",
                                                                                        "EnvServicer._observations")))
     or file.endswith("rlgpt/tensors.py") or (file.endswith("env_server/session.py")
                                              and func == "Session.observations")),
    ("Protobuf (de)serialization",
     lambda func, file: (file.endswith("grpc/_common.py") and func in ("serialize", "deserialize",
                                                                       "_transform"))
     or "upb" in func or "upb" in file or "protobuf" in file),
    ("Session bookkeeping (rewards, episodes, validation)",
     lambda func, file: file.endswith(("env_server/session.py", "env_server/tasks.py", "env_server/servicer.py",
                                       "rlgpt/errors.py"))),
    ("gRPC server machinery (Python + C-core)",
     lambda func, file: "grpc" in file or "grpc" in func),
    ("Thread-pool hand-off (concurrent.futures workers waking)",
     lambda func, file: file.endswith(("concurrent/futures/thread.py", "threading.py"))),
)
FRAME_RE = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def classify_stack(frames: list[str]) -> str:
    best = len(PROFILE_CATEGORIES)
    for frame in frames:
        match = FRAME_RE.match(frame)
        func, file = (match.group("func"), match.group("file")) if match else (frame, "")
        for index, (_name, rule) in enumerate(PROFILE_CATEGORIES[:best]):
            if rule(func, file):
                best = index
                break
    return PROFILE_CATEGORIES[best][0] if best < len(PROFILE_CATEGORIES) else "other (interpreter, threading)"


def summarise_collapsed(text: str) -> tuple[dict[str, float], int]:
    """Category shares of py-spy's collapsed stacks ("f1 (file:line);f2 (...) count" per line)."""
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        stack, _, number = line.rpartition(" ")
        if not stack or not number.isdigit():
            continue
        counts[classify_stack(stack.split(";"))] += int(number)
    total = sum(counts.values())
    return ({name: count / total for name, count in counts.most_common()} if total else {}), total


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread name of a process (gRPC C-core threads are invisible to Python profilers)."""
    by_name: Counter[str] = Counter()
    for thread in psutil.Process(pid).threads():
        try:
            name = Path(f"/proc/{pid}/task/{thread.id}/comm").read_text().strip()
        except OSError:
            name = "?"
        # Pool threads are numbered (grpc_0, grpc_1...); group them.
        by_name[re.sub(r"[_-]?\d+$", "", name) or name] += thread.user_time + thread.system_time
    return dict(by_name)


def find_py_spy() -> str | None:
    candidate = Path(sys.executable).parent / "py-spy"
    return str(candidate) if candidate.exists() else shutil.which("py-spy")


class BackgroundStepper:
    """Steps a session with unary calls in a thread until stopped (load for the profiler)."""

    def __init__(self, stub: env_pb2_grpc.EnvServiceStub, session_id: str, plan: Plan):
        self._requests = step_requests(session_id, plan)
        self._stub = stub
        self._stop = threading.Event()
        self.steps = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="bench-stepper")

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._stub.Step(self._requests[self.steps % len(self._requests)], timeout=120)
                self.steps += 1
        except grpc.RpcError as exc:
            self.error = exc

    def __enter__(self) -> BackgroundStepper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=120)


def profile_with_py_spy(py_spy: str, stub: env_pb2_grpc.EnvServiceStub, server: ServiceProcess, plan: Plan,
                        seed: int, seconds: int, keep_raw: Path | None = None) -> dict[str, Any]:
    session_id = create_session(stub, plan.envs, seed)
    result: dict[str, Any] = {"tool": "py-spy", "envs": plan.envs, "seconds": seconds}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "profile.txt"
            with BackgroundStepper(stub, session_id, plan) as stepper:
                time.sleep(1.0)  # let the stepper reach steady state first
                threads_before, steps_before, t0 = thread_cpu(server.process.pid), stepper.steps, time.perf_counter()
                # Python stacks only: --native cannot run --nonblocking (it would pause the server at every
                # sample) and counts threads waiting on locks or epoll as busy. C time (gRPC core, upb) is
                # charged to the Python frame that called it.
                for flags in (["--nonblocking"], []):
                    cmd = [py_spy, "record", "--pid", str(server.process.pid), "--duration", str(seconds),
                           "--rate", "250", "--format", "raw", "--output", str(out), *flags]
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60, check=False)
                    if proc.returncode == 0 and out.exists() and out.stat().st_size:
                        result["py_spy_flags"] = flags
                        break
                    log.warning("py-spy %s failed (rc=%d): %s", " ".join(flags) or "(python only)",
                                proc.returncode, proc.stderr.strip()[-400:])
                wall = time.perf_counter() - t0
                threads_after, steps_after = thread_cpu(server.process.pid), stepper.steps
            if stepper.error is not None:
                raise RuntimeError(f"background stepping failed: {stepper.error}")
            if not (out.exists() and out.stat().st_size):
                raise RuntimeError("py-spy produced no profile")
            collapsed = out.read_text()
            shares, samples = summarise_collapsed(collapsed)
            if keep_raw is not None:
                keep_raw.write_text(collapsed)
    finally:
        close_session(stub, session_id)
    result.update(shares=shares, samples=samples,
                  frames_per_s_while_profiling=plan.envs * (steps_after - steps_before) / wall,
                  thread_cpu_util={name: (threads_after.get(name, 0.0) - before) / wall
                                   for name, before in threads_before.items()
                                   if threads_after.get(name, 0.0) - before > 0.005 * wall})
    return result


def profile_with_cprofile(plan: Plan, seed: int, seconds: int) -> dict[str, Any]:
    """Fallback without py-spy: an in-process server whose Step handler runs under cProfile.

    Only the handler is visible (not gRPC's own threads or serialization), so the shares are of
    handler time, and ``handler_share_of_wall`` says how much of the wall time that is.
    """
    from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
    from services.env_server.servicer import SERVICE_NAME, EnvServicer

    profiler = cProfile.Profile()

    class ProfiledServicer(EnvServicer):
        def Step(self, request: env_pb2.StepRequest, context: grpc.ServicerContext) -> env_pb2.StepResponse:
            profiler.enable()
            try:
                return super().Step(request, context)
            finally:
                profiler.disable()

    servicer = ProfiledServicer(EnvServerSettings(max_envs_per_session=max(256, plan.envs)))
    server, port = create_server("127.0.0.1:0", [
        ServiceBinding(SERVICE_NAME, env_pb2_grpc.add_EnvServiceServicer_to_server, servicer)], metrics_label="env")
    channel = create_channel(f"127.0.0.1:{port}", default_timeout=120, wait_ready_seconds=30)
    try:
        stub = env_pb2_grpc.EnvServiceStub(channel)
        session_id = create_session(stub, plan.envs, seed)
        with BackgroundStepper(stub, session_id, plan) as stepper:
            time.sleep(seconds)
        wall = seconds
        steps = stepper.steps
        close_session(stub, session_id)
    finally:
        channel.close()
        stop_server(server, grace_seconds=1)
    stats = pstats.Stats(profiler)
    cumulative: Counter[str] = Counter()
    for (file, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        cumulative[f"{Path(file).parent.name}/{Path(file).name}:{func}"] += ct

    def cum(*keys: str) -> float:
        return sum(cumulative.get(k, 0.0) for k in keys)

    handler = cum("env_server/servicer.py:Step")
    render = cum("crafter/env.py:render")
    crafter_step = cum("crafter/env.py:step")
    worldgen = cum("crafter/worldgen.py:generate_world")
    wrapper_step = cum("backends/crafter.py:step")
    session_step = cum("env_server/session.py:step")
    response = cum("env_server/servicer.py:_step_response")
    parts = {
        "Crafter render (LocalView/ItemView, textures)": render,
        "Crafter world update (objects, chunk balancing, semantic map)": max(0.0, crafter_step - render),
        "Crafter reset (world generation)": worldgen,
        "Backend wrapper (vector)": max(0.0, wrapper_step - crafter_step),
        "Session bookkeeping (rewards, episodes)": max(0.0, session_step - wrapper_step - worldgen),
        "Response building (np.stack, to_tensor, StepInfo messages)": response,
    }
    parts["rest of the handler (validation, metrics)"] = max(0.0, handler - sum(parts.values()))
    total = sum(parts.values()) or 1.0
    return {"tool": "cProfile", "envs": plan.envs, "seconds": seconds, "shares": {k: v / total for k, v in
                                                                                 parts.items()},
            "handler_share_of_wall": handler / wall, "frames_per_s_while_profiling": plan.envs * steps / wall}



def run_profile(profiler: str, stub: env_pb2_grpc.EnvServiceStub, server: ServiceProcess, plan: Plan, seed: int,
                seconds: int, raw_dir: Path) -> dict[str, Any]:
    """py-spy on the server process when available, else cProfile on an in-process server."""
    py_spy = find_py_spy() if profiler == "auto" else None
    if py_spy:
        log.info("profiling the server (%d envs, unary Step) with %s for %d s", plan.envs, py_spy, seconds)
        try:
            return profile_with_py_spy(py_spy, stub, server, plan, seed, seconds, raw_dir / "py-spy-profile.txt")
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            log.warning("py-spy profile failed (%s); falling back to cProfile", exc)
    elif profiler == "auto":
        log.warning("py-spy not found (pip install py-spy); falling back to cProfile")
    log.info("profiling an in-process server (%d envs, unary Step) with cProfile for %d s", plan.envs, seconds)
    return profile_with_cprofile(plan, seed, seconds)

