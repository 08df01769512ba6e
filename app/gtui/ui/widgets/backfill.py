"""The queue table's backfill note: why a running job went ahead of a multi-GPU job waiting
before it (backfill, until ``starve_after``; then GPUs are kept for the waiting job)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.text import Text

from gtui.core.api import JobView
from gtui.core.model import JobState


def first_blocker(views: Iterable[JobView]) -> JobView | None:
    """The first waiting multi-GPU job in the order jobs are considered (priority, then the
    queue), waiting for GPUs rather than for a job it runs after: the one later jobs overtake
    by backfill."""
    best: tuple[tuple[int, int], JobView] | None = None
    for v in views:
        rec = v.record
        if rec.state != JobState.QUEUED or v.spec.gpus < 2 or rec.reason.startswith("after"):
            continue
        key = (-v.spec.priority, v.order)
        if best is None or key < best[0]:
            best = (key, v)
    return best[1] if best else None


def backfill_note(
    view: JobView, blocker: Callable[[], JobView | None], starve_after_s: float
) -> Text | None:
    """The note of a running job that overtook ``blocker()`` (asked only for such a job: the
    blocker is worked out over the whole queue), or None."""
    rec = view.record
    if rec.state != JobState.RUNNING or not rec.gpus or rec.warnings:
        return None
    b = blocker()
    if b is None or (-view.spec.priority, view.order) < (-b.spec.priority, b.order):
        return None
    h, rem = divmod(int(starve_after_s), 3600)
    after = "".join(f"{v}{u}" for v, u in ((h, "h"), (rem // 60, "m"), (rem % 60, "s")) if v)
    return Text(
        f"backfill: ahead of {b.spec.name} ({b.spec.gpus} GPUs); kept for it after {after}",
        style="cyan",
    )
