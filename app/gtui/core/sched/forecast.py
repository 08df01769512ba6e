"""The scheduler's forecasts: it reads running jobs' progress as their logs grow and puts the
estimates (progress, finish and start times) into ``gtui status --json``. The arithmetic is
in ``eta`` (pure). A job's end reaches it as a subscriber of the runs' bus (``RunEnded``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from gtui.core.api import JobView
from gtui.core.exec.base import Executor, off_loop
from gtui.core.model import JobRecord
from gtui.core.paths import QueuePaths
from gtui.core.progress import Progress, read_progress
from gtui.core.sched.eta import Estimate, ProgressBook, estimate, runtimes_by_sweep
from gtui.core.sched.runs import RunEnded
from gtui.core.state.book import JobBook
from gtui.core.state.history import done_runtimes

PROGRESS_EVERY_S = 2.0  # a growing log's tail is parsed at most this often per job
RUNTIMES_EVERY_S = 60.0  # past runtimes are read from the history at least this often
RUNTIMES_AFTER_END_S = 2.0  # and again after a job ended done, at most this often
PARSES_PER_S = 40  # log tails parsed per second at most (about 1.5 ms each)


class Forecast:
    """Each running job's progress as last read, and the past runtimes the estimates use."""

    def __init__(self, book: JobBook, executor: Executor, paths: QueuePaths) -> None:
        self._book = book
        self._executor = executor
        self.paths = paths
        self._progress = ProgressBook()
        self._progress_at: dict[str, float] = {}
        self._runtimes: tuple[dict[int, float], dict[str, float]] | None = None
        self._runtimes_at = -RUNTIMES_EVERY_S - 1.0  # read at the first status
        self._runtimes_stale = True
        self._parse_window = 0.0
        self._parses = 0
        self._progress_reading: set[str] = set()  # jobs whose log is being read now

    def read_progress(self, name: str, rec: JobRecord, size: int) -> bool:
        """The log of running job ``name`` is ``size`` bytes, unread at that size: read its
        progress (throttled per job, and to :data:`PARSES_PER_S` in all: 1,000 chatty jobs
        must not take the loop). The read runs in a thread (a log on a stalled disk must not
        freeze the scheduler, nor a dashboard on the same loop), one per job at a time: a stuck
        one piles up nothing. False when it was not read now: the caller asks again at its next
        look, grown or not (a job that prints its last progress line and goes quiet must not
        keep the reading from before it)."""
        if name in self._progress_reading:
            return False
        now = time.monotonic()
        if now - self._progress_at.get(name, -PROGRESS_EVERY_S) < PROGRESS_EVERY_S:
            return False
        if now - self._parse_window >= 1.0:
            self._parse_window, self._parses = now, 0
        if self._parses >= PARSES_PER_S:
            return False
        self._parses += 1
        self._progress_at[name] = now
        log = rec.log
        if not log:
            return True
        executor, attempt = self._executor, rec.attempt
        self._progress_reading.add(name)
        read = off_loop(lambda: read_progress(lambda off, n: executor.read_log(log, off, n), size))
        read.add_done_callback(lambda f: self._progress_read(name, rec, log, attempt, f))
        return True

    def _progress_read(
        self,
        name: str,
        rec: JobRecord,
        log: str,
        attempt: int,
        read: asyncio.Future[Progress | None],
    ) -> None:
        self._progress_reading.discard(name)
        if read.cancelled() or read.exception() is not None:
            return
        p = read.result()
        if p is not None and rec.active and rec.log == log and rec.attempt == attempt:
            self._progress.observe(name, attempt, p, time.time())  # not ended meanwhile

    def on_run_ended(self, ended: RunEnded) -> None:
        """A job's run ended (the runs' bus): its progress is forgotten, and an end with exit
        code 0 is a new runtime to count."""
        name = ended.record.name
        self._progress.forget(name)
        self._progress_at.pop(name, None)
        if ended.exited_ok:
            self._runtimes_stale = True

    def estimates(self, views: Sequence[JobView]) -> dict[str, Estimate]:
        now = time.time()
        since = now - self._runtimes_at
        if since > RUNTIMES_EVERY_S or (self._runtimes_stale and since > RUNTIMES_AFTER_END_S):
            entry_of = {n: s.entry for n, s in self._book.specs.items()}
            self._runtimes = runtimes_by_sweep(done_runtimes(self.paths.db), entry_of)
            self._runtimes_at, self._runtimes_stale = now, False
        assert self._runtimes is not None
        return estimate(views, self._progress, self._runtimes, now)

    def add_estimates(self, jobs: list[dict[str, Any]], views: Sequence[JobView]) -> None:
        """Put each job's progress and estimated finish / start into its status dict."""
        est = self.estimates(views)
        if not est:
            return
        now = time.time()
        for j in jobs:
            e = est.get(j["name"])
            if e is None:
                continue
            estimate_json(j, e, now)


def estimate_json(job: dict[str, Any], e: Estimate, now: float) -> None:
    """The ``status --json`` fields of an estimate (see docs/progress.md,
    "How far, and when"): every time in them is an estimate, ``estimated`` says so."""
    if e.progress is not None:
        job["progress"] = round(e.progress.fraction, 4)
        job["progress_text"] = e.progress.text
    if e.finish_at is not None:
        job["finish_at"] = round(e.finish_at, 1)
        job["eta_s"] = round(max(0.0, e.finish_at - now), 1)
        job["estimate_basis"] = e.basis
    if e.start_at is not None:
        job["starts_at"] = round(e.start_at, 1)
        job["starts_in_s"] = round(max(0.0, e.start_at - now), 1)
