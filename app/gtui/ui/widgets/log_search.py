"""The ``/`` line of a log: typed text, enter searches the log, esc closes. Hidden otherwise."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import Input

from gtui.ui.widgets.log_view import LogView


class LogSearch(Input):
    """One per screen that shows a log; ``open(log)`` shows it under that log."""

    BINDINGS = [Binding("escape", "close", "Close", show=False)]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            placeholder="search the log: type, enter finds (n / N then), esc closes",
            id=id,
            compact=True,
            classes="log-search",
        )
        self.target: LogView | None = None
        self.display = False

    def open(self, log: LogView) -> None:
        self.target = log
        self.value = ""
        self.display = True
        self.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        log = self.target
        self.action_close()
        if log is None:
            return
        if event.value:
            log.search(event.value)
        elif log.search_query is not None:
            log.action_search_next(1)  # enter alone: the next match of the last search

    def action_close(self) -> None:
        self.display = False
        if self.target is not None and self.target.display:
            self.target.focus()
