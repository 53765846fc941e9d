"""StderrTail: what the server keeps of a sandbox worker's stderr is bounded in bytes, per line and in all."""

from __future__ import annotations

import io

from services.env_server.skills.stderr_tail import STDERR_LINE_BYTES, STDERR_TAIL_BYTES, StderrTail


def drained(data: bytes, **bounds: int) -> StderrTail:
    tail = StderrTail(**bounds)
    tail.drain(io.BufferedReader(io.BytesIO(data)))
    return tail


def test_short_lines_are_kept_as_written() -> None:
    dump = b'Current thread 0x00007f (most recent call first):\n  File "<skill>", line 3 in skill\n'
    assert drained(dump).lines() == ["Current thread 0x00007f (most recent call first):",
                                     '  File "<skill>", line 3 in skill']


def test_a_long_line_keeps_its_head_and_the_next_line_follows() -> None:
    tail = drained(b"ValueError: " + b"x" * 5_000_000 + b"\nnext line\nlast without newline")
    first, second, third = tail.lines()
    assert first.startswith("ValueError: xxx") and first.endswith(" ...")
    assert len(first.encode()) <= STDERR_LINE_BYTES
    assert (second, third) == ("next line", "last without newline")


def test_the_newest_lines_are_kept_within_the_total() -> None:
    tail = drained(b"".join(b"line %d " % i + b"y" * 5000 + b"\n" for i in range(200)))
    kept = tail.lines()
    assert sum(len(line.encode()) for line in kept) <= STDERR_TAIL_BYTES
    assert kept[-1].startswith("line 199 ") and len(kept) == STDERR_TAIL_BYTES // STDERR_LINE_BYTES


def test_bytes_that_are_not_utf8_are_replaced_and_still_bounded() -> None:
    tail = drained(b"\xff" * 10 + b"\n" + b"\xff" * 3000 + b"\n", line_bytes=100, tail_bytes=1000)
    short, long = tail.lines()
    assert short == "\ufffd" * 10
    assert len(long.encode()) <= 100 and set(long) == {"\ufffd"}


def test_a_stream_without_lines_keeps_nothing() -> None:
    assert drained(b"").lines() == []
