"""The queue's filter line (``/``): it filters as you type, and never traps the keys.

Enter keeps the filter and gives the table the focus with its cursor on the first match, so the
next ``x`` / ``p`` / ``e`` acts on the row the user sees; esc clears it. While a filter is on,
the line stays visible under the table (and the queue's title says it), so a short table is
never mistaken for the whole queue.
"""

from __future__ import annotations

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input

from gtui.ui.widgets.job_table import FILTERS

PLACEHOLDER = "filter: part of a name, or @failed @waiting @trouble…  enter keeps, esc clears"


def parse_filter(text: str) -> tuple[str, str]:
    """``@failed train`` -> (``failed``, ``train``): a word ``@STATE`` (a state or a group of
    FILTERS) picks the state; the other words are the name's text."""
    state = "all"
    words = []
    for word in text.split():
        if word.startswith("@") and word[1:].lower() in FILTERS:
            state = word[1:].lower()
        else:
            words.append(word)
    return state, " ".join(words)


class FilterBar(Input):
    """Its line is hidden until ``/``; ``Closed(keep)`` when enter (keep) or esc (clear)
    ends the typing."""

    BINDINGS = [
        Binding("escape", "clear", "Clear the filter", show=False),
        Binding("down", "move(1)", "Next match", show=False),
        Binding("up", "move(-1)", "Previous match", show=False),
    ]

    class Closed(Message):
        """The typing ended: ``keep`` (enter) or clear (esc)."""

        def __init__(self, keep: bool) -> None:
            super().__init__()
            self.keep = keep

    class Move(Message):
        """up / down while typing: move the table's cursor among the matches."""

        def __init__(self, delta: int) -> None:
            super().__init__()
            self.delta = delta

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder=PLACEHOLDER, id=id, compact=True, classes="filter-bar")

    @property
    def active(self) -> bool:
        return bool(self.value.strip())

    def open(self) -> None:
        self.focus()
        self.cursor_position = len(self.value)

    def type_ahead(self, key: events.Key) -> bool:
        """A key typed after ``/`` before this line had the focus: done here as if focused
        (True), or left to the screen (False: a key the line does not type)."""
        if key.key == "enter":
            self.post_message(self.Closed(keep=True))
        elif key.key == "escape":
            self.action_clear()
        elif key.key == "backspace":
            self.action_delete_left()
        elif key.is_printable and key.character:
            self.insert_text_at_cursor(key.character)
        else:
            return False
        return True

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Closed(keep=True))

    def action_clear(self) -> None:
        self.value = ""
        self.post_message(self.Closed(keep=False))

    def action_move(self, delta: int) -> None:
        self.post_message(self.Move(delta))


__all__ = ["FilterBar", "parse_filter"]
