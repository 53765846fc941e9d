"""An LLM server process (llama.cpp, vLLM) dies with the process that started it: no orphan keeps its port and cores."""

from __future__ import annotations

import sys
import textwrap

import pytest
from process_support import assert_child_dies_with_starter

pytestmark = pytest.mark.timeout(120)

# A real OpenAI-compatible server (the relay) stands in for llama.cpp: what is tested is ServerProcess's start.
STARTER = textwrap.dedent("""
    import sys, time
    from rlgpt.llm.local_server import ServerProcess

    class Relay(ServerProcess):
        name = "relay"

        def command(self):
            return [sys.executable, "-m", "rlgpt.app.cli", "serve", "llm-relay", "--dir", sys.argv[1],
                    "--port", str(self.port)]

    server = Relay(start_seconds=60).start()
    print(server._process.pid, flush=True)
    time.sleep(600)
""")


def test_the_server_exits_when_its_starter_is_killed(tmp_path) -> None:
    assert_child_dies_with_starter([sys.executable, "-c", STARTER, str(tmp_path)], "LLM server")
