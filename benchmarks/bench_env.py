"""Crafter stepping throughput: in-process vs. through the env server (unary Step and StreamSteps).

``make bench-env`` runs ``python -m benchmarks.bench_env --output docs/BENCHMARKS.md``. Every path replays
the same seeds and the same pre-generated random actions over the same number of steps, so each one does
the same Crafter work and only the overhead around it differs. The measurement (``benchmarks/env/run.py``)
saves its raw results in ``docs/bench-raw/env/results.json``; the report (``benchmarks/env/report.py``)
rebuilds the markdown section from them alone (``--report-only`` does only that). ``--quick`` is a tiny
end-to-end run.
"""

import typer

from benchmarks.env.cli import main

if __name__ == "__main__":
    typer.run(main)
