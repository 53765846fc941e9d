"""Replaying a run's LLM calls: in-process (ReplayClient) and over HTTP (ReplayAnswerer behind ChatServer)."""

from __future__ import annotations

import pytest

from rlgpt.errors import FailedPrecondition
from rlgpt.llm.replay import ReplayAnswerer

pytestmark = pytest.mark.timeout(60)
def test_a_missing_record_directory_says_where_records_live(tmp_path) -> None:
    with pytest.raises(FailedPrecondition, match=r"is not a directory \(a run keeps its calls in <run_dir>/llm/\)"):
        ReplayAnswerer(tmp_path / "nope")
