"""``gtui rm QUEUE.toml JOB|GLOB...``: take waiting or ended jobs out of the queue file (its
layout kept). A running job is refused (``gtui kill`` it first); of the jobs a pattern matched,
running ones are skipped. The jobs' history stays in ``.gtui/``: a removed job put back in the
file is not run again if it had ended, unless retried."""

from __future__ import annotations

import argparse
import sys

from gtui.commands._edits import ACTIVE, Jobs, tell_scheduler
from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.errors import GtuiError
from gtui.core.queue.writeback import remove_jobs
from gtui.core.units import plural


def removed_line(names: list[str], q: str, what: str = "") -> str:
    n = len(names)
    shown = ", ".join(names[:5]) + (f" and {n - 5} more" if n > 5 else "")
    return f"removed {n}{what} job{'s' if n != 1 else ''} from {q}" + (f": {shown}" if n else "")


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    q = paths.queue.name
    jobs = Jobs(paths)
    got = jobs.names.expand(list(ns.names))
    got.note()
    exact = set(ns.names)
    running = [n for n in got.names if jobs.state(n) in ACTIVE]
    refused = [n for n in running if n in exact]
    if refused:
        n = refused[0]
        raise GtuiError(
            f"{n} is {jobs.state(n)}: a running job is not removed; kill it first "
            f"(`gtui kill {q} {n}`); nothing was removed"
        )
    if running:
        print(
            f"skipped {plural(len(running), 'running job')} ({', '.join(running[:5])}); "
            f"`gtui kill {q} NAME` first",
            file=sys.stderr,
        )
    names = [n for n in got.names if n not in running]
    if not names:
        print(f"removed 0 jobs from {q}")
        return 0
    removed = remove_jobs(paths.queue, names, reader=jobs.names.reader)
    tell_scheduler(paths)
    print(removed_line(removed, q))
    return 0
