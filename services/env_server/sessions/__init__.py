"""The env server's sessions: N envs of one backend and task stepped together (session), built from a
CreateSessionRequest (session_builder, actions), kept by id (session_manager), with skill and plan actions
(macro_actions), the prefix run after every reset (prefix), per-env episodes (episode), recorded trajectories
(recording, trajectory, trajectory_reading), animations of episodes (animation) and RunSkill's test episodes
(skill_trials)."""
