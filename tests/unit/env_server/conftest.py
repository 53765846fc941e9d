"""Fixtures shared by the env server's MineDojo tests."""

from __future__ import annotations

from typing import Any

import pytest

from services.env_server.backends import base

try:
    from . import fake_minedojo
except ImportError:  # tests collected as plain modules (no __init__.py): the directory is on sys.path
    import fake_minedojo


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The stand-in installed as ``minedojo`` (with ``minedojo.sim.mc_meta.mc``), the backend registry empty."""
    fake_minedojo.install(monkeypatch)
    monkeypatch.setattr(base, "_loaded", {})
    return fake_minedojo
