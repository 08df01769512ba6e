"""Coalesce engine events between two screen refreshes.

The engine may publish thousands of JobChanged events a second (a burst of short jobs, a reload
of a 10,000-job queue) and LogGrew for every write. The dashboard paints at most a few times a
second, so it keeps only the latest of each: the last view of each job, the last GPU read, the
last size of each log. One batch then updates the widgets in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gtui.core.api import (
    Event,
    GpusRead,
    JobChanged,
    JobRemoved,
    JobView,
    LogGrew,
    Notice,
    QueueChanged,
    QueuePaused,
    WaitingSummary,
)


@dataclass
class Batch:
    """Everything that happened since the last flush, latest value per key."""

    queue: tuple[JobView, ...] | None = None  # the whole queue, when it was re-published
    jobs: dict[str, JobView] = field(default_factory=dict)  # changed after `queue`
    removed: set[str] = field(default_factory=set)
    gpus: GpusRead | None = None
    logs: dict[str, int] = field(default_factory=dict)  # job name -> log size
    notices: list[Notice] = field(default_factory=list)
    paused: bool | None = None
    summary: str | None = None
    events: int = 0  # how many events this batch folds (for the benchmark)

    def __bool__(self) -> bool:
        return self.events > 0


class EventBuffer:
    """Folds events into a Batch; ``add`` says whether a flush must be scheduled."""

    def __init__(self) -> None:
        self._batch = Batch()

    def add(self, event: Event) -> bool:
        """Record ``event``; True when the buffer was empty (the caller schedules one flush)."""
        b = self._batch
        first = b.events == 0
        b.events += 1
        if isinstance(event, JobChanged):
            name = event.job.spec.name
            b.jobs[name] = event.job
            b.removed.discard(name)
        elif isinstance(event, QueueChanged):
            # The whole queue supersedes every earlier per-job change.
            b.queue = event.jobs
            b.jobs.clear()
            b.removed.clear()
        elif isinstance(event, JobRemoved):
            b.jobs.pop(event.name, None)
            b.removed.add(event.name)
        elif isinstance(event, GpusRead):
            b.gpus = event
        elif isinstance(event, LogGrew):
            b.logs[event.name] = event.size
        elif isinstance(event, Notice):
            b.notices.append(event)
            del b.notices[:-20]  # a storm of notices: the last ones matter
        elif isinstance(event, QueuePaused):
            b.paused = event.paused
        elif isinstance(event, WaitingSummary):
            b.summary = event.key or event.text  # the key parts: the queue box's line is short
        return first

    def __bool__(self) -> bool:
        """Whether anything came since the last ``take``."""
        return bool(self._batch)

    def take_queue(self) -> tuple[JobView, ...] | None:
        """The whole queue if one came since the last take, leaving the events after it: the
        dashboard's first fill uses the queue the engine's start published instead of making
        every job's view again (100,000 views: ~0.3 s) and then applying both."""
        b = self._batch
        queue, b.queue = b.queue, None
        return queue

    def take(self) -> Batch:
        """The batch so far; the buffer starts empty again."""
        b, self._batch = self._batch, Batch()
        return b
