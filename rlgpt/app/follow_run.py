"""`rlgpt run` following a run live: its events as a progress table until the run ends; Ctrl-C asks the planner to
stop the run cleanly."""

from __future__ import annotations

import signal
import threading

from rich.console import Console
from rich.live import Live
from rich.table import Table

from rlgpt import deadlines
from rlgpt.v1 import planner_pb2, planner_pb2_grpc


def _progress_table(status: dict[str, str]) -> Table:
    table = Table(title="RL-GPT", show_header=False, expand=False)
    for key in ("run", "iteration", "sub-task", "last", "training", "verdict", "whole task", "tokens", "frames"):
        table.add_row(key, status.get(key, ""))
    return table


def follow(stub: planner_pb2_grpc.PlannerServiceStub, run_id: str, console: Console) -> planner_pb2.RunEvent | None:
    """Shows events live until the run ends; Ctrl-C asks the planner to stop the run cleanly."""
    status = {"run": run_id}
    last: planner_pb2.RunEvent | None = None
    stopping = threading.Event()

    def on_interrupt(signum: int, _frame: object) -> None:
        if not stopping.is_set():
            stopping.set()
            console.print("[yellow]stopping: training jobs are stopped, state is saved; --resume continues[/]")
            stub.StopRun(planner_pb2.StopRunRequest(run_id=run_id), timeout=deadlines.QUICK_SECONDS)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        with Live(_progress_table(status), console=console, refresh_per_second=4) as live:
            for event in stub.WatchRun(planner_pb2.WatchRunRequest(run_id=run_id),
                                       timeout=deadlines.FOLLOW_RUN_SECONDS):
                last = event
                kind = event.WhichOneof("payload")
                status["iteration"] = str(event.iteration)
                if event.subtask:
                    status["sub-task"] = event.subtask
                status["last"] = kind
                if kind == "plan":
                    status["last"] = "plan: " + ", ".join(s.name for s in event.plan.subtasks)
                elif kind == "code":
                    status["last"] = f"skill candidate {event.code.candidate}: success {event.code.success_rate:.0%}"
                elif kind == "training":
                    t = event.training
                    status["training"] = (f"{t.env_frames} frames, {t.fps:.0f} FPS, success {t.success_rate:.0%}, "
                                          f"return {t.mean_return:.2f}")
                elif kind == "verdict":
                    status["verdict"] = f"success {event.verdict.success_rate:.0%}: {event.verdict.diagnosis[:80]}"
                elif kind == "iteration_end":
                    end = event.iteration_end
                    rate = (f"score {end.score:.1f}" if end.HasField("score") else  # a game task's measure
                            f"{end.success_rate:.0%}" if end.HasField("success_rate") else "not evaluated")
                    status["whole task"] = f"after iteration {end.iteration}: {rate} ({end.controller[:80]})"
                elif kind == "llm":
                    status["tokens"] = str(int(status.get("tokens", "0")) + event.llm.prompt_tokens
                                           + event.llm.completion_tokens)
                elif kind == "error":
                    status["last"] = f"error: {event.error.message[:120]}"
                live.update(_progress_table(status))
    finally:
        signal.signal(signal.SIGINT, previous)
    return last
