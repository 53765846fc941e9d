"""bench-crafter: Crafter's own benchmark (1M frames, the 22 achievements' success rates and the score)."""
