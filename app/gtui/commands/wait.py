"""``gtui wait QUEUE.toml [JOB|GLOB...] [--timeout 2h]``: block until the jobs named (or every
job of the queue, those added meanwhile included) have ended: done, failed, killed, blocked by a
dependency that did not end done, or unknown. Exit 0 when all are done, else 1, with one line
per job that did not end done; ``--timeout`` exits 124, as ``timeout(1)`` does.

It follows the running scheduler's events; with none running it reads the saved state (a job that
already ended is found at once), says so, and waits for a scheduler to start."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from typing import Any

from gtui.commands._names import JobNames
from gtui.commands.follow import ENDED, end_words
from gtui.commands.log import waiting_words
from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.control.client import JobsNow, watch_jobs
from gtui.core.errors import GtuiError
from gtui.core.paths import QueuePaths
from gtui.core.units import UnitError, format_duration, parse_duration_s, plural

EXIT_TIMEOUT = 124  # as timeout(1)


def say(text: str) -> None:
    print(f"wait: {text}", file=sys.stderr, flush=True)


def _list(names: list[str], jobs: dict[str, dict[str, Any]], limit: int = 5) -> str:
    shown = []
    for n in names[:limit]:
        job = jobs.get(n)
        shown.append(f"{n} ({waiting_words(job) if job else 'removed'})")
    return ", ".join(shown) + (f" and {len(names) - limit} more" if len(names) > limit else "")


async def wait(paths: QueuePaths, words: list[str], timeout_s: float | None) -> int:
    q = paths.queue.name
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    targets: list[str] | None = None
    said_offline = False
    now: JobsNow | None = None
    async with contextlib.aclosing(watch_jobs(paths)) as updates:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                now = await asyncio.wait_for(anext(updates), left)
            except TimeoutError:
                jobs = now.jobs if now is not None else {}
                names = targets if targets is not None else list(jobs)
                open_ = [n for n in names if n in jobs and jobs[n]["state"] not in ENDED]
                t = timeout_s or 0.0
                shown = f"{t:g}s" if t < 60 else format_duration(t)
                n_open = plural(len(open_), "job")
                say(f"timed out after {shown}: {n_open} not ended: {_list(open_, jobs)}")
                return EXIT_TIMEOUT
            jobs = now.jobs
            if words and targets is None:
                got = JobNames(paths, list(jobs)).expand(words)
                got.note()
                targets = got.names
            names = targets if targets is not None else list(jobs)
            open_ = [n for n in names if n in jobs and jobs[n]["state"] not in ENDED]
            if not open_:
                return report(names, jobs)
            if not now.live and not said_offline:
                say(
                    f"no scheduler runs {q}; {plural(len(open_), 'job')} not ended: "
                    f"{_list(open_, jobs)}."
                    f" Waiting for a scheduler to run them (`gtui run {q}`)"
                )
            said_offline = not now.live


def report(names: list[str], jobs: dict[str, dict[str, Any]]) -> int:
    """One line per job that did not end done (stdout); a count on stderr."""
    counts: dict[str, int] = {}
    for n in names:
        job = jobs.get(n)
        state = str(job["state"]) if job else "removed"
        counts[state] = counts.get(state, 0) + 1
        if job is None:
            print(f"removed {n}: no longer in the queue", flush=True)
        elif state != "done":
            print(f"{state} {n}{end_words(job)[len(state) :]}", flush=True)
    total = len(names)
    if not total:
        say("no job to wait for")
        return 0
    summary = ", ".join(f"{v} {k}" for k, v in counts.items())
    say(f"{total} job{'s' if total != 1 else ''} ended: {summary}")
    return 0 if counts.get("done", 0) == total else 1


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    timeout_s = None
    if ns.timeout is not None:
        try:
            timeout_s = parse_duration_s(ns.timeout)
        except UnitError as e:
            raise GtuiError(f"--timeout: {e}") from None
    return asyncio.run(wait(paths, list(ns.names or []), timeout_s))
