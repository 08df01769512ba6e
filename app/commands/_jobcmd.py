"""What ``gtui kill / pause / resume / retry`` share: the running scheduler first, else the store.

The scheduler is asked through its control socket, so the command runs the engine's own code.
With no scheduler, the same engine commands run with dispatch off (app/core/offline.py) under
the queue lock. A scheduler that holds the lock but does not answer (still starting, or its
socket failed) is waited for a few seconds, then reported (exit 3).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from gtui.cli import GlobalOptions
from gtui.core.control import call
from gtui.core.errors import EXIT_LOCKED, GtuiError, LockedError
from gtui.core.lock import QueueLock
from gtui.core.paths import QueuePaths, queue_paths

# How long a scheduler that holds the lock may take to answer on its socket.
ANSWER_WAIT_S = 5.0
# kill --wait waits for SIGTERM, then kill_grace, then SIGKILL: give it its time.
KILL_TIMEOUT_S = 3600.0
TIMEOUT_S = 60.0

_DONE = {
    "kill": "killed {}",
    "pause": "paused {}",
    "resume": "resumed {}",
    "retry": "queued {} again",
}
_KILLING = (
    "killing {}: SIGTERM sent, SIGKILL after kill_grace if it still runs "
    "(gtui kill --wait waits for the end)"
)


def queue_file(arg: str) -> QueuePaths:
    """The queue's paths; the file must exist (a typo should not act on nothing)."""
    paths = queue_paths(arg)
    if not paths.queue.is_file():
        raise GtuiError(f"{arg}: no such queue file; give the path of your queue.toml")
    return paths


def act(
    paths: QueuePaths, verb: str, names: list[str], *, wait: bool = True
) -> tuple[list[str], bool]:
    """Do ``verb`` on ``names`` (no names: the whole queue, for pause/resume).

    ``wait=False`` (kill): the scheduler answers once SIGTERM is sent, and the grace and the
    SIGKILL go on there; a person should not stare at a blocked prompt for the whole grace.
    With no scheduler the kill always waits: this process is the one that sends the SIGKILL.
    Returns the lines to print and whether a scheduler did it (False: the saved state changed).
    """
    op = verb if names else f"{verb}_queue"
    kw: dict[str, object] = {"names": names} if names else {}
    if verb == "kill" and not wait:
        kw["wait"] = False
    timeout = KILL_TIMEOUT_S if verb == "kill" and wait else TIMEOUT_S
    deadline = time.monotonic() + ANSWER_WAIT_S
    while True:
        reply = call(paths, op, timeout=timeout, **kw)
        if reply is not None:
            if not names:
                return [f"{verb}d the queue"], True
            if verb == "kill" and not wait:
                return [_KILLING.format(n) for n in names], True
            return [_DONE[verb].format(n) for n in names], True
        from gtui.core import offline

        try:
            return asyncio.run(offline.apply(paths, op, names)), False
        except LockedError:
            if time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            pid = QueueLock(paths).holder()
            if pid is None:
                continue  # it just stopped: the store is ours now
            who = f"a gtui (pid {pid})" if pid else "a gtui"
            raise GtuiError(
                f"{who} runs {paths.queue.name} but does not answer on "
                f"{paths.socket}; try again in a moment",
                EXIT_LOCKED,
            ) from None


def main(verb: str, ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    names = list(dict.fromkeys(ns.names or []))  # a name given twice is acted on once
    lines, live = act(paths, verb, names, wait=bool(getattr(ns, "wait", True)))
    for line in lines:
        print(line)
    if not live:
        name = Path(ns.queue).name
        print(
            f"(no scheduler runs {name}: its saved state changed; it applies when one starts)",
            file=sys.stderr,
        )
    return 0
