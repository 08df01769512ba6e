"""The status document of a running scheduler (``gtui status --json``, the control socket's
``status``): its head (the queue, the scheduler, the GPUs), every job with its estimates, and
its tail (what is wrong right now, the GPUs out of placement)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gtui.core.api import JobView
from gtui.core.gcpause import paused_gc
from gtui.core.gpus.snapshot import GpuSnapshot
from gtui.core.queue.source import QueueSource
from gtui.core.sched.forecast import Forecast
from gtui.core.sched.quarantine import Quarantine
from gtui.core.sched.statustext import status_chunks
from gtui.core.state.book import JobBook
from gtui.core.state.status import status_dict


@dataclass(frozen=True)
class Moment:
    """What one status document is made of, taken at one moment."""

    head: dict[str, Any]
    views: list[JobView]
    tail: dict[str, Any]
    forecast: Forecast | None  # None before the scheduler started


def status_head(
    queue_path: Path, running: bool, since: float | None, paused: bool, snapshot: GpuSnapshot
) -> dict[str, Any]:
    scheduler = {"running": running, "pid": os.getpid(), "since": since}
    return {
        "queue": str(queue_path),
        "scheduler": scheduler,
        "paused": paused,
        "gpus": [g.to_json() for g in snapshot.gpus],
    }


def status_tail(
    book: JobBook | None,
    source: QueueSource,
    quarantine: Quarantine,
    host: dict[str, object] | None = None,
) -> dict[str, Any]:
    """What is wrong right now, in words (a full disk, a broken queue file), the GPUs
    out of placement, and the host's cores and memory when read (``host``)."""
    problems = []
    if book is not None and book.unsaved and book.store_error:
        problems.append(
            f"cannot save the job states ({len(book.unsaved)} change(s) waiting): "
            f"{book.store_error}; no job starts until they are saved"
        )
    if source.error and source.problem:
        problems.append(source.problem)
    quarantined = {str(g): why for g, why in sorted(quarantine.gpus.items())}
    tail: dict[str, Any] = {"problems": problems, "quarantined": quarantined}
    if host is not None:
        tail["host"] = host
    return tail


def document(m: Moment) -> dict[str, Any]:
    """The status as one dict."""
    head, views = m.head, m.views
    with paused_gc():  # 100,000 dicts of jobs: see JobBook.views
        queue = Path(head["queue"])
        doc = status_dict(queue, head["paused"], head["gpus"], views, head["scheduler"])
    if views and m.forecast is not None:
        m.forecast.add_estimates(doc["jobs"], views)  # progress, ETAs
    doc.update(m.tail)
    return doc


def pieces(m: Moment) -> Iterator[str]:
    """The status as compact JSON text in pieces, made as they are taken (sched/statustext)."""
    views = m.views
    with paused_gc():
        est = m.forecast.estimates(views) if views and m.forecast is not None else {}
    chunks = status_chunks(m.head, views, m.tail, est, time.time())
    while True:
        with paused_gc():  # thousands of strings a piece: see JobBook.views
            piece = next(chunks, None)
        if piece is None:
            return
        yield piece
