"""Fault injection for the crash tests: ``GTUI_CRASH_AT="point:n"`` makes the scheduler SIGKILL
itself the n-th time it reaches ``point`` (after_intent, after_launch, after_exit, after_finish;
a preemption's after_preempt_intent, after_preempt_signal;
a dashboard's hand-over of its queue: handover_spawned, handover_released; its successor's take
over: handover_locked, handover_adopted). The variable is inherited, so one setting reaches the
successor too: each point names the process it kills. Unset (always, outside the tests), a
call costs one string test."""

from __future__ import annotations

import os

_CRASH_AT = os.environ.get("GTUI_CRASH_AT", "")
_counts: dict[str, int] = {}


def crash_point(point: str) -> None:
    if not _CRASH_AT:
        return
    where, _, nth = _CRASH_AT.partition(":")
    if where != point:
        return
    _counts[point] = _counts.get(point, 0) + 1
    if _counts[point] == int(nth or 1):
        os.kill(os.getpid(), 9)
