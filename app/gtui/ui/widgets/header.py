"""The top line: host, queue file, mode, reserve, dispatch on / paused, counts by state."""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual.widget import Widget

from gtui.core.model import JobState, Settings
from gtui.ui.format import header_text


class HeaderBar(Widget):
    """One line, laid out again for the current width (it shortens itself at 80 columns)."""

    DEFAULT_CSS = "HeaderBar { height: 1; }"

    def __init__(self, *, host: str, queue: str, settings: Settings, fake: bool) -> None:
        super().__init__(id="header")
        self.host = host
        self.queue = queue
        self.settings = settings
        self.fake = fake
        self.paused = False
        self.counts: Mapping[JobState, int] = {}
        # While the engine starts (a 100,000-job file takes seconds to read): said instead of
        # the mode, dispatch and counts, which are not known yet (not "no jobs", not "ON").
        self.starting: str | None = None

    def set_state(self, *, paused: bool, counts: Mapping[JobState, int]) -> None:
        if paused != self.paused or dict(counts) != dict(self.counts):
            self.paused = paused
            self.counts = dict(counts)
            self.refresh()

    def render(self) -> Text:
        if self.starting is not None:
            t = Text(no_wrap=True, overflow="ellipsis")
            t.append(" gtui", style="bold")
            t.append(f" · {self.host} · {self.queue} · ")
            t.append(self.starting, style="dim")
            return t
        return header_text(
            host=self.host,
            queue=self.queue,
            settings=self.settings,
            paused=self.paused,
            fake=self.fake,
            counts=self.counts,
            width=self.size.width,
        )
