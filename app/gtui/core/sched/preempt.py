"""Which of our running jobs to stop for a waiting job of higher priority: a pure choice.

The victims are the fewest that free enough, least work lost first: the candidates are
ordered by how long they have run (shortest first), then by priority (lowest first), and the
first set of the smallest size, in that order, that lets the waiting job start is taken.
Whether a set frees enough is the caller's question (``frees``: the placement policy asked
again without those jobs), so the GPU rules live in one place. Only our own preemptible jobs
of lower priority than the waiting job may be chosen; a neighbour's job is never among them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# The most sets tried for one waiting job in one pass: past it, no preemption (the queue is
# never held up by the search; a pass later tries again).
MAX_CHECKS = 2000


@dataclass(frozen=True)
class Running:
    """A running job as the choice sees it."""

    name: str
    priority: int
    started_at: float
    preemptible: bool
    ours: bool = True  # a neighbour's job (another user's) is never chosen


def may_stop(job: Running, priority: int) -> bool:
    """Whether ``job`` may be stopped for a waiting job of ``priority``."""
    return job.ours and job.preemptible and job.priority < priority


def cost_order(jobs: Sequence[Running]) -> list[Running]:
    """Least work lost first: the shortest-running (latest started), then the lowest
    priority, then by name (a stable order)."""
    return sorted(jobs, key=lambda j: (-j.started_at, j.priority, j.name))


def choose(
    priority: int,
    running: Sequence[Running],
    frees: Callable[[frozenset[str]], bool],
    *,
    max_checks: int = MAX_CHECKS,
) -> tuple[str, ...] | None:
    """The victims for a waiting job of ``priority`` (in cost order), or None when no set of
    the jobs that may be stopped lets it start (or the search ran past ``max_checks``)."""
    pool = cost_order([j for j in running if may_stop(j, priority)])
    checks = 0
    for size in range(1, len(pool) + 1):
        for combo in itertools.combinations(pool, size):
            checks += 1
            if checks > max_checks:
                return None
            names = frozenset(j.name for j in combo)
            if frees(names):
                return tuple(j.name for j in combo)
    return None
