"""Crafter's own benchmark: ``make bench-crafter`` runs ``python -m benchmarks.bench_crafter``.

Sample Factory APPO on the whole game with Crafter's reward for 1M env frames (``--frames`` for less), through
two env servers, once with primitive actions only and once with the reference skills as macro actions; every
training episode is logged and the 22 achievements' success rates and the score are computed as Crafter's own
analysis code does. With ``--eval-episodes N`` the trained policy then plays N held-out worlds: bench-game's set
``--eval-set K`` (default 0) of a run with the same ``--seed``, so that the APPO rows and that run's RL-GPT rows are
compared world by world in the section. Runs are resumable (the jobs live under ``--work``), show live progress,
and save their results per variant in ``docs/bench-raw/crafter/results.json``; the section and the plot are rebuilt
from them (``--report-only``).
"""

import typer

from benchmarks.crafter.cli import main

if __name__ == "__main__":
    typer.run(main)
