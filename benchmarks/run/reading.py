"""A finished `rlgpt run` read back from its runs directory: what bench-run saves as its raw results.

`rlgpt run --runs-dir DIR` with services started locally writes the run under ``DIR/<run id>/`` (``request.json``,
``state.json``, ``llm/``: services/planner/runs.py and state.py) and the services' logs under ``DIR/logs/``
(``llm-server.log`` when the embedded model served). Everything here comes from those files, never from the
planner's API, so a run that was killed still reads as far as it got.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from rlgpt.config import LLMSettings
from rlgpt.llm.local_server import MODEL_ALIAS
from rlgpt.v1 import planner_pb2
from services.planner.budgets import BUDGET_FIELDS, resolve_budgets
from services.planner.report_evaluations import evaluation_counts
from services.planner.settings import PlannerSettings

log = logging.getLogger("benchmarks.run")
VERDICT_TEXT = 300
"""Characters of a verdict's diagnosis kept in the raw results (the run's own state has all of it)."""
_GGUF_NAME = re.compile(r"general\.name\s+str\s+=\s+(.+)")
_GGUF_FILE = re.compile(r"from (\S+\.gguf)")


def find_run_dir(runs_dir: Path) -> Path | None:
    """The run directory under ``runs_dir`` (the one with ``request.json``; the newest when there are several),
    or None when the run never started."""
    found = sorted((p.parent for p in runs_dir.glob("*/request.json")), key=lambda p: p.stat().st_mtime)
    if len(found) > 1:
        log.warning("%s holds %d runs; reading the newest, %s", runs_dir, len(found), found[-1].name)
    return found[-1] if found else None


def evaluation(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """An evaluation (an iteration's or the final one) as the raw results keep it: its rate, the per-world
    successes in world order, and the count they give (None: not evaluated)."""
    counts = evaluation_counts(record)
    if record is None or counts is None:
        return None
    return {"success_rate": record.get("success_rate"), "successes": [bool(s) for s in record.get("successes", [])],
            "count": counts[0], "episodes": counts[1]}


def _iteration(record: dict[str, Any]) -> dict[str, Any]:
    verdict = record.get("verdict") or {}
    return {"iteration": record.get("iteration"), "evaluation": evaluation(record),
            "frames": record.get("frames", 0), "seconds": record.get("seconds", 0.0),
            "tokens": record.get("tokens", 0), "controller": record.get("controller", ""),
            "kept": record.get("kept", ""),
            "verdict": {"target": verdict.get("target", ""), "subtask": verdict.get("subtask", ""),
                        "diagnosis": str(verdict.get("diagnosis", ""))[:VERDICT_TEXT]} if verdict else {}}


def _final(final: dict[str, Any] | None) -> dict[str, Any] | None:
    if not final:
        return None
    return {**(evaluation(final) or {"success_rate": final.get("success_rate"), "successes": [], "count": 0,
                                     "episodes": 0}),
            "frames_used": final.get("frames_used", 0), "controller": final.get("controller", ""),
            "seed": final.get("seed", 0), "error": final.get("error", "")}


def final_of(run_dir: Path) -> dict[str, Any] | None:
    """A run's final evaluation from its own state.json (per world, in world order from its seed); None before
    the run has one."""
    state_path = run_dir / "state.json"
    return _final(json.loads(state_path.read_text()).get("final")) if state_path.exists() else None


def llm_records(run_dir: Path) -> list[dict[str, Any]]:
    """The run's LLM call records (``llm/*.json``), in call order; unreadable ones skipped with a warning."""
    records = []
    for path in sorted((run_dir / "llm").glob("*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            log.warning("%s: unreadable LLM record skipped (%s)", path, exc)
    return records


def embedded_model(runs_dir: Path) -> str:
    """The embedded model as its server's log names it (the GGUF file's own name and file), else the LLM
    settings' ``local_model`` (the one the services were started with: they inherit this process's settings)."""
    server_log = runs_dir / "logs" / "llm-server.log"
    text = server_log.read_text(errors="replace") if server_log.exists() else ""
    name, file = _GGUF_NAME.search(text), _GGUF_FILE.search(text)
    if name:
        where = f"{Path(file.group(1)).name}, " if file else ""
        return f"embedded {name.group(1).strip()} ({where}llama.cpp server)"
    return f"embedded {LLMSettings.load().local_model} (llama.cpp server)"


def llm_name(runs_dir: Path, records: list[dict[str, Any]]) -> str:
    """The LLM that answered the run's calls: the models its records name (the embedded server answers as
    ``local``, so its model is read from the server's log), or that no call was made."""
    models = sorted({str(r.get("model", "")) for r in records if r.get("model")})
    if not models:
        return "unknown (the records name no model)" if records else "none (the run made no LLM call)"
    return ", ".join(embedded_model(runs_dir) if m == MODEL_ALIAS else m for m in models)


def request_of(run_dir: Path) -> planner_pb2.StartRunRequest:
    return json_format.Parse((run_dir / "request.json").read_text(), planner_pb2.StartRunRequest())


def budgets_of(request: planner_pb2.StartRunRequest) -> dict[str, Any]:
    """The run's budgets: its request's, the planner's defaults elsewhere (as this process's settings give them;
    the planner the run started inherits the same environment)."""
    resolved = resolve_budgets(request.budgets, PlannerSettings.load())
    return {name: getattr(resolved, name) for name in BUDGET_FIELDS}


def read_run(runs_dir: Path) -> dict[str, Any]:
    """What a run under ``runs_dir`` did, from its own files: run id, budgets, per outer iteration the whole
    task's evaluation (per world), frames, seconds, tokens, whether it was kept and the verdict; the final
    evaluation; why it stopped; LLM tokens and model. ``{"run_id": ""}`` when no run directory was written."""
    run_dir = find_run_dir(runs_dir)
    if run_dir is None:
        return {"run_id": ""}
    state_path = run_dir / "state.json"
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    records, request = llm_records(run_dir), request_of(run_dir)
    iterations = [_iteration(r) for r in state.get("iterations", [])]
    return {
        "run_id": run_dir.name, "task": request.task.name, "budgets": budgets_of(request),
        "budgets_set": [name for name in BUDGET_FIELDS if request.budgets.HasField(name)], "iterations": iterations,
        "outer_iterations": len(iterations), "frames_used": state.get("frames_used", 0),
        "final": _final(state.get("final")), "stop_reason": state.get("stop_reason", ""),
        "finished": bool(state.get("finished")), "llm_calls": len(records),
        "tokens": sum(int(r.get("prompt_tokens", 0)) + int(r.get("completion_tokens", 0)) for r in records),
        "llm": llm_name(runs_dir, records),
    }
