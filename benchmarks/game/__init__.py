"""bench-game (``make bench-game``): a finished RL-GPT run's final controller scored on the whole game of Crafter,
once per declared held-out set, its per-episode raw data committed and its rows rendered from it alone."""
