"""bench-learner: APPO training throughput on Crafter, env in-process vs. via the env server."""

VARIANTS = ("inprocess", "env_server")  # the two training runs, in the order they are measured and reported
