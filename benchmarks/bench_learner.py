"""Learner training throughput: Sample Factory APPO on Crafter with the env in-process vs. through the env server.

``make bench-learner`` runs ``python -m benchmarks.bench_learner --output docs/BENCHMARKS.md``. It measures, on
the Crafter task collect_wood with primitive actions only (so frames == decisions):

1. raw Crafter stepping with random actions, one process and two processes (one per core);
2. APPO training with the env *in-process*: a Sample Factory env (``rlgpt_inprocess``) over a local
   ``Session`` (``benchmarks/learner/inprocess.py``), trained through the same code as
   ``services.learner.train`` in a subprocess;
3. APPO training *through the env server*: ``rlgpt serve env`` plus ``python -m services.learner.train``,
   exactly as the learner service launches a job.

Training FPS is read from the job's ``progress.jsonl``; peak RSS is polled over each process tree. The machine
is shared, so before every timed window the benchmark waits for it to be quiet and records the CPU that other
processes used during the window, redoing a window that others disturbed. The measurement
(``benchmarks/learner/run.py``) saves its raw results in ``docs/bench-raw/learner/results.json``; the report
(``benchmarks/learner/report.py``) rebuilds the markdown section from them alone (``--report-only`` does only
that). ``--quick`` is a tiny end-to-end run.
"""

import typer

from benchmarks.learner.cli import main

if __name__ == "__main__":
    typer.run(main)
