"""What the placement policy takes and gives: the waiting jobs (``Candidate``), our running
jobs (``Allocation``), and the pass's answer (``Start``, ``Decision``). Plain frozen records,
shared by the readable walk (policy.py), the column walk (policy_fast.py) and their callers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

HELD_REASON = "held by you"
PAUSED_REASON = "queue paused"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A job that could start now (state queued or held). The engine keeps them between
    passes, 100k of them in a long sweep: slots, and nothing beyond the job's own fields."""

    name: str
    gpus: int
    mem_mib: int | None  # per GPU; None = needs its GPUs to itself
    priority: int = 0
    order: int = 0  # position in the queue file
    after: tuple[str, ...] = ()
    waiting_since: float = 0.0
    held: bool = False

    @classmethod
    def make(
        cls,
        name: str,
        gpus: int,
        mem_mib: int | None,
        priority: int,
        order: int,
        after: tuple[str, ...],
        waiting_since: float,
        held: bool,
    ) -> Candidate:
        """``Candidate(...)`` with every field given in order (the planner's call)."""
        return cls(name, gpus, mem_mib, priority, order, after, waiting_since, held)


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
    reasons: Mapping[str, str]  # every candidate that does not start -> why, in words
    available_mib: dict[int, int]  # per pool GPU, available memory after the starts
    reserved: tuple[int, ...] = ()  # free GPUs the reserve rule keeps for others right now
    starving: str | None = None  # the job later jobs must leave GPUs to, if any
