"""`make bench-replay`'s parts: a kept record read as numbers, the prompt drift between a record and its replay,
and the section rebuilt from the tracked raw results (docs/results/bench-replay.json)."""
