"""The event bus: how the scheduler tells every front end what changed.

Subscribers (the headless event log, the control socket's watchers, the dashboard) are called
synchronously, in order, with frozen events (gtui.core.api); a subscriber that raises is told
about in a Notice and never stops the scheduler or the other subscribers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Generic, TypeVar

from gtui.core.api import Event, EventSink, Notice

T = TypeVar("T")


class EventBus:
    def __init__(self) -> None:
        self._sinks: list[tuple[EventSink, tuple[type, ...] | None]] = []

    def subscribe(
        self, sink: EventSink, kinds: tuple[type, ...] | None = None
    ) -> Callable[[], None]:
        """Add ``sink`` (for the events of ``kinds`` only, if given); returns the function that
        removes it again."""
        entry = (sink, kinds)
        self._sinks.append(entry)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._sinks.remove(entry)

        return unsubscribe

    def wants(self, kind: type) -> bool:
        """Whether anyone listens to ``kind``: an event that is costly to build (every job's
        view, at 100,000 jobs) is not built for nobody."""
        return any(kinds is None or kind in kinds for _sink, kinds in self._sinks)

    def covers(self, kind: type, by: type) -> bool:
        """Whether every subscriber that takes ``kind`` also takes ``by`` (so one ``by`` may
        stand for many ``kind``)."""
        return all(kinds is None or kind not in kinds or by in kinds for _s, kinds in self._sinks)

    def publish(self, event: Event) -> None:
        for sink, kinds in list(self._sinks):
            if kinds is not None and type(event) not in kinds:
                continue
            try:
                sink(event)
            except Exception as e:  # a broken front end must not stop the scheduler
                if not isinstance(event, Notice):
                    self.publish(Notice("error", f"an event subscriber failed: {e!r}"))

    def notice(self, level: str, text: str) -> None:
        self.publish(Notice(level, text))


class Topic(Generic[T]):
    """One kind of event inside the scheduler (a run's end), with the parts that follow it:
    told synchronously, in order, like the bus's subscribers; never sent to a front end. A
    subscriber that raises is told about on ``bus`` and never stops the others."""

    def __init__(self, bus: EventBus) -> None:
        self._bus = bus
        self._sinks: list[Callable[[T], None]] = []

    def subscribe(self, sink: Callable[[T], None]) -> Callable[[], None]:
        self._sinks.append(sink)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._sinks.remove(sink)

        return unsubscribe

    def publish(self, event: T) -> None:
        for sink in list(self._sinks):
            try:
                sink(event)
            except Exception as e:  # one broken part must not stop the scheduler
                self._bus.notice("error", f"a subscriber of {type(event).__name__} failed: {e!r}")
