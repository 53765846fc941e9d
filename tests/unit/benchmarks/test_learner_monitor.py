"""bench-learner's guard against background work: what counts as heavy, and what is the benchmark's own."""

from __future__ import annotations

import psutil

from benchmarks.learner.monitor import _heavy_reason, ours_and_callers


def test_our_own_tree_is_ours() -> None:
    me = psutil.Process()
    assert me.pid in ours_and_callers() and _heavy_reason(me, ours_and_callers()) == ""
