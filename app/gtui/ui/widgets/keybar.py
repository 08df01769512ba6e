"""The footer: every key of the screen, wrapped onto a second line when the screen is narrow.

Textual's Footer scrolls sideways and hides keys at 80 columns; a person over SSH should see all
of them. Each key is clickable (mouse works, but is never needed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.style import Style
from rich.text import Text
from textual.widget import Widget

from gtui.ui.keys import KEYS, Key


class KeyBar(Widget):
    DEFAULT_CSS = "KeyBar { height: auto; }"

    def __init__(
        self, label_for: Callable[[Key], str] | None = None, keys: Sequence[Key] = KEYS
    ) -> None:
        super().__init__(id="keybar")
        self.label_for = label_for or (lambda k: k.label)
        self.keys = tuple(keys)

    def render(self) -> Text:
        width = max(20, self.size.width or 80)
        lines: list[Text] = [Text()]
        for key in self.keys:
            item = Text()
            item.append(key.shown, style="bold reverse")
            item.append(f" {self.label_for(key)}")
            item.stylize(Style(meta={"@click": f"screen.{key.action}"}))
            if lines[-1].cell_len + item.cell_len + 2 > width and lines[-1].cell_len:
                lines.append(Text())
            lines[-1].append("  " if lines[-1].cell_len else " ")
            lines[-1].append_text(item)
        return Text("\n", no_wrap=True).join(lines)
