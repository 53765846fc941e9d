"""Benchmarks of the rlgpt services (``make bench-env``)."""
