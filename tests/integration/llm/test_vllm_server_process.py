"""The vLLM server's command line, its settings, and the errors met before `make vllm-setup` ran."""

from __future__ import annotations

import sys

import pytest

from rlgpt.errors import Unavailable
from rlgpt.llm.local_server import ServerProcess
from rlgpt.llm.vllm_server import VllmServer, VllmSettings


def _fake_setup(tmp_path, script: str) -> VllmSettings:
    """A venv whose `python` runs a small script whatever its arguments, and a model folder with a config.json."""
    (tmp_path / "venv/bin").mkdir(parents=True)
    python = tmp_path / "venv/bin/python"
    python.write_text(f"#!{sys.executable}\n{script}")
    python.chmod(0o755)
    (tmp_path / "model").mkdir()
    (tmp_path / "model/config.json").write_text("{}")
    return VllmSettings(venv=str(tmp_path / "venv"), model_dir=str(tmp_path / "model"), start_seconds=20)


def test_a_server_that_dies_while_starting_reports_its_log(tmp_path) -> None:
    settings = _fake_setup(tmp_path, "import sys\nprint('ValueError: no such dtype')\nsys.exit(3)\n")
    server = VllmServer(settings, log_path=tmp_path / "vllm.log")
    with pytest.raises(Unavailable, match=r"(?s)vLLM server exited with code 3 while starting.*no such dtype"):
        server.start()


def test_a_server_that_answers_models_is_ready_and_stops(tmp_path) -> None:
    # The fake serves /v1/models on the --port it was given, like vLLM once its model is loaded.
    settings = _fake_setup(tmp_path, (
        "import http.server, sys\n"
        "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        self.send_response(200); self.end_headers(); self.wfile.write(b'{\"data\": []}')\n"
        "http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()\n"))
    with VllmServer(settings, log_path=tmp_path / "vllm.log") as server:
        assert isinstance(server, ServerProcess) and server.started_seconds > 0
        assert server.client_settings()["RLGPT_LLM_BASE_URL"] == f"http://127.0.0.1:{server.port}/v1"
        process = server._process
        assert process is not None and process.poll() is None
    assert process.poll() is not None
