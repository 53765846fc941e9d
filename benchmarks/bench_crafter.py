"""Crafter's own benchmark: ``make bench-crafter`` runs ``python -m benchmarks.bench_crafter``.

Sample Factory APPO on the whole game with Crafter's reward for 1M env frames (``--frames`` for less), through
two env servers, once with primitive actions only and once with the reference skills as macro actions; every
training episode is logged and the 22 achievements' success rates and the score are computed as Crafter's own
analysis code does. Runs are resumable (the jobs live under ``--work``), show live progress, and save their
results per variant in ``docs/bench-raw/crafter/results.json``; the section and the plot are rebuilt from them
(``--report-only``).
"""

import typer

from benchmarks.crafter.cli import main

if __name__ == "__main__":
    typer.run(main)
