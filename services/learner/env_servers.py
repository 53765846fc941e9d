"""The env servers a training job's sessions live on: the learner's own env server, or the ones it was given
instead (addresses, or a DNS name resolved to all its addresses, as a Kubernetes headless Service answers).

Sessions are stateful, so they are pinned per server: each rollout worker's session goes to one server, the
servers taken in turn (``sf_env.env_server_for``), rather than left to a load balancer. Before a job starts,
every server must answer, serve the same backend, and hold the job's skills: the learner copies each skill the
job uses from its own env server (where the planner registers skills) to the others.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Callable, Sequence

import grpc

from rlgpt.env_client import list_all_skills
from rlgpt.errors import FailedPrecondition, InvalidArgument, shown
from rlgpt.grpc_client import create_channel
from rlgpt.v1 import env_pb2, env_pb2_grpc, learner_pb2

log = logging.getLogger(__name__)
DNS_SCHEME = "dns:///"
CHECK_TIMEOUT = 10.0
"""Seconds an extra env server gets to answer each check before StartTraining is refused."""

Resolver = Callable[[str, int], list[str]]


def resolve_host(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (IPv4 and IPv6, distinct, sorted)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def _split_host_port(entry: str) -> tuple[str, int]:
    host, sep, port = entry.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgument(f"env server {shown(entry)} must be HOST:PORT (port 1..65535)")
    return host.strip("[]"), int(port)


def _target(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ipaddress.ip_address(address).version == 6 else f"{address}:{port}"


def training_targets(primary: str, extra: str, resolve: Resolver = resolve_host) -> list[str]:
    """The env servers of a job's sessions: each entry of ``extra`` (comma-separated ``HOST:PORT`` or
    ``dns:///NAME:PORT``, the latter one target per address the name resolves to), each once, in order; just
    ``primary`` when ``extra`` is empty."""
    targets: list[str] = []
    for entry in (e.strip() for e in extra.split(",")):
        if not entry:
            continue
        if entry.startswith(DNS_SCHEME):
            host, port = _split_host_port(entry.removeprefix(DNS_SCHEME))
            try:
                addresses = resolve(host, port)
            except OSError as exc:
                raise FailedPrecondition(f"env servers {shown(entry)}: the name {shown(host)} does not resolve "
                                         f"({exc}); check RLGPT_LEARNER_ENV_SERVERS and the Service's DNS") from None
            if not addresses:
                raise FailedPrecondition(f"env servers {shown(entry)}: the name {shown(host)} resolves to no "
                                         "address (no env-server replica is ready)")
            targets += [_target(a, port) for a in addresses]
        else:
            _split_host_port(entry)
            targets.append(entry)
    return list(dict.fromkeys(targets)) or [primary]


def prepare_env_servers(targets: Sequence[str], primary_target: str, primary: env_pb2_grpc.EnvServiceStub,
                        config: learner_pb2.RLConfig) -> None:
    """Checks every server of ``targets`` but the learner's own and copies the job's skills to it (from the
    learner's own); FAILED_PRECONDITION names the server and what to do when one does not answer, serves another
    backend, or refuses a skill."""
    if list(targets) == [primary_target]:
        return
    # Its plan's, its prefix's and its guards' too: the env server runs those skills in the job's sessions.
    steps = [*config.plan, *config.prefix, *config.guards]
    needed = [name for name in dict.fromkeys([*config.skills, *(step.skill for step in steps)])
              if name]  # a plan step a policy plays names no skill
    wanted = set(needed)
    library = {s.name: s for s in list_all_skills(primary, config.backend, include_code=True,
                                                  timeout=CHECK_TIMEOUT).skills if s.name in wanted}
    for n, target in enumerate(targets, start=1):
        if target == primary_target:
            continue
        where = f"env server {n} of {len(targets)} at {target}"
        channel = create_channel(target, default_timeout=CHECK_TIMEOUT)
        try:
            stub = env_pb2_grpc.EnvServiceStub(channel)
            try:
                described = stub.Describe(env_pb2.DescribeRequest(backend=config.backend), timeout=CHECK_TIMEOUT)
                present = {s.name: s for s in list_all_skills(stub, config.backend, include_code=True,
                                                              timeout=CHECK_TIMEOUT).skills}
            except grpc.RpcError as exc:
                raise FailedPrecondition(f"{where} did not answer ({exc.code().name}: {exc.details()}); start it, or "
                                         "remove it from RLGPT_LEARNER_ENV_SERVERS") from None
            if described.backend != config.backend:
                raise FailedPrecondition(f"{where} serves backend {shown(described.backend)}, the job trains on "
                                         f"{shown(config.backend)}; every env server of a job serves its backend")
            for name in needed:
                skill = library[name]
                if name in present and present[name].code == skill.code:
                    continue
                try:
                    stub.RegisterSkill(env_pb2.RegisterSkillRequest(
                        name=name, description=skill.description, code=skill.code, backend=skill.backend,
                        replace=True), timeout=120)
                except grpc.RpcError as exc:
                    raise FailedPrecondition(f"{where} refused skill {name!r} copied from the learner's env server "
                                             f"({exc.code().name}: {exc.details()})") from None
                log.info("copied skill %s to %s", name, target)
        finally:
            channel.close()
