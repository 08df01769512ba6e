"""What ``gtui move / rm / clean / edit`` share: the jobs' states now, and telling a running
scheduler that the queue file changed.

The file is written by the command itself, under the file's lock (gtui.core.queue.writeback),
whether or not a scheduler runs, as ``gtui add`` does; a running one is then told to read it at
once (``reload`` through the client API; with none, the next scheduler reads the file)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from gtui.commands._names import JobNames
from gtui.core.control.client import perform
from gtui.core.control.protocol import Reload, Status
from gtui.core.errors import GtuiError
from gtui.core.paths import QueuePaths

ACTIVE = frozenset({"running", "suspended"})
WAITING = frozenset({"queued", "held"})
ENDED = frozenset({"done", "failed", "killed", "blocked", "unknown"})


class Jobs:
    """The queue's jobs as the running scheduler (or the saved state) has them now."""

    def __init__(self, paths: QueuePaths) -> None:
        self.paths = paths
        reply, self.live = asyncio.run(perform(paths, Status()))
        status = reply.status
        self.jobs: dict[str, dict[str, Any]] = {str(j["name"]): j for j in status["jobs"]}
        self.names = JobNames(paths, list(self.jobs))

    def state(self, name: str) -> str:
        job = self.jobs.get(name)
        return str(job["state"]) if job else "gone"


def tell_scheduler(paths: QueuePaths) -> bool:
    """Have a running scheduler take the file now; whether one did."""
    try:
        _result, live = asyncio.run(perform(paths, Reload()))
    except GtuiError as e:
        print(f"(the scheduler did not take it yet: {e}; it will within one poll)", file=sys.stderr)
        return True
    return live
