"""A run's directory: request, events (emit, resume, watch), status, and its LLM calls numbered in call order."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from rlgpt.errors import FailedPrecondition, NotFound
from rlgpt.llm.client import CallRecord, record_from_json
from rlgpt.v1 import common_pb2, planner_pb2
from services.planner.runs import Run, check_run_id, own_run_dir, run_id_of_dir

REQUEST = planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name="collect_wood"), mode="rl-gpt",
                                      budgets=planner_pb2.Budgets(max_outer_iterations=2))


def call(agent: str, prompt_tokens: int = 10, completion_tokens: int = 5) -> CallRecord:
    return CallRecord(seq=0, agent=agent, iteration=0, model="m", messages=[{"role": "user", "content": "hi"}],
                      response='{"a": 1}', parsed={"a": 1}, prompt_tokens=prompt_tokens,
                      completion_tokens=completion_tokens, latency_seconds=0.25, attempts=1)


def error(text: str) -> planner_pb2.ErrorEvent:
    return planner_pb2.ErrorEvent(message=text, resumable=True)


def test_create_makes_a_run_directory_under_root_with_its_request(tmp_path: Path) -> None:
    run = Run.create(tmp_path, REQUEST)
    assert run.dir.parent == tmp_path and run.dir.name.startswith("collect_wood__") and run.id == run.dir.name
    assert run.active and run.state == planner_pb2.RUN_STATE_RUNNING
    saved = json.loads((run.dir / "request.json").read_text())
    assert saved["task"]["name"] == "collect_wood" and saved["mode"] == "rl-gpt"
    assert Run.create(tmp_path, REQUEST).dir != run.dir  # two runs of one task never share a directory
    unnamed = Run.create(tmp_path, planner_pb2.StartRunRequest())
    assert unnamed.dir.name.startswith("task__")


def test_emit_numbers_events_and_appends_them_to_events_jsonl(tmp_path: Path) -> None:
    run = Run.create(tmp_path, REQUEST)
    first = run.emit(error=error("one"))
    run.iteration = 2
    second = run.emit("get_wood", iteration_end=planner_pb2.IterationEnd(tokens=7, seconds=1.5))
    assert (first.seq, second.seq) == (1, 2)
    assert second.iteration == 2 and second.subtask == "get_wood" and second.run_id == run.id
    lines = (run.dir / "events.jsonl").read_text().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[1])["iterationEnd"]["tokens"] == "7"


def test_resume_reads_request_and_events_back(tmp_path: Path) -> None:
    run = Run.create(tmp_path, REQUEST)
    run.emit(error=error("one"))
    run.emit("b", run_end=planner_pb2.RunEnd(success_rate=0.5))
    again = Run.resume(run.dir)
    assert again.id == run.id and again.request == REQUEST
    assert [e.seq for e in again.events] == [1, 2] and again.events[1].run_end.success_rate == 0.5
    assert again.emit(error=error("three")).seq == 3  # numbering goes on
    assert len((run.dir / "events.jsonl").read_text().splitlines()) == 3
    assert json.loads((run.dir / "request.json").read_text())["task"]["name"] == "collect_wood"  # not rewritten


def test_resume_names_what_is_missing_or_corrupt(tmp_path: Path) -> None:
    with pytest.raises(FailedPrecondition, match=r"is not a run directory: .*request\.json is missing"):
        Run.resume(tmp_path / "nothing")
    run = Run.create(tmp_path, REQUEST)
    run.emit(error=error("one"))
    with (run.dir / "events.jsonl").open("a") as f:
        f.write("{not json\n")
    with pytest.raises(FailedPrecondition, match=r"events\.jsonl line 2 cannot be read"):
        Run.resume(run.dir)
    (run.dir / "request.json").write_text('{"task": 3}')
    with pytest.raises(FailedPrecondition, match=r"request\.json cannot be read"):
        Run.resume(run.dir)


def test_llm_calls_are_files_numbered_in_call_order(tmp_path: Path) -> None:
    run = Run.create(tmp_path, REQUEST)
    run.llm_call(call("slow"))
    run.iteration = 1
    first, second = call("fast", 100, 20), call("critic", 3, 4)
    run.llm_call(first, "get_wood")
    run.llm_call(second, "get_wood")
    names = sorted(p.name for p in (run.dir / "llm").iterdir())
    assert names == ["00001-iter0-plan-slow.json", "00002-iter1-get_wood-fast.json",
                     "00003-iter1-get_wood-critic.json"]
    assert first.path == str(run.dir / "llm" / names[1])
    assert record_from_json(Path(first.path).read_text()).prompt_tokens == 100
    assert run.tokens == 15 + 120 + 7
    events = [e for e in run.events if e.WhichOneof("payload") == "llm"]
    assert [(e.llm.agent, e.subtask, e.llm.record) for e in events] == [
        ("slow", "", str(run.dir / "llm" / names[0])), ("fast", "get_wood", first.path),
        ("critic", "get_wood", second.path)]
    assert events[1].llm.prompt_tokens == 100 and events[1].llm.latency_seconds == 0.25


def test_a_resumed_run_numbers_its_calls_after_the_last_recorded_one(tmp_path: Path) -> None:
    run = Run.create(tmp_path, REQUEST)
    for agent in ("slow", "fast", "critic"):
        run.llm_call(call(agent))
    (run.dir / "llm" / "notes.json").write_text("{}")  # not a call: ignored by the numbering
    (run.dir / "llm" / "00002-iter0-plan-fast.json").unlink()  # a gap changes nothing: the last number counts
    again = Run.resume(run.dir)
    again.llm_call(call("slow"))
    assert (run.dir / "llm" / "00004-iter0-plan-slow.json").exists()
    assert again.tokens == 15  # tokens are counted per process; the recorded ones are not read back


def test_concurrent_calls_get_distinct_numbers(tmp_path: Path) -> None:
    run = Run.create(tmp_path, REQUEST)
    threads = [threading.Thread(target=run.llm_call, args=(call(f"agent{i}"),)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    numbers = sorted(int(p.name[:5]) for p in (run.dir / "llm").iterdir())
    assert numbers == list(range(1, 17))
    assert sorted(e.seq for e in run.events) == list(range(1, 17))


def test_watch_sends_events_after_a_seq_live_and_ends_when_the_run_ends(tmp_path: Path) -> None:
    run = Run.create(tmp_path, REQUEST)
    for i in range(3):
        run.emit(error=error(f"e{i}"))
    received: list[int] = []
    done = threading.Event()

    def watcher() -> None:
        received.extend(e.seq for e in run.watch(1, lambda: True))
        done.set()

    thread = threading.Thread(target=watcher)
    thread.start()
    run.emit(error=error("live"))
    assert not done.wait(0.2)  # still watching: the run goes on
    run.emit(run_end=planner_pb2.RunEnd(success_rate=1.0))
    run.finish(planner_pb2.RUN_STATE_DONE)
    thread.join(timeout=5)
    assert done.is_set() and received == [2, 3, 4, 5]


def test_watch_of_an_ended_run_replays_and_returns_and_stops_when_the_client_goes(tmp_path: Path) -> None:
    run = Run.create(tmp_path, REQUEST)
    run.emit(error=error("a"))
    run.emit(error=error("b"))
    assert [e.seq for e in run.watch(0, lambda: False)] == []  # the client went away
    run.finish(planner_pb2.RUN_STATE_FAILED, "LLM server gone")
    assert [e.seq for e in run.watch(0, lambda: True)] == [1, 2]
    assert list(run.watch(2, lambda: True)) == []


def test_finish_saves_the_status(tmp_path: Path) -> None:
    run = Run.create(tmp_path, REQUEST)
    run.iteration, run.tokens, run.success_rate = 2, 1234, 0.75
    run.finish(planner_pb2.RUN_STATE_STOPPED, "stopped on request")
    assert not run.active
    status = json.loads((run.dir / "status.json").read_text())
    assert status["state"] == "RUN_STATE_STOPPED" and status["error"] == "stopped on request"
    assert status["tokens"] == "1234" and status["iteration"] == 2 and status["runDir"] == str(run.dir)
    assert run.status().success_rate == 0.75


def test_a_run_directory_names_a_run_only_in_the_form_start_run_answered(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = Run.create(runs, REQUEST)
    assert run_id_of_dir(str(run.dir), runs) == run.id  # StartRunResponse.run_dir
    assert run_id_of_dir(f"runs/./{run.id}", Path("runs")) == run.id  # as configured, relative: compared as text
    for path in (str(tmp_path / "copy" / run.id), "/etc", "/", "", f"{runs}/../{run.id}", f"{runs}/{run.id}/x",
                 "x" * 5_000_000):
        with pytest.raises(NotFound) as info:
            run_id_of_dir(path, runs)
        assert len(str(info.value)) < 300 and "request.json" not in str(info.value)
    assert own_run_dir(runs, run.id) == run.dir and own_run_dir(runs, "nope") is None


def test_a_created_run_s_directory_name_is_a_run_id(tmp_path: Path) -> None:
    for name in ("_leading", "-dash", "..", "a b/c", ""):
        run = Run.create(tmp_path, planner_pb2.StartRunRequest(task=common_pb2.TaskSpec(name=name)))
        check_run_id(run.id)  # resumable by its id
