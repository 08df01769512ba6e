"""The event bus: how the scheduler tells every front end what changed.

Subscribers (the headless event log, the control socket's watchers, the dashboard) are called
synchronously, in order, with frozen events (gtui.core.api); a subscriber that raises is told
about in a Notice and never stops the scheduler or the other subscribers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from gtui.core.api import Event, EventSink, Notice


class EventBus:
    def __init__(self) -> None:
        self._sinks: list[EventSink] = []

    def subscribe(self, sink: EventSink) -> Callable[[], None]:
        """Add ``sink``; returns the function that removes it again."""
        self._sinks.append(sink)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._sinks.remove(sink)

        return unsubscribe

    def publish(self, event: Event) -> None:
        for sink in list(self._sinks):
            try:
                sink(event)
            except Exception as e:  # a broken front end must not stop the scheduler
                if not isinstance(event, Notice):
                    self.publish(Notice("error", f"an event subscriber failed: {e!r}"))

    def notice(self, level: str, text: str) -> None:
        self.publish(Notice(level, text))
