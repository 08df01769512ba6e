"""``gtui preempt QUEUE.toml JOB [--dry-run]``: make room now for a waiting job, as the
dashboard's key does: the running scheduler stops the fewest preemptible jobs of lower
priority that free enough (each gets its signal and grace, then is queued again as
``preempted``); the job starts once their memory is free."""

from __future__ import annotations

import argparse
import asyncio

from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.control.client import perform
from gtui.core.control.protocol import Preempt


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    reply, _live = asyncio.run(perform(paths, Preempt(ns.job, bool(ns.dry_run))))
    victims = ", ".join(reply.names)
    if ns.dry_run:
        print(f"to make room for {ns.job}, gtui would preempt: {victims}")
    else:
        print(f"preempting {victims} for {ns.job}: it starts once their memory is free")
    return 0
