"""``gtui doctor QUEUE.toml [--repair]``: check a queue's state database against what its jobs
left on disk, and rebuild it.

Without ``--repair`` it only reads: is the database whole (a damaged file, one emptied to 0
bytes), is there a backup and of when, and which jobs the database is behind on (their logs,
exit-status files or running processes are of a later attempt than their record says). Exit 0
when there is nothing to repair, 1 when there is. ``--repair`` does what a scheduler does at its
start (gtui.core.state.backup, gtui.core.sched.recovery), under the queue lock, with no
scheduler running: a damaged file is kept aside and rebuilt from its backup, every record behind
its job's traces is taken from them, and a fresh backup is written. Nothing is started.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.control.offline import StoreClient
from gtui.core.paths import QueuePaths
from gtui.core.queue.queuefile import load_queue
from gtui.core.state.backup import backup_path, damage
from gtui.core.state.evidence import Trace, gather
from gtui.core.state.lock import QueueLock
from gtui.core.state.store import StoreError, open_store_readonly


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    q = paths.queue.name
    if ns.repair:
        words = asyncio.run(StoreClient(paths).repair())
        for line in words:
            print(line)
        if not words:
            print(f"nothing to repair: the state database of {q} agrees with its jobs' traces")
        return 0
    problems = check(paths)
    if not problems:
        print(
            f"ok: the state database of {q} is whole and agrees with its jobs' logs, "
            "exit-status files and processes"
        )
        return 0
    for line in problems:
        print(line)
    holder = QueueLock(paths).holder()
    if holder:
        print(f"a scheduler (pid {holder}) runs {q}: stop it (`gtui stop {q}`), then repair")
    else:
        print(
            f"`gtui doctor {q} --repair` rebuilds it (a damaged file is kept aside); "
            "`gtui run` does so too, at its start"
        )
    return 1


def check(paths: QueuePaths) -> list[str]:
    """What a repair would change, in lines; none: nothing. Reads only."""
    out: list[str] = []
    db, bak = paths.db, backup_path(paths.db)
    base: Path | None = db  # what a repair starts from
    try:
        why = damage(db)
    except StoreError as e:
        return [f"cannot check the state database: {e}"]
    if why is not None:
        out.append(f"state database {db}: damaged ({why})")
        if bak.is_file() and damage(bak) is None:
            taken = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(bak.stat().st_mtime))
            out.append(f"backup {bak}: whole, of {taken}: the repair starts from it")
            base = bak
        else:
            out.append(f"backup {bak}: none usable: the repair starts from the jobs' traces")
            base = None
    queue = load_queue(paths.queue)
    names = [j.name for j in queue.jobs]
    traces = gather(names, paths.run_dir, paths.log_dir(queue.settings.log_dir))
    saved: dict[str, int] = {}
    states: dict[str, str] = {}
    if base is not None:
        store = open_store_readonly(base)
        if store is not None:
            with store:
                saved = store.attempts()
                behind = [n for n, t in traces.items() if t.attempt > saved.get(n, 0)]
                states = {n: r.state.value for n, r in store.get_many(behind).items()}
    lines = [
        _line(t, states.get(n), saved.get(n, 0))
        for n, t in traces.items()
        if t.attempt > saved.get(n, 0)
    ]
    if lines:
        out.append(
            f"{len(lines)} job(s) ran further than the state database says (their logs, "
            "exit-status files and processes):"
        )
        out.extend(lines)
    return out


def _line(trace: Trace, state: str | None, attempt: int) -> str:
    said = f"{state}, attempt {attempt}" if state else "never ran"
    n = trace.attempt
    if trace.wrapper is not None:
        found = f"attempt {n} is running (pid {trace.wrapper.pid}): to re-adopt"
    elif (status := trace.status) is not None:
        how = f"exit {status.exit_code}" if status.signal is None else f"signal {status.signal}"
        found = f"attempt {n} ended ({how}): to record"
    else:
        found = f"attempt {n} left a log but no exit status: to record as unknown"
    return f"  {trace.name}: the database says {said}; {found}"
