"""A whole `rlgpt run` through `rlgpt serve llm-relay` (a real server process), answered by files the test
writes: the LLM server process is killed mid-run, the run pauses, and resuming against a restarted relay
finishes it."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rlgpt_run_support import WOOD_ANSWERS
from rlgpt_run_support import options as run_options

from rlgpt.app.runner import run_rlgpt
from rlgpt.errors import Unavailable

pytestmark = pytest.mark.timeout(600)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_relay(folder: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "rlgpt.app.cli", "serve", "llm-relay", "--dir", str(folder),
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert re.search(r"RLGPT_READY service=llm-relay", proc.stdout.readline())
    return proc


class Answerer(threading.Thread):
    """Writes the scripted answer to every request file, by the schema's name; ``hold`` withholds one agent."""

    def __init__(self, folder: Path):
        super().__init__(daemon=True)
        self.folder, self.hold, self.stop, self.seen = folder, "", threading.Event(), []

    def run(self) -> None:
        while not self.stop.wait(0.1):
            for path in sorted((self.folder / "requests").glob("*.json")):
                answer = self.folder / "answers" / path.name
                request = json.loads(path.read_text())
                if answer.exists() or request["agent"] == self.hold or path.name in self.seen:
                    continue
                self.seen.append(path.name)
                name = request["response_format"]["json_schema"]["name"]
                tmp = answer.with_suffix(".tmp")
                tmp.write_text(json.dumps(WOOD_ANSWERS[name]))
                tmp.replace(answer)


def test_llm_server_killed_mid_run_pauses_it_and_resume_finishes(tmp_path, monkeypatch) -> None:
    relay_dir, port = tmp_path / "relay", free_port()
    monkeypatch.setenv("RLGPT_LLM_BASE_URL", f"http://127.0.0.1:{port}/v1")
    monkeypatch.setenv("RLGPT_LLM_MODEL", "relay")
    monkeypatch.setenv("RLGPT_CRITIC_LLM_ON_PASS", "true")  # the critic's call on a passed attempt goes through too
    monkeypatch.setenv("RLGPT_LLM_MAX_RETRIES", "1")
    monkeypatch.setenv("RLGPT_LLM_BACKOFF_SECONDS", "0.2")
    relay = start_relay(relay_dir, port)
    answerer = Answerer(relay_dir)
    answerer.hold = "fast"  # the plan is answered; the skill request waits while the server dies
    answerer.start()
    options = run_options(tmp_path / "runs", seed=1)

    def kill_when_the_fast_agent_asks() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if any(json.loads(p.read_text())["agent"] == "fast" for p in (relay_dir / "requests").glob("*.json")):
                relay.kill()
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_when_the_fast_agent_asks, daemon=True)
    killer.start()
    try:
        with pytest.raises(Unavailable, match=r"(?s)the run stopped: .*LLM server at .* failed 2 times.*--resume"):
            run_rlgpt(options)
        killer.join(5)
        run_dir = next((tmp_path / "runs").glob("collect_wood__*"))
        assert [p.name.split("-", 1)[1] for p in sorted((run_dir / "llm").glob("*.json"))] == ["iter0-plan-slow.json"]
        relay = start_relay(relay_dir, port)
        answerer.hold = ""
        options.resume = run_dir
        report = run_rlgpt(options)
    finally:
        answerer.stop.set()
        relay.kill()
    state = json.loads((report.parent / "state.json").read_text())
    assert state["finished"] and state["final"]["success_rate"] == 1.0
    # The restarted relay went on numbering after the requests the first one wrote.
    agents = [json.loads(p.read_text())["agent"] for p in sorted((relay_dir / "requests").glob("*.json"))]
    assert agents[0] == "slow" and agents.count("slow") == 1 and "critic" in agents
