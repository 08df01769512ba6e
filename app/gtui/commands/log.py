"""``gtui log QUEUE.toml JOB [--attempt N] [-n LINES]``: a job's log, its latest attempt's unless
``--attempt`` names another. To a terminal escapes are made safe as in the dashboard; piped, the
bytes are the job's own (gtui.commands._logs)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from gtui.commands._logs import LogPrinter, attempt_log, tail_offset
from gtui.commands._names import JobNames
from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.control.client import perform
from gtui.core.control.protocol import Status
from gtui.core.errors import GtuiError
from gtui.core.joblog import chunks
from gtui.core.paths import QueuePaths


def find_job(paths: QueuePaths, word: str) -> tuple[str, dict[str, Any], bool]:
    """The one job ``word`` names, as the running scheduler (or the saved state) has it."""
    reply, live = asyncio.run(perform(paths, Status()))
    status = reply.status
    name = JobNames.of_status(paths, status).one(word)
    job = next(j for j in status["jobs"] if j["name"] == name)
    return name, job, live


def waiting_words(job: dict[str, Any]) -> str:
    reason = str(job.get("reason") or "")
    return f"{job['state']}: {reason}" if reason else str(job["state"])


def print_log(path: Path, lines: int | None, printer: LogPrinter) -> int:
    """Print the file (its last ``lines`` lines); the offset reached."""
    try:
        with path.open("rb") as f:
            if lines is not None:
                f.seek(tail_offset(path, lines))
            for chunk in chunks(f):
                printer.feed(chunk)
            return f.tell()
    except FileNotFoundError:
        raise GtuiError(f"the log {path} is gone (deleted or moved)") from None
    finally:
        printer.close()


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    name, job, _live = find_job(paths, ns.job)
    path = attempt_log(paths, job, ns.attempt)
    if path is None:
        q = paths.queue.name
        print(
            f"{name} has not started yet ({waiting_words(job)}): it has no log; "
            f"`gtui follow {q} {name}` waits for it",
            file=sys.stderr,
        )
        return 1
    print_log(path, ns.lines, LogPrinter())
    return 0
