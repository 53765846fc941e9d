"""bench-learner's guard against background work: what counts as heavy, and what is the benchmark's own."""

from __future__ import annotations

import subprocess
import sys


def test_the_make_that_started_the_benchmark_is_not_background_work() -> None:
    # `make bench-learner` runs the bench as its child: seen from the bench, make is a caller, not a build.
    code = ("import psutil; from benchmarks.learner.monitor import _heavy_reason, ours_and_callers; "
            "ours = ours_and_callers(); parent = psutil.Process().parent(); "
            "print(parent.pid in ours, _heavy_reason(parent, ours) or None, _heavy_reason(parent, set()))")
    makefile = f"run:\n\t@{sys.executable} -c '{code}'\n"
    out = subprocess.run(["make", "-s", "-f", "-", "run"], input=makefile, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["True", "None", "make"]  # heavy by name, but left out as the bench's caller


