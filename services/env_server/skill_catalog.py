"""The skill library's RPC work: a new skill checked and test-run (skills/probe.py) before it is
registered, the library listed in pages with opaque tokens, a skill deleted."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
from typing import Any

from rlgpt.errors import InvalidArgument, NotFound, shown
from services.env_server.backends.base import Backend, backend_names, get_backend
from services.env_server.settings import EnvServerSettings
from services.env_server.skills.executor import SkillRecord, SkillRegistry

log = logging.getLogger(__name__)


def page_token(backend: str, after: str) -> str:
    """The token of the page after the skill named ``after`` in a listing of ``backend``."""
    return base64.urlsafe_b64encode(json.dumps([backend, after]).encode()).decode()


def after_name(backend: str, token: str) -> str:
    """The last name of the previous page, from a token; INVALID_ARGUMENT for one not issued here."""
    if not token:
        return ""
    bad = ("page_token is not a next_page_token of this server; pass the previous answer's token "
           "unchanged, or none to start over")
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode("ascii")))
    except (binascii.Error, ValueError, UnicodeError):
        raise InvalidArgument(bad) from None
    if not (isinstance(decoded, list) and len(decoded) == 2 and all(isinstance(x, str) for x in decoded)
            and decoded[1]):
        raise InvalidArgument(bad)
    if decoded[0] != backend:
        raise InvalidArgument(f"page_token belongs to a listing of backend {shown(decoded[0])}, not "
                              f"{shown(backend)}; keep the backend filter while paging")
    return decoded[1]


class SkillCatalog:
    """Registers, lists and deletes the skills of ``registry``; probes run one at a time."""

    def __init__(self, settings: EnvServerSettings, registry: SkillRegistry):
        self.settings = settings
        self.registry = registry
        self._probe_lock = threading.Lock()
        self._probe_envs: dict[str, Any] = {}
        """One env per backend, kept for the probes."""

    def _smoke_test(self, name: str, code: str, backend: Backend) -> None:
        """Runs the candidate for a few hundred frames on a few test worlds (skills/probe.py): code errors,
        NoYield and timeouts are refused before the skill is registered."""
        from services.env_server.skills.probe import probe_skill

        with self._probe_lock:
            probe_skill(self.settings, name, code, backend, self._probe_envs)

    def register(self, name: str, description: str, code: str, backend: str, replace: bool) -> SkillRecord:
        """Checks, test-runs and registers a skill for ``backend`` (crafter when empty)."""
        backend_name = backend or "crafter"
        if backend_name not in backend_names():
            raise InvalidArgument(f"unknown backend {shown(backend_name)}; known: {', '.join(backend_names())}")
        self.registry.check(name, code)
        if not replace:
            try:
                existing = self.registry.get(name)
            except NotFound:
                existing = None
            if existing is not None:
                self.registry.put(name, description, code, backend_name, False)  # raises
        self._smoke_test(name, code, get_backend(backend_name))
        record = self.registry.put(name, description, code, backend_name, replace)
        log.info("registered skill %s v%d (%d bytes)", record.name, record.version, len(record.code))
        return record

    def page(self, backend: str, token: str, size: int) -> tuple[list[SkillRecord], str]:
        """Up to ``size`` skills of ``backend`` (all backends when empty) after ``token``'s, and the next token
        ("" on the last page)."""
        records, more = self.registry.page(backend, after_name(backend, token), size)
        return records, page_token(backend, records[-1].name) if more else ""

    def delete(self, name: str) -> SkillRecord:
        # Sessions created with the skill keep their SkillRecord: they step it until they close.
        record = self.registry.delete(name)
        log.info("deleted skill %s v%d", record.name, record.version)
        return record
