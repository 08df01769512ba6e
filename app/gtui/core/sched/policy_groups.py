"""Groups in the placement policy: each ``[groups.NAME]``'s ``max_parallel`` (a cap on its
running jobs, held during one pass as its jobs start) and ``priority`` (added to its jobs' own
when they are ranked). Pure: the settings and the running jobs' groups in, words out."""

from __future__ import annotations

from collections.abc import Mapping

from gtui.core.model import Settings


def group_priorities(settings: Settings) -> dict[str, int]:
    """Each group's ``priority``, for the groups that have one (most queues: none)."""
    return {g.name: g.priority for g in settings.groups if g.priority}


def group_limits(settings: Settings) -> dict[str, int]:
    """Each group's ``max_parallel``, for the groups that have one."""
    return {g.name: g.max_parallel for g in settings.groups if g.max_parallel > 0}


class GroupCaps:
    """One pass's count of our running jobs in each limited group, raised as the pass starts
    jobs; ``full`` says why a job of a group at its cap waits."""

    __slots__ = ("limits", "running")

    def __init__(self, settings: Settings, running: Mapping[str, int]) -> None:
        self.limits = group_limits(settings)
        self.running = {g: running.get(g, 0) for g in self.limits}

    def full(self, group: str | None) -> str | None:
        """Why a job of ``group`` may not start now (its group has its cap running), or None."""
        if group is None:
            return None
        limit = self.limits.get(group)
        if limit is None:
            return None
        n = self.running[group]
        return f"group {group}: {n} of {limit} running" if n >= limit else None

    def started(self, group: str | None) -> None:
        if group is not None and group in self.running:
            self.running[group] += 1
