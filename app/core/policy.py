"""The placement policy: one pure function, used by the engine, the tests, the simulator and the UI.

Snapshot + waiting jobs + our allocations + settings in; which jobs start on which GPUs, and a
reason a person can act on for every job that waits, out. No I/O, no clock, no randomness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gtui.core.gpus.snapshot import GpuSnapshot
from gtui.core.model import Settings


@dataclass(frozen=True)
class Candidate:
    """A job that could start now (state queued or held)."""

    name: str
    gpus: int
    mem_mib: int | None  # per GPU; None = needs its GPUs to itself
    priority: int = 0
    order: int = 0  # position in the queue file
    after: tuple[str, ...] = ()
    waiting_since: float = 0.0
    held: bool = False


@dataclass(frozen=True)
class Allocation:
    """A running or suspended job of ours and what it holds."""

    name: str
    gpus: tuple[int, ...]
    mem_mib: int | None  # declared per GPU; None = the whole GPU
    observed_mib: Mapping[int, int] = field(default_factory=dict)  # per GPU, seen in use


@dataclass(frozen=True)
class Start:
    name: str
    gpus: tuple[int, ...]


@dataclass(frozen=True)
class Decision:
    starts: tuple[Start, ...]
    reasons: dict[str, str]  # every candidate that does not start -> why, in words
    available_mib: dict[int, int]  # per GPU in the pool, the formula of DESIGN.md 4.1
