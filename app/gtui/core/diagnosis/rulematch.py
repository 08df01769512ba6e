"""User diagnosis patterns, matched in a worker process killed at a deadline.

A ``[[diagnose]]`` pattern is a regex from the queue file, and Python's ``re`` backtracks:
``(a+)+b`` on a line of a few thousand ``a``s runs for longer than anyone waits. Cutting the
lines helps but does not bound it (``(a|aa)*b``, ``a*a*a*b`` stay exponential or cubic on
2,000 characters), and no static check recognises every slow pattern. A thread cannot stop it
either: the match holds the GIL and cannot be interrupted. Only another process can be, so
user patterns run in a small worker (``python -I -S``, nothing but ``re`` and ``json``) that is
killed when one pattern runs past the deadline; the next search starts a fresh one.

The worker lives as long as the scheduler (its start costs once, not per failed job), exits
when its stdin closes (the scheduler died), and limits its own CPU time per search, so even a
worker orphaned in the middle of a match stops.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence

DEADLINE = 2.0
"""Seconds one pattern may take on one log tail (a sane one takes milliseconds)."""

START_TIMEOUT = 30.0
"""Seconds the worker may take to start (a loaded machine); not charged to any pattern."""

CPU_LIMIT = 10
"""CPU seconds per search after which the worker's kernel limit stops it (if orphaned)."""

_CHILD = r"""
import json, re, resource, sys

def main():
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    for raw in sys.stdin:
        req = json.loads(raw)
        ru = resource.getrusage(resource.RUSAGE_SELF)
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
        limit = int(ru.ru_utime + ru.ru_stime) + req["cpu"]
        if hard == resource.RLIM_INFINITY or limit <= hard:
            resource.setrlimit(resource.RLIMIT_CPU, (limit, hard))
        hit = None
        try:
            rx = re.compile(req["pattern"], re.IGNORECASE | re.MULTILINE)
        except re.error:
            rx = None
        if rx is not None:
            lines = req["lines"]
            for i in range(len(lines) - 1, -1, -1):
                m = rx.search(lines[i])
                if m:
                    hit = [i, m.start()]
                    break
        out.write(json.dumps(hit) + "\n")
        out.flush()

main()
"""


class PatternOverrun(Exception):
    """The pattern did not finish within the deadline (the worker was killed)."""


class WorkerFailed(Exception):
    """The worker could not be started or answered nonsense: not the pattern's fault."""


class PatternWorker:
    """A regex worker process; :meth:`search` is the ``matcher`` :func:`diagnose` takes."""

    def __init__(self, deadline: float = DEADLINE, start_timeout: float = START_TIMEOUT) -> None:
        self.deadline = deadline
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""

    def search(self, pattern: str, lines: Sequence[str]) -> tuple[int, int] | None:
        """The last line ``pattern`` matches and where the match starts, or ``None``.

        Raises :class:`PatternOverrun` when it runs past the deadline, :class:`WorkerFailed`
        when no worker can run it.
        """
        request = json.dumps({"pattern": pattern, "lines": list(lines), "cpu": CPU_LIMIT})
        proc = self._running()
        try:
            assert proc.stdin is not None
            proc.stdin.write(request.encode() + b"\n")
            proc.stdin.flush()
        except OSError as e:  # it died since the last search (its CPU limit): once more
            self.close()
            proc = self._running()
            try:
                assert proc.stdin is not None
                proc.stdin.write(request.encode() + b"\n")
                proc.stdin.flush()
            except OSError:
                self.close()
                raise WorkerFailed(f"the pattern worker does not take requests: {e}") from e
        answer = self._read_line(time.monotonic() + self.deadline)
        if answer is None:
            self.close()
            raise PatternOverrun(pattern)
        try:
            hit = json.loads(answer)
        except ValueError as e:
            self.close()
            raise WorkerFailed(f"the pattern worker answered {answer[:80]!r}") from e
        if hit is None:
            return None
        return int(hit[0]), int(hit[1])

    def close(self) -> None:
        """Kill the worker (if any) and reap it; the next search starts another."""
        proc, self._proc, self._buf = self._proc, None, b""
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self.close()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _CHILD],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as e:
            raise WorkerFailed(f"cannot start the pattern worker: {e}") from e
        self._proc = proc
        ready = self._read_line(time.monotonic() + self.start_timeout)
        if ready != "ready":
            self.close()
            raise WorkerFailed("the pattern worker did not start")
        return proc

    def _read_line(self, deadline: float) -> str | None:
        """One line from the worker by ``deadline``; ``None`` if late or the worker died."""
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            readable, _, _ = select.select([fd], [], [], left)
            if not readable:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode(errors="replace")
