"""The one small interface between the engine and any front end (headless log, socket, dashboard).

Front ends subscribe to typed events and call the engine's command methods. Events carry frozen
copies, so a subscriber can keep them without racing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gtui.core.gpus.snapshot import GpuSnapshot
from gtui.core.model import NO_ITEMS, JobRecord, JobSpec, copy_record


@dataclass(frozen=True)
class JobView:
    """A job as front ends see it: its spec and a copy of its run record."""

    spec: JobSpec
    record: JobRecord
    order: int  # position in the queue


def freeze(spec: JobSpec, record: JobRecord, order: int) -> JobView:
    """A copy of the record that the engine's later changes cannot reach. Filled field by field
    (not ``dataclasses.replace``, which runs ``__init__``: a 100,000-job queue's views took 1.9 s
    that way, a tenth of it like this). Its warnings are a list of its own, or the shared empty
    one (a 100,000-job screen's views hold no 100,000 empty lists)."""
    copy = copy_record(record)
    warnings = record.warnings
    copy.warnings = list(warnings) if warnings else NO_ITEMS
    return JobView(spec=spec, record=copy, order=order)


@dataclass(frozen=True)
class JobChanged:
    job: JobView


@dataclass(frozen=True)
class ReasonChanged(JobChanged):
    """Only the job's waiting reason changed. A JobChanged to whoever takes those; a
    subscriber that asked for JobChanged by type (the headless event log, which prints state
    changes) is spared the 100,000 of a long queue's first pass."""


@dataclass(frozen=True)
class JobRemoved:
    name: str


@dataclass(frozen=True)
class QueueChanged:
    """Jobs were added, removed or reordered: ``jobs`` is the whole queue in order."""

    jobs: tuple[JobView, ...]


@dataclass(frozen=True)
class GpusRead:
    snapshot: GpuSnapshot
    ours: dict[int, tuple[str, ...]] = field(default_factory=dict)  # GPU index -> our job names
    ours_mib: dict[int, int] = field(default_factory=dict)  # GPU index -> memory held by ours
    available_mib: dict[int, int] = field(default_factory=dict)
    reserved: tuple[int, ...] = ()  # GPUs the reserve rule keeps for others right now
    # Other users' gtui claims: GPU index -> memory promised to their jobs and not
    # yet allocated, and who it is promised to ("bob's train-vit").
    neighbours_mib: dict[int, int] = field(default_factory=dict)
    neighbours: dict[int, tuple[str, ...]] = field(default_factory=dict)
    quarantined: tuple[int, ...] = ()  # out of placement after a hardware fault
    # The host's cores and memory (None: not read) and what jobs asked of them
    # (sched/hostfit.host_doc: cores, cores_asked, ram_total_mib, ram_used_mib, ...).
    host: dict[str, Any] | None = None


@dataclass(frozen=True)
class LogGrew:
    name: str
    path: str
    size: int


@dataclass(frozen=True)
class Notice:
    """Something a person should read: a broken queue edit, a lost GPU, a disk that is full."""

    level: str  # "info" | "warning" | "error"
    text: str


@dataclass(frozen=True)
class QueuePaused:
    paused: bool


@dataclass(frozen=True)
class WaitingSummary:
    """``3 waiting: 2 needs 1 GPU with 40G: none eligible (GPU0 31G < 40G); 1 after prep``:
    what waits and why, the most common reasons first (the headless run's log). ``key``: the
    same counted by the reasons' key parts (``2 needs 40G, best GPU has 31G free``), for a line
    too short for the whole (the dashboard's queue box); "" from a gtui before it."""

    text: str
    key: str = ""


Event = (
    JobChanged
    | ReasonChanged
    | JobRemoved
    | QueueChanged
    | GpusRead
    | LogGrew
    | Notice
    | QueuePaused
    | WaitingSummary
)


class EventSink(Protocol):
    def __call__(self, event: Event) -> None: ...
