"""``gtui events QUEUE.toml``: the queue's transitions as JSON lines, one per change of a job's
state (or attempt), for scripts and other tools to follow; it runs until interrupted.

Each line has ``time`` (Unix seconds) and ``type``:

- ``"job"``: ``from`` (the state before; null for a job new to the queue), then the job as
  ``gtui status --json`` has it (``name``, ``state``, ``attempt``, ``gpus``, ``exit_code``,
  ``signal``, ``log``, ``reason``, ``diagnosis``, ...); ``state`` is ``"removed"`` for a job
  taken out of the queue;
- ``"queue"``: ``paused`` (true or false);
- ``"scheduler"``: ``running`` and ``pid``, when a scheduler starts or stops. While none runs the
  saved state is followed (a ``gtui kill`` then still shows); a scheduler reached later
  replays its events since then, so a job it started and ended before it was reached still
  shows each state.

A job line that cannot show every state the job went through says so with ``"missed": true``:
it ran, or ran again, unseen (its ``attempt`` changed other than by one start seen as
``running``: a whole ``gtui run`` between two reads of the saved state, or a scheduler that
no longer had its events), or the scheduler's events were lost before it. No other line
carries ``missed``.

The first view is not printed: only what changes after it (``gtui status --json`` gives a view)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any, TextIO

from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.control.client import watch_jobs
from gtui.core.paths import QueuePaths

RUNNING = frozenset({"running", "suspended"})


def skipped(before: tuple[str, int] | None, now: tuple[str, int], job: dict[str, Any]) -> bool:
    """Whether a job's change from ``before`` to ``now`` (state, attempt) hides states: an
    attempt begins as the job starts running, so a new attempt seen other than as one start
    (or one launch that failed, which never ran) ran, at least in part, unseen."""
    state, attempt = now
    was_state, was_attempt = before if before is not None else ("", 0)
    if attempt == was_attempt:
        return False
    if attempt != was_attempt + 1 or was_state in RUNNING:
        return True
    never_ran = (job.get("diagnosis") or {}).get("kind") == "launch" and state not in RUNNING
    return state not in RUNNING and not never_ran


def emit(out: TextIO, obj: dict[str, Any]) -> None:
    out.write(json.dumps({"time": round(time.time(), 3), **obj}, separators=(",", ":")) + "\n")
    out.flush()


async def events(paths: QueuePaths, out: TextIO) -> int:
    q = paths.queue.name
    last: dict[str, tuple[str, int]] = {}
    first = True
    live: tuple[bool, int | None] | None = None
    paused: bool | None = None
    async for now in watch_jobs(paths, batch=False):
        if live != (now.live, now.pid):
            if live is not None or now.live:
                emit(out, {"type": "scheduler", "running": now.live, "pid": now.pid})
            if not now.live:
                print(
                    f"events: no scheduler runs {q}; following its saved state until one starts",
                    file=sys.stderr,
                    flush=True,
                )
            live = (now.live, now.pid)
        if paused is not None and now.paused != paused:
            emit(out, {"type": "queue", "paused": now.paused})
        paused = now.paused
        if now.changed is None:
            names = [*now.jobs, *(n for n in last if n not in now.jobs)]
        elif len(now.changed) == 1:
            names = list(now.changed)
        else:  # in queue order, then the ones that left it
            names = [n for n in now.jobs if n in now.changed]
            names += [n for n in now.changed if n not in now.jobs]
        for name in names:
            job = now.jobs.get(name)
            before = last.get(name)
            if job is None:
                if before is not None:
                    del last[name]
                    emit(out, {"type": "job", "from": before[0], "name": name, "state": "removed"})
                continue
            key = (str(job["state"]), int(job.get("attempt") or 0))
            if key == before:
                continue
            last[name] = key
            if not first:
                line: dict[str, Any] = {"type": "job", "from": before[0] if before else None}
                if now.lost or skipped(before, key, job):
                    line["missed"] = True
                emit(out, {**line, **job})
        first = False
    return 0


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    return asyncio.run(events(queue_file(ns.queue), sys.stdout))
