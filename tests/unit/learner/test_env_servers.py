"""Which env servers a job's sessions go to: the learner's own, listed ones, and every address of a DNS name."""

from __future__ import annotations

import pytest

from rlgpt.errors import FailedPrecondition, InvalidArgument
from services.learner.env_servers import resolve_host, training_targets


def resolver(table: dict[str, list[str]]):
    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError(f"[Errno -2] Name or service not known: {host}")
        return table[host]
    return resolve


def test_the_listed_env_servers_once_each_or_else_the_learners_own() -> None:
    assert training_targets("p:1", "") == ["p:1"]
    assert training_targets("p:1", " a:2, b:3 ,,a:2,p:1") == ["a:2", "b:3", "p:1"]


def test_a_dns_name_means_every_address_it_resolves_to() -> None:
    resolve = resolver({"env-headless": ["10.0.0.7", "10.0.0.5", "fd00::3"]})
    assert training_targets("p:1", "dns:///env-headless:50051", resolve) == [
        "10.0.0.7:50051", "10.0.0.5:50051", "[fd00::3]:50051"]


def test_localhost_resolves_for_real() -> None:
    assert "127.0.0.1" in resolve_host("localhost", 80)


@pytest.mark.parametrize(("entry", "error", "needle"), [
    ("no-port", InvalidArgument, "env server 'no-port' must be HOST:PORT"),
    ("host:99999", InvalidArgument, "must be HOST:PORT (port 1..65535)"),
    ("dns:///gone:50051", FailedPrecondition, "the name 'gone' does not resolve"),
    ("dns:///empty:50051", FailedPrecondition, "resolves to no address (no env-server replica is ready)"),
])
def test_bad_entries_say_what_to_fix(entry: str, error: type[Exception], needle: str) -> None:
    with pytest.raises(error, match=None) as info:
        training_targets("p:1", entry, resolver({"empty": []}))
    assert needle in str(info.value)
