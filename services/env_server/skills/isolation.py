"""OS-level isolation of a sandbox worker process, applied by the worker itself before it runs any skill.

Each step is best effort (a host may refuse it: no CAP_SYS_ADMIN for a network namespace, not root
for a uid change) and the worker reports which took effect in its ping reply; the server logs that
once. The language-level sandbox (:mod:`.sandbox`, :mod:`.guards`) does not depend on any of them.

- network: ``unshare(CLONE_NEWNET)`` puts the worker in a fresh, empty network namespace (not even
  loopback is up), so nothing in it can open a connection anywhere;
- no_new_privs / not_dumpable: ``prctl`` so that nothing executed later gains privileges, and other
  workers running as the same uid cannot ptrace this one;
- user: when running as root, ``setgroups([])`` + ``setgid`` + ``setuid`` to an unprivileged uid
  (default 65534, nobody), which also drops every capability;
- rlimits: no forks (RLIMIT_NPROC 0, effective once not root), no core dumps, no file writes
  (RLIMIT_FSIZE 0; the protocol pipes are not files).
"""

from __future__ import annotations

import ctypes
import os
import resource
from typing import Any

_CLONE_NEWNET = 0x40000000
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _unshare_network() -> str:
    if hasattr(os, "unshare"):  # Python 3.12+
        try:
            os.unshare(os.CLONE_NEWNET)  # type: ignore[attr-defined]
            return ""
        except OSError as exc:
            return f"unshare(CLONE_NEWNET): {exc.strerror}"
    if _libc().unshare(_CLONE_NEWNET) != 0:
        return f"unshare(CLONE_NEWNET): {os.strerror(ctypes.get_errno())}"
    return ""


def _prctl(option: int, value: int) -> str:
    if _libc().prctl(option, value, 0, 0, 0) != 0:
        return f"prctl({option}): {os.strerror(ctypes.get_errno())}"
    return ""


def _drop_user(uid: int) -> str:
    if os.getuid() != 0:
        return "not root: keeps the server's uid"
    try:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    except OSError as exc:
        return f"setuid({uid}): {exc.strerror}"
    return "" if os.getuid() == uid and os.geteuid() == uid else f"setuid({uid}) did not take effect"


def _limit(which: int, value: int) -> str:
    try:
        resource.setrlimit(which, (value, value))
    except (OSError, ValueError) as exc:
        return str(exc)
    return ""


def isolate(uid: int) -> dict[str, Any]:
    """Applies every step it can; returns {step: True/False, ..., "problems": [why a step did not apply]}."""
    steps = {
        "network": _unshare_network,  # needs CAP_SYS_ADMIN: before the uid drop
        "no_new_privs": lambda: _prctl(_PR_SET_NO_NEW_PRIVS, 1),
        "user": lambda: _drop_user(uid),
        "not_dumpable": lambda: _prctl(_PR_SET_DUMPABLE, 0),  # after setuid, which resets it
        "no_forks": lambda: _limit(resource.RLIMIT_NPROC, 0),
        "no_core_dumps": lambda: _limit(resource.RLIMIT_CORE, 0),
        "no_file_writes": lambda: _limit(resource.RLIMIT_FSIZE, 0),
    }
    report: dict[str, Any] = {"problems": []}
    for name, step in steps.items():
        try:
            problem = step()
        except (OSError, AttributeError, ValueError) as exc:  # e.g. no libc symbol on this platform
            problem = f"{type(exc).__name__}: {exc}"
        report[name] = not problem
        if problem:
            report["problems"].append(f"{name}: {problem}")
    report["uid"] = os.getuid()
    if report["no_forks"] and report["uid"] == 0:
        report["no_forks"] = False  # root ignores RLIMIT_NPROC
        report["problems"].append("no_forks: root ignores RLIMIT_NPROC")
    return report
