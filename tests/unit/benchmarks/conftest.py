"""What the benchmarks' command-line tests share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def invoke() -> Callable[..., tuple[int, str]]:
    """Runs a benchmark's typer ``main`` with arguments: the exit code and the output as one line (the error box's
    borders and wrapping taken out)."""
    import typer
    from typer.testing import CliRunner

    def run(main: Callable[..., Any], *args: str) -> tuple[int, str]:
        app = typer.Typer()
        app.command()(main)
        result = CliRunner().invoke(app, list(args))
        return result.exit_code, " ".join(result.output.replace("│", " ").split())

    return run
