"""A gtui that holds a queue's lock but does not answer on its socket yet is starting: it reads
the queue and its saved state before its socket opens. A request meanwhile is its to take, so a
client waits for it (at most ``START_WAIT_S``) rather than act behind its back: a job written into
the file then would reach it one file-watch later, after a ``gtui wait`` that follows may have
asked for the job and been told there is none."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from gtui.core.paths import QueuePaths

T = TypeVar("T")

START_WAIT_S = 5.0  # a 100,000-job queue opens in about 2 s
POLL_S = 0.05


def starting_pid(paths: QueuePaths) -> int | None:
    """The pid of the gtui that holds the queue's lock (0: its pid not written yet), or None."""
    from gtui.core.state.lock import QueueLock

    return QueueLock(paths).holder()


def waiting_line(paths: QueuePaths, pid: int) -> str:
    who = f"the gtui (pid {pid})" if pid else "the gtui"
    return f"{who} that runs {paths.queue.name} is starting: waiting for it to answer"


def once_started(
    paths: QueuePaths,
    ask: Callable[[], T | None],
    *,
    said: Callable[[str], None] | None = None,
    wait_s: float = START_WAIT_S,
) -> T | None:
    """``ask()`` again while a gtui is starting on the queue, until it answers (its reply), or
    until none holds the lock or ``wait_s`` has passed (None: the caller acts on the file or the
    saved state itself). ``said`` is told once, when there is something to wait for."""
    deadline = time.monotonic() + wait_s
    told = False
    while time.monotonic() < deadline:
        pid = starting_pid(paths)
        if pid is None:
            return None
        if said is not None and not told:
            said(waiting_line(paths, pid))
            told = True
        time.sleep(POLL_S)
        reply = ask()
        if reply is not None:
            return reply
    return None
