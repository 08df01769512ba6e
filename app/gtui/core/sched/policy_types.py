"""What the placement policy takes and gives: the waiting jobs (``Candidate``), our running
jobs (``Allocation``), and the pass's answer (``Start``, ``Decision``). Plain frozen records,
shared by the readable walk (policy.py), the column walk (policy_fast.py) and their callers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

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
    cpus: int | None = None  # host cores asked (None: not counted)
    ram_mib: int | None = None  # host memory asked (None: not counted)
    group: str | None = None  # its group's name ([groups.NAME] may cap and rank it)
    # The request as one int (see shape_key), made once: the column walk (policy_fast.py)
    # reads one column of these per pass instead of three attributes, 100k in a long sweep.
    shape: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        special = self.held or bool(self.after)
        object.__setattr__(self, "shape", shape_key(self.gpus, self.mem_mib, special))

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
        cpus: int | None = None,
        ram_mib: int | None = None,
        group: str | None = None,
    ) -> Candidate:
        """``Candidate(...)`` with every field given in order (the planner's call)."""
        return cls(
            name, gpus, mem_mib, priority, order, after, waiting_since, held, cpus, ram_mib, group
        )

    @property
    def asks_host(self) -> bool:
        """Whether it asks host cores or memory (then the host is counted for it)."""
        return bool(self.cpus or self.ram_mib)


@lru_cache(maxsize=4096)
def shape_key(gpus: int, mem_mib: int | None, special: bool = False) -> int:
    """One int per request (GPUs, mem), different for different requests, and below -2 when
    ``special`` (the job is held or has an ``after``, so it may wait for those): each int
    made non-negative (0, -1, 1, -2, ... -> 0, 1, 2, 3, ...; mem None before any mem), the two
    paired by Cantor's diagonal count.

    A pure function; the cache only hands equal requests the same int object, which a long
    queue's columns of shapes are compared, hashed and searched by (100k Candidates holding
    a few dozen objects: measured, a set of their shapes 8.4 -> 1.5 ms)."""
    a = 2 * gpus if gpus >= 0 else -2 * gpus - 1
    b = 0 if mem_mib is None else (2 * mem_mib if mem_mib >= 0 else -2 * mem_mib - 1) + 1
    key = (a + b) * (a + b + 1) // 2 + b
    return -3 - key if special else key


@dataclass(frozen=True)
class Allocation:
    """A running or suspended job of ours and what it holds."""

    name: str
    gpus: tuple[int, ...]
    mem_mib: int | None  # declared per GPU; None = the whole GPU
    observed_mib: Mapping[int, int] = field(default_factory=dict)  # per GPU, seen in use
    cpus: int | None = None  # host cores asked
    ram_mib: int | None = None  # host memory asked
    ram_used_mib: int = 0  # host memory seen in use by its processes


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
