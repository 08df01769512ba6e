"""``gtui clean QUEUE.toml [--failed]``: take the jobs that ended done out of the queue file in
one go (with ``--failed``, also those that failed, were killed, blocked or ended unknown), so a
long sweep's file stays short. A job that a remaining job waits for (``after``) stays, as does
one combination of a several-key matrix whose others stay. History is kept, as with ``rm``."""

from __future__ import annotations

import argparse
import sys

from gtui.commands._edits import ENDED, Jobs, tell_scheduler
from gtui.commands.options import GlobalOptions, queue_file
from gtui.commands.rm import removed_line
from gtui.core.queue.queuefile import QueueReader, load_queue
from gtui.core.queue.writeback import removal_plan, remove_jobs


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    q = paths.queue.name
    jobs = Jobs(paths)
    wanted = ENDED if ns.failed else frozenset({"done"})
    reader = QueueReader()  # the removal's check of the same text reuses this parse
    queue = load_queue(paths.queue, reader=reader)
    candidates = [j.name for j in queue.jobs if jobs.state(j.name) in wanted]
    names, kept = removal_plan(queue, candidates)
    for name, why in list(kept.items())[:5]:
        print(f"kept {name}: {why}", file=sys.stderr)
    if len(kept) > 5:
        print(f"kept {len(kept) - 5} more", file=sys.stderr)
    removed = remove_jobs(paths.queue, names, reader=reader) if names else []
    if removed:
        tell_scheduler(paths)
    what = " ended" if ns.failed else " done"
    print(removed_line(removed, q, what))
    return 0
