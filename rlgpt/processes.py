"""Child processes that die with the process that started them: on Linux the child asks the kernel for SIGTERM
(or another signal) when its parent dies (``PR_SET_PDEATHSIG``). The kernel counts the *thread* that started it as
the parent: start children from a thread that outlives them."""

from __future__ import annotations

import os
import signal

# Run by the child's own interpreter before the module it starts: asks the kernel for a signal (argv[2]) when the
# parent dies, exits if the parent is already gone, then runs the module as ``python -m`` would. (A ``preexec_fn``
# would do the same between fork and exec, but that is unsafe in a threaded parent: gRPC's threads crashed a child.)
_DIE_WITH_PARENT = (
    "import ctypes, os, runpy, sys\n"
    "parent = int(sys.argv[1])\n"
    "if sys.platform.startswith('linux'):\n"
    "    ctypes.CDLL(None).prctl(1, int(sys.argv[2]))  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != parent:\n"
    "    sys.exit(0)  # the parent died before prctl took effect\n"
    "sys.argv = [sys.argv[3], *sys.argv[4:]]\n"
    "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n")


def die_with_parent(argv: list[str], death_signal: int = signal.SIGTERM) -> list[str]:
    """``argv`` (``[python, "-m", module, *args]``) made to die with this process: the same module and
    arguments, run through a prelude that asks for ``death_signal`` when the parent dies (SIGKILL for a child
    whose SIGTERM handler waits for work nobody will read, such as an LLM server mid-answer). Any other argv is
    returned as it is."""
    if len(argv) < 3 or argv[1] != "-m":
        return argv
    return [argv[0], "-c", _DIE_WITH_PARENT, str(os.getpid()), str(int(death_signal)), argv[2], *argv[3:]]
