"""``gtui stop QUEUE.toml [--kill]``: stop the scheduler that runs the queue, a headless ``gtui
run`` or a dashboard's, and return once it has exited. Running jobs go on, and the next
scheduler re-adopts them; ``--kill`` kills them first (recorded as killed). With no scheduler
running there is nothing to stop; ``--kill`` then still kills the jobs a stopped scheduler left
running."""

from __future__ import annotations

import argparse
import asyncio
import time

import psutil

from gtui.commands._edits import ACTIVE, Jobs
from gtui.commands._jobcmd import act, queue_file
from gtui.commands.options import GlobalOptions
from gtui.core.control import client

EXIT_WAIT_S = 30.0  # a headless `gtui run` that released its queue ends within moments


def gone(pid: int) -> None:
    """Wait until a headless scheduler's process has ended (after its last log lines)."""
    deadline = time.monotonic() + EXIT_WAIT_S
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return  # ended; its parent has yet to reap it
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    q = paths.queue.name
    stopped = asyncio.run(client.stop(paths, kill=bool(ns.kill)))
    if stopped is not None:
        pid = stopped.pid
        if stopped.exits and pid is not None:
            gone(pid)
        after = (
            "its running jobs were killed"
            if ns.kill
            else f"running jobs keep running; the next `gtui run {q}` or `gtui {q}` re-adopts them"
        )
        print(f"stopped the scheduler (pid {pid}) of {q}; {after}")
        return 0
    print(f"no scheduler runs {q}: nothing to stop")
    if ns.kill:
        jobs = Jobs(paths)
        running = [n for n in jobs.jobs if jobs.state(n) in ACTIVE]
        if running:
            lines, _live = act(paths, "kill", running)
            for line in lines:
                print(line)
    return 0
