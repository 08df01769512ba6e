"""The main screen as its rooms see it: the engine, the clock and the widgets they update.

``MainScreen`` is its one subclass. The rooms import this, never the screen (which imports
them): so no import runs in a circle, and a room is handed the other rooms it uses when it is
built rather than reaching for them through the screen.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.screen import Screen

from gtui.core import tmux
from gtui.ui.port import EnginePort
from gtui.ui.widgets.job_table import JobTable
from gtui.ui.widgets.log_view import LogView


class MainView(Screen[None]):
    engine: EnginePort
    clock: Callable[[], float]
    in_tmux: bool
    _tmux_prefix: str | None = None

    @property
    def table(self) -> JobTable:
        return self.query_one(JobTable)

    @property
    def log_view(self) -> LogView:
        return self.query_one(LogView)

    @property
    def zoomed(self) -> bool:
        return self.has_class("-zoomed")

    @property
    def tmux_prefix(self) -> str:
        """The prefix key the user's tmux really uses (read once: it seldom changes)."""
        if self._tmux_prefix is None:
            self._tmux_prefix = tmux.prefix_key()
        return self._tmux_prefix
