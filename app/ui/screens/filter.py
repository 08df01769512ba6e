"""The ``/`` dialog: show only jobs in some states, or whose name contains some text."""

from __future__ import annotations

from collections.abc import Mapping

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from gtui.core.model import JobState
from gtui.ui.widgets.job_table import FILTER_LABELS, FILTERS

NAMES = tuple(FILTERS)


class FilterScreen(ModalScreen[tuple[str, str] | None]):
    """Dismissed with (state filter, name text); ``escape`` keeps the current filter."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, current: str, text: str, counts: Mapping[JobState, int]) -> None:
        super().__init__(classes="dialog-screen")
        self.current = current
        self.text = text
        self.counts = counts

    def _count(self, name: str) -> int:
        states = FILTERS[name]
        if states is None:
            return sum(self.counts.values())
        return sum(self.counts.get(s, 0) for s in states)

    def compose(self) -> ComposeResult:
        options = [
            Option(f"{FILTER_LABELS.get(name, name)}  ({self._count(name)})", id=name)
            for name in NAMES
        ]
        with Vertical(classes="dialog", id="filter"):
            yield Static("Filter the queue  (enter applies, esc cancels)", classes="dialog-title")
            yield Input(self.text, placeholder="name contains…", id="filter-text", compact=True)
            yield OptionList(*options, id="filter-states")

    def on_mount(self) -> None:
        ol = self.query_one(OptionList)
        ol.highlighted = NAMES.index(self.current) if self.current in NAMES else 0
        ol.focus()

    def _apply(self) -> None:
        ol = self.query_one(OptionList)
        idx = ol.highlighted
        name = NAMES[idx] if idx is not None else "all"
        self.dismiss((name, self.query_one(Input).value))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._apply()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._apply()

    def action_cancel(self) -> None:
        self.dismiss(None)
