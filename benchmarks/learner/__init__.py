"""bench-learner: APPO training throughput on Crafter, env in-process vs. via the env server."""

VARIANTS = ("inprocess", "env_server", "env_servers_2")  # the training runs, in the order measured and reported
SERVER_COUNTS = {"env_server": 1, "env_servers_2": 2}
"""Env-server processes of each variant that trains through env servers."""
