"""RL-GPT on the whole game: ``make bench-game`` runs ``python -m benchmarks.bench_game``.

A finished RL-GPT run's final controller (as its state.json records it: a chain of coded skills and policies, or
a trained policy) played on held-out Crafter worlds declared before scoring (``--set``: each set of a run is
scored once, apart from every world the run played), Crafter's episodes (10,000 frames or death), one per world;
every episode saved in ``docs/bench-raw/game/<name>/results.json``, the score and the 22 rates computed from it by
``rlgpt/game_score.py`` into the Crafter section of docs/BENCHMARKS.md and its achievements plot
(``--report-only``: from the committed raw files alone). See benchmarks/game/.
"""

import typer

from benchmarks.game.cli import main

if __name__ == "__main__":
    typer.run(main)
