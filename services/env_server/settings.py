"""The env server's settings; the loader and the settings services share are in :mod:`rlgpt.config`."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from rlgpt.config import Settings, setting
from rlgpt.request_limits import LIST_ENTRIES, NAME_CHARS, TEXT_CHARS


@dataclasses.dataclass(frozen=True)
class EnvServerSettings(Settings):
    """Settings of the env server (``RLGPT_ENV_*``)."""

    env_prefix: ClassVar[str] = "RLGPT_ENV"

    max_sessions: int = setting(32, "Max open sessions on this server.", ge=1)
    max_envs_per_session: int = setting(256, "Max parallel envs in one session.", ge=1)
    session_idle_seconds: float = setting(600.0, "An untouched session is closed after this many seconds.",
                                          gt=0)
    max_code_bytes: int = setting(65536, "Max size of a skill's source code in bytes.", ge=64)
    max_skills: int = setting(1024, "Max registered skills.", ge=1)
    max_name_chars: int = setting(NAME_CHARS, "Max characters of a name in a request (backend, task, client, skill, "
                                  "action, item, achievement, reward target).", ge=16)
    max_text_chars: int = setting(TEXT_CHARS, "Max characters of a description in a request (skill, task).", ge=64)
    max_list_entries: int = setting(LIST_ENTRIES, "Max entries of a repeated field of a request (primitive_actions, "
                                    "skills, reward_terms, task.success, task.start_inventory, stages, a stage's "
                                    "success).", ge=1)
    default_skill_steps: int = setting(32, "K used when a session does not set skill_max_steps.", ge=1)
    max_skill_steps: int = setting(1000, "Max K a session may ask for.", ge=1)
    max_threat_distance: int = setting(8, "Max PlanInterrupt.threat_within a session may ask for, in cells.", ge=1)
    plan_skill_overtime: int = setting(1000, "Frames a kept plan's skill may go on after its stage is done before "
                                             "the plan moves on without it (a skill that never returns).", ge=1)
    max_episode_length: int = setting(100000, "Max episode length in frames a session may ask for.", ge=1)
    max_run_skill_episodes: int = setting(64, "Max test episodes in one RunSkill call.", ge=1)
    run_skill_default_steps: int = setting(300, "Frames per RunSkill episode when the request sets none.",
                                           ge=1)
    max_frames_per_episode: int = setting(8, "Max PNG frames per episode a RunSkill call may ask for "
                                          "(frames_per_episode).", ge=0)
    max_animation_frames: int = setting(200, "Max frames of one episode's animated GIF (EpisodeSummary.animation): "
                                        "longer episodes are subsampled evenly, the first and last frame kept; an "
                                        "env holds at most 4x this many frames while its episode may be animated.",
                                        ge=2)
    max_animations: int = setting(2, "Max `animate` of a session or RunSkill call: GIFs of that many successful and "
                                  "that many failed episodes.", ge=0)
    skill_tick_budget: int = setting(200000, "Loop iterations a skill may run between two yields.", ge=100)
    skill_call_seconds: float = setting(2.0, "Wall-clock limit of a skill between two yields; the worker "
                                        "process is killed and replaced past it.", gt=0)
    skill_memory_mb: int = setting(1024, "Address-space limit of a skill worker process, MiB.", ge=128)
    skill_worker_start_seconds: float = setting(30.0, "Time a skill worker process gets to start.", gt=0)
    skill_memory_total_mb: int = setting(
        8192, "Memory budget of all skill worker processes of this server together, MiB: each worker reserves "
        "skill_memory_mb; past the budget idle workers are stopped, and if none is idle the skill gets a "
        "SandboxBusy error (RegisterSkill: RESOURCE_EXHAUSTED).", ge=128)
    skill_isolation: bool = setting(True, "Best-effort OS isolation of skill workers: an empty network namespace, "
                                    "an unprivileged uid when the server runs as root, no forks, files or core "
                                    "dumps (what took effect is logged once).")
    skill_worker_uid: int = setting(65534, "uid and gid a skill worker drops to when the server runs as root "
                                    "(65534: nobody).", ge=1)
    skill_probe_frames: int = setting(300, "Frames RegisterSkill runs a new skill for on each test world to "
                                      "catch errors of later branches.", ge=1)
    skill_probe_worlds: int = setting(3, "Test worlds (seeds 0..N-1) RegisterSkill runs a new skill on.", ge=1)
    skill_probe_seconds: float = setting(10.0, "Wall-clock budget of RegisterSkill's test run; when it is spent, "
                                         "the skill is judged on the frames it ran.", gt=0)

    @property
    def max_skill_tests(self) -> int:
        """RunSkill calls served at once: their private sessions share the session limit's budget, half of it. One
        more is RESOURCE_EXHAUSTED (rlgpt.grpc_server), so they never take the threads health and Describe need."""
        return max(1, self.max_sessions // 2)

    @property
    def max_streams(self) -> int:
        """StreamSteps calls served at once, each on a thread of its own (rlgpt.grpc_server): one per session this
        server may hold; one more is RESOURCE_EXHAUSTED."""
        return self.max_sessions

    def extra_problems(self) -> list[str]:
        problems = []
        if self.default_skill_steps > self.max_skill_steps:
            problems.append(f"default_skill_steps={self.default_skill_steps}: must be <= max_skill_steps="
                            f"{self.max_skill_steps}")
        if self.skill_memory_total_mb < self.skill_memory_mb:
            problems.append(f"skill_memory_total_mb={self.skill_memory_total_mb}: must be >= skill_memory_mb="
                            f"{self.skill_memory_mb} (room for at least one skill worker)")
        return problems
