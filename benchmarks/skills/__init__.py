"""bench-skills' report: its section rebuilt from the answers' committed result files."""
