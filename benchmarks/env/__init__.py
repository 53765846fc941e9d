"""bench-env: Crafter stepping throughput in-process vs. through the env server (see benchmarks/bench_env.py)."""
