"""The critic: judges a sub-task attempt (rollouts, code, errors, curves) and says which loop must act."""
