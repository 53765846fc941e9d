"""Shared fixtures: a real env server on a free loopback port, talked to over a real channel."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from fakes import fake_minedojo

from rlgpt.grpc_client import create_channel
from rlgpt.grpc_server import ServiceBinding, create_server, stop_server
from rlgpt.v1 import env_pb2_grpc
from services.env_server.backends import base
from services.env_server.servicer import SERVICE_NAME, EnvServicer
from services.env_server.settings import EnvServerSettings

TEST_ENV_SETTINGS = EnvServerSettings(
    max_sessions=4, max_envs_per_session=8, max_code_bytes=16384, session_idle_seconds=600,
    max_run_skill_episodes=8, skill_call_seconds=1.5, skill_tick_budget=20000, skill_memory_mb=512,
    plan_skill_overtime=60)


@dataclasses.dataclass
class RunningEnvServer:
    port: int
    channel: grpc.Channel
    stub: env_pb2_grpc.EnvServiceStub
    servicer: EnvServicer

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture(scope="session")
def env_server() -> Iterator[RunningEnvServer]:
    servicer = EnvServicer(TEST_ENV_SETTINGS)
    server, port = create_server("127.0.0.1:0", [
        ServiceBinding(SERVICE_NAME, env_pb2_grpc.add_EnvServiceServicer_to_server, servicer)], metrics_label="env")
    channel = create_channel(f"127.0.0.1:{port}", default_timeout=60, wait_ready_seconds=10)
    try:
        yield RunningEnvServer(port, channel, env_pb2_grpc.EnvServiceStub(channel), servicer)
    finally:
        channel.close()
        stop_server(server, grace_seconds=1)


@pytest.fixture
def no_leftover_sessions(env_server: RunningEnvServer) -> Iterator[None]:
    """Closes every session a test left open on the shared env server (``pytest.mark.usefixtures``)."""
    yield
    env_server.servicer.sessions.close_all()


_TIERS = ("unit", "integration", "deploy")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks every test with its tier, by the folder it lives in (tests/<tier>/...): `-m unit` is `make test`."""
    root = config.rootpath / "tests"
    for item in items:
        parts = item.path.relative_to(root).parts if item.path.is_relative_to(root) else ()
        if parts and parts[0] in _TIERS:
            item.add_marker(parts[0])


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    """MineDojo's stand-in installed as ``minedojo`` (with ``minedojo.sim.mc_meta.mc``), the backend registry empty."""
    fake_minedojo.install(monkeypatch)
    monkeypatch.setattr(base, "_loaded", {})
    return fake_minedojo
