"""bench-llm's pieces: the dead-loop count of skill test episodes and the report."""
