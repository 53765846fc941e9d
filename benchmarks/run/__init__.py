"""`make bench-run`: what a user's `make run` does, run once per seed, read back from the run's own files."""
