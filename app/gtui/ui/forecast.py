"""The dashboard's progress and estimates: it reads running jobs' logs itself (the
same files the log panel reads, in process or attached to a scheduler elsewhere) and runs the
core's estimator (gtui.core.sched.eta), so no event has to carry them. The reads run in a
thread, never on the event loop: a log on a stalled disk must not freeze the
screen. And, from the attempts history read at the same pace, the jobs whose ``mem`` their
last runs say is wrong (gtui.core.state.usage): the table's note says it, as the
detail view does."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from rich.text import Text

from gtui.core.api import JobView
from gtui.core.exec.base import off_loop
from gtui.core.joblog import reader
from gtui.core.model import ACTIVE_STATES, JobState
from gtui.core.progress import Progress, read_progress
from gtui.core.sched.eta import (
    Estimate,
    ProgressBook,
    estimate,
    runtimes_by_sweep,
    short_duration,
)
from gtui.core.state.history import done_runtimes
from gtui.core.state.usage import MemAdvice, PeakBook

RUNTIMES_EVERY_S = 60.0
RUNTIMES_AFTER_END_S = 2.0  # and again after a job ended done, at most this often
_ENDED = (JobState.DONE, JobState.FAILED, JobState.KILLED)
PARSES_PER_UPDATE = 40  # log tails parsed per update (every 2 s) at most
BAR_CELLS = 5


class UiForecast:
    """Progress readings of the running jobs on screen, and the estimates made of them."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.book = ProgressBook()
        self._sizes: dict[str, int] = {}
        self._runtimes: tuple[dict[int, float], dict[str, float]] | None = None
        self._runtimes_at = 0.0
        self._done = -1
        self._read_at: dict[str, float] = {}
        self._peaks = PeakBook(db)  # every job's recorded peaks (read a few rows at a time)
        self.mem_advice: dict[str, MemAdvice] = {}  # jobs whose mem their runs say is wrong
        self.running: list[tuple[str, str, int]] = []  # the last update's running jobs' logs

    def update(
        self,
        views: Iterable[JobView],
        now: float | None = None,
        counts: Mapping[JobState, int] | None = None,
    ) -> dict[str, Estimate]:
        """The estimates from the progress read so far. No log is read here (see ``read``):
        this runs on the event loop, where a log on a stalled disk would freeze the screen.

        ``counts``: the jobs by state, when the caller has them (the header's): then no walk
        over every job finds the ended ones, and while none runs, none looks for the running
        ones nor makes estimates (there are none to make). At 100,000 waiting jobs these walks
        were 0.2-0.3 s every 2 s of an idle dashboard."""
        now = time.time() if now is None else now
        views = list(views)
        if counts is None:
            done = sum(1 for v in views if v.record.state in _ENDED)
            active = True
        else:
            done = sum(counts.get(s, 0) for s in _ENDED)
            active = any(counts.get(s, 0) for s in ACTIVE_STATES)
        since = now - self._runtimes_at
        if (
            self._runtimes is None
            or since > RUNTIMES_EVERY_S
            or (done != self._done and since > RUNTIMES_AFTER_END_S)
        ):
            self._done = done  # a job ended: one more runtime to count, one more peak
            entry_of = {v.spec.name: v.spec.entry for v in views}
            self._runtimes = runtimes_by_sweep(done_runtimes(self.db), entry_of)
            self._peaks.refresh()
            self._runtimes_at = now
        # From the specs now (an edit of mem shows at once), the peaks as last read.
        peaks = self._peaks.peaks
        self.mem_advice = (
            {
                v.spec.name: a
                for v in views
                if v.spec.name in peaks and (a := self._peaks.advice(v.spec)) is not None
            }
            if peaks
            else {}
        )
        self.running = _running(views) if active else []  # what the next ``read`` reads
        live = {name for name, _, _ in self.running}
        for gone in set(self._sizes) - live:
            self.book.forget(gone)
            self._sizes.pop(gone, None)
            self._read_at.pop(gone, None)
        if not active:
            return {}  # what ``estimate`` finds with no job running (after a walk of them all)
        return estimate(views, self.book, self._runtimes, now)

    async def read(
        self, jobs: list[tuple[str, str, int]] | None = None, now: float | None = None
    ) -> bool:
        """Read the progress of the running jobs whose log grew, in a thread: a log on a
        stalled disk blocks that thread, not the screen (the caller starts no other read
        while one is out, so a stuck one piles up nothing). True when a job's progress was
        read: only then are the estimates worth making again before the next update."""
        now = time.time() if now is None else now
        jobs = self.running if jobs is None else jobs  # (name, log, attempt), as ``update`` saw
        if not jobs:
            return False
        sizes, read_at = dict(self._sizes), dict(self._read_at)
        got = await off_loop(lambda: _read_grown(jobs, sizes, read_at))
        seen = False
        for name, attempt, size, p in got:  # a job that ended meanwhile: the next update drops it
            self._sizes[name] = size
            self._read_at[name] = now
            if p is not None:
                self.book.observe(name, attempt, p, now)
                seen = True
        return seen


def _running(views: Iterable[JobView]) -> list[tuple[str, str, int]]:
    """(name, log, attempt) of the jobs whose log may grow."""
    return [
        (v.spec.name, v.record.log, v.record.attempt)
        for v in views
        if v.record.active and v.record.log
    ]


def _read_grown(
    jobs: list[tuple[str, str, int]], sizes: dict[str, int], read_at: dict[str, float]
) -> list[tuple[str, int, int, Progress | None]]:
    """(name, attempt, size, progress) of the logs whose size changed. The least recently read
    first, PARSES_PER_UPDATE at most: the screen stays quick with a thousand jobs printing."""
    grown: list[tuple[float, str, str, int, int]] = []  # (last read, name, log, size, try)
    for name, log, attempt in jobs:
        try:
            size = os.stat(log).st_size
        except OSError:
            continue
        if sizes.get(name) != size:
            grown.append((read_at.get(name, 0.0), name, log, size, attempt))
    return [
        (name, attempt, size, read_progress(reader(log), size))
        for _, name, log, size, attempt in sorted(grown)[:PARSES_PER_UPDATE]
    ]


def compact(seconds: float) -> str:
    """``~40m``, ``~2h10``, ``~30s``: an estimate in few cells."""
    s = max(0.0, seconds)
    if s < 60:
        return f"~{int(s)}s"
    m = round(s / 60)
    if m < 60:
        return f"~{m}m"
    h, m = divmod(m, 60)
    return f"~{h}h{m:02d}" if m else f"~{h}h"


def progress_cell(e: Estimate | None, now: float) -> Text:
    """The job table's progress column: ``███░░ 42% ~12m`` running, ``starts ~40m`` waiting."""
    if e is None:
        return Text("")
    if e.start_at is not None:
        return Text(f"starts {compact(e.start_at - now)}", style="dim italic")
    out = Text()
    if e.progress is not None:
        f = e.progress.fraction
        full = round(f * BAR_CELLS)
        out.append("█" * full, style="green")
        out.append("░" * (BAR_CELLS - full), style="dim")
        out.append(f" {int(f * 100):>2d}%")
    if e.finish_at is not None:
        out.append(f" {compact(e.finish_at - now)}", style="dim" if e.basis == "history" else "")
    return out


def detail_lines(e: Estimate | None, now: float) -> list[tuple[str, str]]:
    """The detail view's rows for an estimate: (label, text)."""
    if e is None:
        return []
    rows: list[tuple[str, str]] = []
    if e.progress is not None:
        p = e.progress
        rows.append(
            ("progress", f"{p.fraction * 100:.0f}%  ({p.text}, read from the log: {p.source})")
        )
    if e.finish_at is not None:
        at = time.strftime("%H:%M", time.localtime(e.finish_at))
        why = "its progress rate" if e.basis == "progress" else "its sweep's past runtimes"
        left = short_duration(e.finish_at - now)
        rows.append(("finishes", f"in {left}, about {at} (estimate, from {why})"))
    if e.start_at is not None:
        at = time.strftime("%H:%M", time.localtime(e.start_at))
        rows.append(
            (
                "starts",
                f"in {short_duration(e.start_at - now)}, about {at} (estimate: when "
                "running jobs' ETAs and its sweep's past runtimes free a GPU)",
            )
        )
    return rows
