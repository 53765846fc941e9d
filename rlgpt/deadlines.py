"""Every deadline of a call the planner or the CLI makes to another service, in one place, each derived from the
settings that bound the work behind the call; a call site never types a number of seconds.

- A call over an LLM call (the critic's Judge and JudgeTask) gets the longest that LLM call may take with the LLM
  settings (:func:`~rlgpt.llm.retries.longest_call_seconds`: timeout, retries, backoff, one repair), plus
  :data:`START_SECONDS`. The critic reads the same ``RLGPT_LLM_*`` settings as the planner: one environment when
  ``rlgpt run`` starts the services, one ``settings.env`` on Kubernetes.
- A call that steps env frames (RunSkill's test episodes and the all-code chain, Evaluate, a training watched to
  its end) gets its frames, which the run's budgets and the planner's settings fix, at
  :data:`SLOWEST_FRAMES_PER_SECOND`, plus :data:`START_SECONDS` (a training: :data:`JOB_START_SECONDS`).
- A call the serving side bounds with limits of its own, which the caller does not read, gets
  :data:`SERVED_SECONDS`; one answered from memory gets :data:`QUICK_SECONDS`.

A deadline longer than the work costs nothing: a service that dies is UNAVAILABLE at once, whatever the deadline.
One shorter than the work pauses a run that was going well (a relay's critic answer of 10.5 minutes against a
fixed 600 s)."""

from __future__ import annotations

from rlgpt.config import LLMSettings
from rlgpt.llm.retries import longest_call_seconds

QUICK_SECONDS = 60.0
"""A call answered from memory (Describe, ResolveTask, DescribeCritic, GetRun, StopRun): no setting bounds it."""
START_SECONDS = 120.0
"""What a call gets besides its bounded work: a worker process or a model to start, the answer's transfer, a
machine shared with other runs."""
SERVED_SECONDS = 300.0
"""A call the serving side bounds itself: RegisterSkill (its test run: the env server's skill_probe_seconds after
skill_worker_start_seconds), StartTraining (a job's launch), StopJob (the learner's stop_grace_seconds)."""
SLOWEST_FRAMES_PER_SECOND = 5.0
"""The slowest a working service steps env frames: about a fortieth of what one env server steps on one core
(docs/BENCHMARKS.md: 150-300 frames/s training through it, 266 for plain Crafter), for a skill near its per-frame
wall-clock limit, a policy on a busy CPU, a machine shared with trainings and an LLM."""
JOB_START_SECONDS = 1800.0
"""What a training job gets to start before its frames: a Kubernetes Job may wait for a node to come up and pull
its image (a local job starts in seconds)."""
FOLLOW_RUN_SECONDS = 7 * 24 * 3600.0
"""``rlgpt run`` following a run (WatchRun): a run is bounded by frames and iterations, not by time; a week."""
START_RUN_SECONDS = START_SECONDS + 2 * QUICK_SECONDS
"""StartRun: the planner asks the env server's Describe and ResolveTask before it answers."""
REPORT_SECONDS = START_SECONDS
"""GetRunReport: the report's files (markdown, plots, two GIFs) from the planner's disk."""


def judge_seconds(llm: LLMSettings) -> float:
    """The critic's Judge and JudgeTask: its checks and its one LLM call with the settings ``llm``."""
    return START_SECONDS + longest_call_seconds(llm)


def frames_seconds(frames: int) -> float:
    """A call that steps ``frames`` env frames (every episode to its length)."""
    return START_SECONDS + max(0, frames) / SLOWEST_FRAMES_PER_SECOND


def training_seconds(frames: int) -> float:
    """A training of ``frames`` env frames watched from its start to its end (WatchJob)."""
    return JOB_START_SECONDS + max(0, frames) / SLOWEST_FRAMES_PER_SECOND
