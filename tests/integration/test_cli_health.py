"""`rlgpt health HOST:PORT [--service NAME]`: the check the container HEALTHCHECKs run."""

from __future__ import annotations

from typer.testing import CliRunner

from rlgpt.app.cli import app
from rlgpt.grpc_server import create_server, stop_server


def test_health_exit_codes() -> None:
    server, port = create_server("127.0.0.1:0", [], metrics_label="test")
    runner = CliRunner()
    try:
        ok = runner.invoke(app, ["health", f"127.0.0.1:{port}"])
        assert ok.exit_code == 0 and "SERVING" in ok.output
        unknown = runner.invoke(app, ["health", f"127.0.0.1:{port}", "--service", "rlgpt.v1.Nope"])
        assert unknown.exit_code == 1 and "NOT_FOUND" in unknown.output
    finally:
        stop_server(server, grace_seconds=0)
    gone = runner.invoke(app, ["health", f"127.0.0.1:{port}", "--timeout", "1"])
    assert gone.exit_code == 1 and "UNAVAILABLE" in gone.output
