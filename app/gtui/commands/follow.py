"""``gtui follow QUEUE.toml JOB [-n LINES]``: a job's log as it grows, until the job ends; exit 0
when it ended done, 1 otherwise. A job that has not started yet is waited for (said on stderr);
a job that is retried is followed into its next attempt. Works the same under a dashboard, a
headless scheduler, or none (then the job starts when a scheduler does)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any, BinaryIO

from gtui.commands._logs import LogPrinter, tail_offset
from gtui.commands._names import JobNames
from gtui.commands.log import waiting_words
from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.control.client import JobsNow, watch_jobs
from gtui.core.joblog import chunks
from gtui.core.paths import QueuePaths

ENDED = frozenset({"done", "failed", "killed", "blocked", "unknown"})
WAITING = frozenset({"queued", "held"})
TICK_S = 0.1  # how often the log is read for new bytes


def say(text: str) -> None:
    print(f"follow: {text}", file=sys.stderr, flush=True)


def end_words(job: dict[str, Any]) -> str:
    """How a job ended, in one line: ``failed (exit 1): CUDA OOM: ...``."""
    state = str(job["state"])
    how = ""
    if job.get("signal") is not None:
        how = f" (signal {job['signal']})"
    elif job.get("exit_code") is not None:
        how = f" (exit {job['exit_code']})"
    diag = job.get("diagnosis")
    why = ""
    if state == "blocked":
        why = f": {job.get('reason') or 'a job it waits for did not end done'}"
    elif diag and state != "done":
        why = f": {diag['kind']}" + (f": {diag['line']}" if diag.get("line") else "")
    return f"{state}{how}{why}"


class Follower:
    """One job's log files, attempt after attempt, copied to the printer as they grow."""

    def __init__(self, name: str, lines: int | None, printer: LogPrinter) -> None:
        self.name = name
        self.lines = lines
        self.printer = printer
        self.path: Path | None = None
        self.file: BinaryIO | None = None
        self.attempt = 0

    def take(self, job: dict[str, Any]) -> None:
        """The job's current log: switch to it when a new attempt has started."""
        log = job.get("log")
        if not log or (self.path is not None and Path(log) == self.path):
            return
        try:
            f = Path(log).open("rb")  # noqa: SIM115 - kept open across ticks; close() closes it
        except FileNotFoundError:
            return  # created as the job starts: the next tick finds it
        if self.file is not None:
            self.pump()
            self.file.close()
            self.printer.close()
            say(f"{self.name}: attempt {job.get('attempt')} started")
        elif self.lines is not None:
            f.seek(tail_offset(Path(log), self.lines))
        self.path, self.file, self.attempt = Path(log), f, int(job.get("attempt") or 0)

    def pump(self) -> None:
        if self.file is None:
            return
        for chunk in chunks(self.file):
            self.printer.feed(chunk)

    def close(self) -> None:
        self.pump()
        self.printer.close()
        if self.file is not None:
            self.file.close()
            self.file = None


async def follow(paths: QueuePaths, word: str, lines: int | None, printer: LogPrinter) -> int:
    q = paths.queue.name
    async with contextlib.aclosing(watch_jobs(paths)) as updates:
        now: JobsNow = await anext(updates)
        name = JobNames(paths, list(now.jobs)).one(word)
        follower = Follower(name, lines, printer)
        told: tuple[str, bool] | None = None  # the state last said, and whether a scheduler ran
        pending = asyncio.ensure_future(anext(updates))
        try:
            while True:
                job = now.jobs.get(name)
                if job is None:
                    follower.close()
                    say(f"{name} is no longer in {q} (removed)")
                    return 1
                state = str(job["state"])
                if state not in WAITING:  # a job queued again shows its next attempt's log
                    follower.take(job)
                if state in ENDED:
                    follower.close()
                    if follower.path is None and state != "done":
                        say(f"{name} ended before it started: {end_words(job)}")
                    elif state != "done":
                        say(f"{name} {end_words(job)}")
                    return 0 if state == "done" else 1
                if state in WAITING and told != (state, now.live):
                    started = follower.path is not None
                    what = "is waiting again" if started else "has not started yet"
                    nobody = (
                        ""
                        if now.live
                        else f"; no scheduler runs {q}: it starts when one does (`gtui run {q}`)"
                    )
                    say(f"{name} {what} ({waiting_words(job)}); waiting for it{nobody}")
                    told = (state, now.live)
                elif state not in WAITING:
                    told = None
                follower.pump()
                done, _ = await asyncio.wait({pending}, timeout=TICK_S)
                if done:
                    now = pending.result()
                    pending = asyncio.ensure_future(anext(updates))
        finally:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
            follower.close()


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    return asyncio.run(follow(paths, ns.job, ns.lines, LogPrinter()))
