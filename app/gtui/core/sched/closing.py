"""What a scheduler's shutdown leaves for the next one: every change saved that can be, the
waiting reasons, when it stopped, a backup of the store; and what could not be saved, said."""

from __future__ import annotations

import contextlib
import time

from gtui.core.bus import EventBus
from gtui.core.sched.planner import Planner
from gtui.core.state.backup import Backups
from gtui.core.state.book import JobBook
from gtui.core.state.store import StoreError


def save_for_next(
    book: JobBook,
    planner: Planner | None,
    backups: Backups | None,
    scheduler: bool,
    bus: EventBus,
) -> None:
    """``scheduler``: a scheduler, not an engine that only applied commands (it records its
    stop and backs the store up)."""
    book.save_unsaved()
    book.save_deferred()
    if planner is not None:
        planner.flush()  # the reasons a pending walk would give are the last
    book.save_reasons()
    if scheduler:
        with contextlib.suppress(StoreError):
            book.store.set_meta("scheduler_stopped", f"{time.time():.3f}")
        if backups is not None:
            backups.write()
    if book.unsaved:
        bus.notice(
            "error",
            f"{len(book.unsaved)} job change(s) could not be saved; the next start "
            "takes the jobs' ends from their exit-status files",
        )
