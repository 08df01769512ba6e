"""The queue's live configuration: the queue file's settings as last taken in, the outcome
rules made from them, and whether the queue is paused.

One object that every part of the scheduler is given and reads: a reload (the intake sets
it) or a pause (the operations, or a failure under ``on_failure = "pause"``) reaches them all
at once, and no part holds a copy that could go stale.
"""

from __future__ import annotations

from gtui.core.api import QueuePaused
from gtui.core.bus import EventBus
from gtui.core.model import JobRecord, Settings
from gtui.core.sched.outcome import Rules
from gtui.core.state.store import Store


class QueueConfig:
    def __init__(self, bus: EventBus) -> None:
        self._bus = bus
        self.settings = Settings()
        self.rules = Rules(self.settings)
        self.paused = False

    def set_paused(self, paused: bool, store: Store) -> None:
        """Pause or resume the whole queue: kept in the store (a restart keeps it) and told."""
        self.paused = paused
        store.set_meta("paused", "1" if paused else "0")
        self._bus.publish(QueuePaused(paused))

    def after_failure(self, rec: JobRecord, store: Store) -> None:
        """A job failed: ``on_failure = "pause"`` pauses the queue (once)."""
        if self.settings.on_failure == "pause" and not self.paused:
            self.set_paused(True, store)
            self._bus.notice("warning", f"{rec.name} failed: queue paused (on_failure)")
