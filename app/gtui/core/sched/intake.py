"""The queue file taken in while the scheduler runs: each new complete and valid version
(a reload, an edit of one job alone, an edit of our own), and the watch on the file's stat.

What a version brings goes into the job book and the queue's live configuration; the front
ends are told, and a placement pass follows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from gtui.core.api import JobChanged, JobRemoved, QueueChanged
from gtui.core.bus import EventBus
from gtui.core.diagnosis.userrules import UserRules
from gtui.core.queue.queuefile import QueueFile
from gtui.core.queue.source import QueueSource
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.outcome import Rules
from gtui.core.state.book import JobBook

FILE_WATCH_S = 0.2  # how often the queue file's stat is looked at between polls

Pool = Callable[[], "list[int | None] | None"]


class Intake:
    def __init__(
        self,
        *,
        source: QueueSource,
        book: JobBook,
        bus: EventBus,
        config: QueueConfig,
        user_rules: UserRules,
        pool: Pool,
        kick: Callable[[], None],
        stopping: Callable[[], bool],
    ) -> None:
        self.source = source
        self.queue_path = source.path
        self.pool = pool  # the GPUs' totals a job is checked against
        self._book = book
        self._bus = bus
        self._config = config
        self._user_rules = user_rules
        self._kick = kick
        self._stopping = stopping
        # Held by an edit of the queue file from its write to its take-in (see Operations).
        self.file_edits = asyncio.Lock()

    def take(self, queue: QueueFile, *, initial: bool = False) -> None:
        """Make ``queue`` the one the scheduler runs: its settings, its rules, its jobs."""
        config = self._config
        config.settings = queue.settings
        config.rules = Rules(
            queue.settings,
            off=self._user_rules.off,
            matcher=self._user_rules.search,
            on_overrun=self._user_rules.overran,
        )
        removed, back = self._book.apply(queue, initial=initial)
        for name in removed:
            self._bus.publish(JobRemoved(name))
        if back:
            names = ", ".join(r.name for r in back[:5]) + (" ..." if len(back) > 5 else "")
            self._bus.notice(
                "info",
                f"{names}: back in the queue file, and ended before ({back[0].state.value}"
                f"{', ...' if len(back) > 1 else ''}): not run again; "
                f"`gtui retry {self.queue_path.name} NAME` runs one again",
            )

    async def reload(self) -> None:
        """Read the queue file again now (the control socket's ``reload``, after ``gtui add``)."""
        async with self.file_edits:
            self.reload_if_changed(force=True, edit=True)

    def reload_if_changed(self, *, force: bool = False, edit: bool = False) -> bool:
        """Take a new version of the queue file, if there is one that is complete and valid.

        While an edit of ours is between its write and its take-in (``file_edits`` held), the
        file holds a job the book has not taken yet: a reload now would take it, and the edit's
        own take-in would take it again. So only the edit itself (``edit``) reads the file
        then; the watcher and the poll look again after it."""
        if self.file_edits.locked() and not edit:
            return False
        took = self.source.check(force=force, on_settled=self._settled, quick=self._one_job)
        if took is None:
            return False
        if isinstance(took, QueueFile):
            self.take(took)
            if self._bus.wants(QueueChanged):
                self._bus.publish(QueueChanged(tuple(self._book.views())))
        self._bus.notice("info", f"reloaded {self.queue_path.name}")
        return True

    def _one_job(self, old: str, new: str) -> str | None:
        """An edit of one job's table taken in alone (``gtui.core.queue.incremental``): at
        100,000 jobs a whole reload took 2.3 s for it. Returns the job's name, or None."""
        from gtui.core.queue.incremental import edited_job

        book = self._book
        edited = edited_job(
            self.queue_path, old, new, self._config.settings, book.specs, self.pool()
        )
        if edited is None:
            return None
        spec, warnings = edited
        book.replace_spec(spec)
        self._bus.publish(JobChanged(book.view(spec.name)))
        for warning in warnings:
            self._bus.notice("warning", warning)
        return spec.name

    async def watch(self) -> None:
        """Look at the queue file's stat often (one syscall), so an edit is taken within
        FILE_WATCH_S plus its settle time, not at the next poll (2 s). Only a changed stat
        reads the file; the poll keeps the slower checks (same-second writes)."""
        while not self._stopping():
            await asyncio.sleep(FILE_WATCH_S)
            if not self._stopping() and self.source.moved() and self.reload_if_changed():
                self._kick()

    def _settled(self) -> None:
        if not self._stopping():
            self.reload_if_changed()
            self._kick()
