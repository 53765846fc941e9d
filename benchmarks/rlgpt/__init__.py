"""bench-rlgpt: pure RL vs pure code vs RL-GPT on Crafter tasks at one frame budget (see benchmarks/bench_rlgpt.py)."""
