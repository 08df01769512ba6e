"""When a running job will finish and when a waiting one will start: estimates.

Pure: progress readings, job views and past runtimes in, times out. The engine (for
``gtui status --json``) and the dashboard (for its table and detail view) run the same code.

- A running job's finish: from how fast its progress moved since it was first read in this
  attempt (two readings at least :data:`MIN_SPAN_S` apart), else from its elapsed time over its
  fraction; with no progress in its log, from the median runtime of the finished runs of its
  sweep (the same ``[[jobs]]`` table), else unknown.
- A waiting job's start: the queue is played forward. Each running job of ours frees the slots
  it holds (one per GPU) at its finish; waiting jobs, by priority then queue order, take the
  earliest slots they need, after the jobs they come ``after``, and hold them for the median
  runtime of their sweep. Only the capacity our own jobs hold now is counted: a GPU that is free
  yet not taken is kept from us by something else (other users, the reserve), so it promises
  nothing. Any unknown on the way (a runtime never seen, a suspended job) makes the estimates
  behind it unknown rather than wrong. Only the first :data:`MAX_STARTS` waiting jobs get one.
  Every figure is an estimate and is shown as one
  ("starts in ~40 min").
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gtui.core.api import JobView
from gtui.core.gcpause import paused_gc
from gtui.core.model import JobState
from gtui.core.progress import Progress

MIN_SPAN_S = 10.0  # two progress readings closer than this say too little about the rate
MAX_STARTS = 1000  # waiting jobs given a start estimate, in the order they would start


@dataclass
class Track:
    """One attempt's progress readings: the first (for the rate) and the last."""

    attempt: int
    first_at: float
    first: float
    last_at: float
    progress: Progress


@dataclass
class ProgressBook:
    """The progress of running jobs, fed with readings of their logs."""

    tracks: dict[str, Track] = field(default_factory=dict)

    def observe(self, name: str, attempt: int, progress: Progress, now: float) -> None:
        t = self.tracks.get(name)
        if t is None or t.attempt != attempt or progress.fraction < t.progress.fraction - 1e-9:
            # A new attempt, or progress that went back (a new bar): measure the rate anew.
            self.tracks[name] = Track(attempt, now, progress.fraction, now, progress)
            return
        t.last_at, t.progress = now, progress

    def forget(self, name: str) -> None:
        self.tracks.pop(name, None)

    def progress(self, name: str, attempt: int) -> Progress | None:
        t = self.tracks.get(name)
        return t.progress if t is not None and t.attempt == attempt else None

    def remaining_s(
        self, name: str, attempt: int, started_at: float | None, now: float
    ) -> float | None:
        """Seconds left for the job's attempt, from its progress alone (None: cannot say)."""
        t = self.tracks.get(name)
        if t is None or t.attempt != attempt:
            return None
        f = t.progress.fraction
        if f >= 1.0:
            return 0.0
        since = max(0.0, now - t.last_at)
        span = t.last_at - t.first_at
        if span >= MIN_SPAN_S and f > t.first:
            left = (1.0 - f) * span / (f - t.first)
        elif started_at is not None and f > 0 and t.last_at > started_at:
            left = (t.last_at - started_at) * (1.0 - f) / f
        else:
            return None
        return max(0.0, left - since)


def runtimes_by_sweep(
    runs: Iterable[tuple[str, float]], entry_of: Mapping[str, int]
) -> tuple[dict[int, float], dict[str, float]]:
    """Median runtime of the runs that ended done ((name, seconds), as
    ``history.done_runtimes`` gives them): by ``[[jobs]]`` entry (a sweep), and by name."""
    by_entry: dict[int, list[float]] = {}
    by_name: dict[str, list[float]] = {}
    for name, d in runs:
        by_name.setdefault(name, []).append(d)
        if name in entry_of:
            by_entry.setdefault(entry_of[name], []).append(d)
    return (
        {k: statistics.median(v) for k, v in by_entry.items()},
        {k: statistics.median(v) for k, v in by_name.items()},
    )


@dataclass(frozen=True)
class Estimate:
    """What is known ahead for one job. Times are epoch seconds; all of it is an estimate."""

    progress: Progress | None = None
    finish_at: float | None = None  # running jobs
    start_at: float | None = None  # waiting jobs
    basis: str = ""  # "progress" | "history": what the finish rests on


def estimate(
    views: Sequence[JobView],
    book: ProgressBook,
    runtimes: tuple[dict[int, float], dict[str, float]],
    now: float,
) -> dict[str, Estimate]:
    """Estimates for the running and waiting jobs among ``views`` (see the module docstring)."""
    by_entry, by_name = runtimes

    def typical(v: JobView) -> float | None:
        return by_name.get(v.spec.name, by_entry.get(v.spec.entry))

    out: dict[str, Estimate] = {}
    ends: dict[str, float | None] = {}  # when each job is expected to have ended
    slots: list[tuple[float, int]] = []  # heap of (free at, tie-break); unknown ones are out
    unknown_slots = 0
    queued: list[tuple[int, int, JobView]] = []  # (-priority, order, view): placement order
    queued_state, running, suspended = JobState.QUEUED, JobState.RUNNING, JobState.SUSPENDED
    # No property in these walks: a 100,000-job queue's status walks it. Nothing running:
    # nothing to start after (below), so the 100,000 waiting jobs' tuples are not made.
    active = [v for v in views if v.record.state is running or v.record.state is suspended]
    if not active:
        return out
    with paused_gc():  # 100,000 small tuples: see JobBook.views
        for v in views:
            if v.record.state is queued_state:
                queued.append((-v.spec.priority, v.order, v))
    for v in active:
        rec = v.record
        name = v.spec.name
        progress = book.progress(name, rec.attempt)
        finish: float | None = None
        basis = ""
        if rec.state == JobState.RUNNING:
            left = book.remaining_s(name, rec.attempt, rec.started_at, now)
            if left is not None:
                finish, basis = now + left, "progress"
            else:
                run = typical(v)
                if run is not None and rec.started_at is not None:
                    finish, basis = max(now, rec.started_at + run), "history"
        out[name] = Estimate(progress=progress, finish_at=finish, basis=basis)
        ends[name] = finish
        for _ in range(max(1, len(rec.gpus)) if rec.gpus else 0):
            if finish is None:
                unknown_slots += 1
            else:
                heapq.heappush(slots, (finish, len(slots)))
    # The first MAX_STARTS waiting jobs in placement order: beyond them an estimate says little
    # ("starts in ~3 days") and the walk would cost a 100,000-job queue's status 0.4 s.
    waiting = [t[2] for t in heapq.nsmallest(MAX_STARTS, queued)]
    blocked = False  # an unknown on the way: every later GPU job's start is unknown
    for v in waiting:
        name = v.spec.name
        deps: list[float] = []
        dep_unknown = False
        for d in v.spec.after:
            if d in ends:
                end = ends[d]
                if end is None:
                    dep_unknown = True
                else:
                    deps.append(end)
        start: float | None = None
        need = v.spec.gpus
        if need > 0 and not blocked and not dep_unknown and len(slots) >= need:
            taken = [heapq.heappop(slots) for _ in range(need)]
            start = max([now, *deps, *(t for t, _ in taken)])
        elif need == 0 and deps and not dep_unknown:
            start = max([now, *deps])
        elif need > 0:
            blocked = True
        run = typical(v)
        end = start + run if start is not None and run is not None else None
        ends[name] = end
        if need > 0 and start is not None and end is not None:
            for _ in range(need):  # its slots free again at its end (else: at a time unknown)
                heapq.heappush(slots, (end, len(slots) + unknown_slots + 1_000_000))
        if start is not None:
            out[name] = Estimate(start_at=start)
    return out


def short_duration(seconds: float) -> str:
    """``~40 min``, ``~2 h 10 min``, ``~30 s``: rounded, as an estimate deserves."""
    s = max(0.0, seconds)
    if s < 60:
        return f"~{int(s)} s"
    m = round(s / 60)
    if m < 60:
        return f"~{m} min"
    h, m = divmod(m, 60)
    return f"~{h} h {m} min" if m else f"~{h} h"
