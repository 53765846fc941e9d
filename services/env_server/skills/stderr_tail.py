"""The last lines a sandbox worker wrote to its stderr, kept within a fixed number of bytes.

The server reads a worker's stderr only to name the skill line of a crash or a timeout (faulthandler's stack dump,
``Fatal Python error``); the skill controls what else goes there (an exception raised in a generator's finalizer is
printed whole, and its message may be megabytes), so neither one line nor all of them may grow with it.
"""

from __future__ import annotations

import collections
import threading
from typing import BinaryIO

STDERR_LINE_BYTES = 1024
"""Longest stderr line kept, in bytes: the rest of a longer line is read and dropped. A stack dump's lines
(``  File "<skill>", line 12 in skill``) are far shorter."""
STDERR_TAIL_BYTES = 64 * 1024
"""Most bytes of stderr kept per worker: the newest lines that fit (a stack dump of 100 frames is about 6 KB)."""
_SKIP_BYTES = 64 * 1024  # read size while dropping the rest of a long line
_CUT = " ..."  # ends a line that was cut


class StderrTail:
    """The newest lines of one stream, at most ``line_bytes`` each and ``tail_bytes`` in all; thread-safe (one
    thread drains the stream, others read the lines)."""

    def __init__(self, line_bytes: int = STDERR_LINE_BYTES, tail_bytes: int = STDERR_TAIL_BYTES):
        self.line_bytes = line_bytes
        self.tail_bytes = tail_bytes
        self._lines: collections.deque[tuple[str, int]] = collections.deque()  # (line, bytes it counts for)
        self._bytes = 0
        self._lock = threading.Lock()

    def drain(self, stream: BinaryIO) -> None:
        """Reads ``stream`` to its end, keeping the head of each line (a cut line ends with " ...")."""
        skipping = False  # inside a line whose head is kept already
        while True:
            size = _SKIP_BYTES if skipping else self.line_bytes
            chunk = stream.readline(size)
            if not chunk:
                return
            cut = len(chunk) == size and not chunk.endswith(b"\n")  # shorter without a newline: the stream's end
            if not skipping:
                head = chunk[:self.line_bytes - len(_CUT) - 4] if cut else chunk  # room for the mark
                self.append(head.decode("utf-8", errors="replace").rstrip() + (_CUT if cut else ""))
            skipping = cut

    def append(self, line: str) -> None:
        """Keeps ``line`` (cut to ``line_bytes``), dropping the oldest lines past ``tail_bytes``."""
        data = line.encode("utf-8", errors="replace")
        if len(data) > self.line_bytes:
            line = data[:self.line_bytes].decode("utf-8", errors="ignore")
            data = line.encode()
        with self._lock:
            self._lines.append((line, len(data)))
            self._bytes += len(data)
            while self._bytes > self.tail_bytes:
                self._bytes -= self._lines.popleft()[1]

    def lines(self) -> list[str]:
        """The kept lines, oldest first."""
        with self._lock:
            return [line for line, _ in self._lines]
