"""The ``?`` screen: every key, what the glyphs and colours mean.

Every key of every screen is longer than a terminal of 40 rows (and far longer than 24): the
help scrolls, its box has the focus so the arrows, pgup / pgdn, home / end move it, and its
bottom line says "more ↓" while there is more below."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gtui.core.model import JobState
from gtui.ui.format import (
    FREE_CHAR,
    MEM_CRIT,
    MEM_WARN,
    OTHERS_CHAR,
    OURS_CHAR,
    STATE_GLYPH,
    STATE_STYLE,
    TEMP_CRIT,
    TEMP_WARN,
    UTIL_CRIT,
    UTIL_WARN,
)
from gtui.ui.keys import (
    DETAIL_KEYS,
    FORM_KEYS,
    KEYS,
    LOG_KEYS,
    PANEL_KEYS,
    ROOM_KEYS,
    VIEW_KEYS,
)


def help_text(prefix: str = "ctrl+b") -> Table:
    """Every key; ``prefix`` is tmux's real prefix key, for the detach hint."""
    keys = Table.grid(padding=(0, 2))
    keys.add_column(style="bold", no_wrap=True)
    keys.add_column()
    for k in KEYS:
        keys.add_row(k.shown, k.help)
    keys.add_row("↑ ↓ pgup pgdn", "move in the queue, or scroll the focused log")
    keys.add_row("home end g G", "the first / last job, or the top / end of the focused log")
    keys.add_row(
        "space shift+↑↓", "mark jobs: x r p K J t then act on every marked one (esc unmarks)"
    )
    keys.add_row("esc", "unmark, clear the filter; back from the zoomed log, from the log")
    for k in VIEW_KEYS:  # what the queue shows: the done jobs
        keys.add_row(k.shown, k.help)
    for k in PANEL_KEYS:  # the GPU panel's: who holds each GPU, the sparklines
        keys.add_row(k.shown, k.help)
    for k in ROOM_KEYS:  # now and then: make room for a waiting job (preempt)
        keys.add_row(k.shown, k.help)
    keys.add_row("ctrl+p", "command palette (every action by name)")

    log_keys = Table.grid(padding=(0, 2))
    log_keys.add_column(style="bold", no_wrap=True)
    log_keys.add_column()
    for shown, what in LOG_KEYS:
        log_keys.add_row(shown, what)

    form_keys = Table.grid(padding=(0, 2))
    form_keys.add_column(style="bold", no_wrap=True)
    form_keys.add_column()
    for shown, what in FORM_KEYS:
        form_keys.add_row(shown, what)

    detail_keys = Table.grid(padding=(0, 2))
    detail_keys.add_column(style="bold", no_wrap=True)
    detail_keys.add_column()
    for k in DETAIL_KEYS:
        detail_keys.add_row(k.shown, k.help)

    legend = Text()
    for st in JobState:
        legend.append(f"{STATE_GLYPH[st]} {st.value}", style=STATE_STYLE[st])
        legend.append("  ")
    bars = Text()
    bars.append(OTHERS_CHAR * 3, style="magenta")
    bars.append(" other users  ")
    bars.append(OURS_CHAR * 3, style="cyan")
    bars.append(" our jobs  ")
    bars.append(FREE_CHAR * 3, style="grey42")
    bars.append(" free")
    colours = Text(
        f"Numbers turn yellow / red at: memory used {MEM_WARN}% / {MEM_CRIT}%, "
        f"utilization {UTIL_WARN}% / {UTIL_CRIT}%, temperature {TEMP_WARN} / {TEMP_CRIT}°C. "
        "The numbers are always written, so nothing depends on colour alone."
    )

    outer = Table.grid(padding=(0, 0))
    outer.add_column()
    outer.add_row(Text("Keys", style="bold underline"))
    outer.add_row(keys)
    outer.add_row(Text(""))
    outer.add_row(Text("In the log (l, z or a click gives it the focus)", style="bold underline"))
    outer.add_row(log_keys)
    outer.add_row(Text(""))
    outer.add_row(Text("In the add / edit form (a, e)", style="bold underline"))
    outer.add_row(form_keys)
    outer.add_row(Text(""))
    outer.add_row(Text("Job details (enter on a job)", style="bold underline"))
    outer.add_row(detail_keys)
    outer.add_row(Text(""))
    outer.add_row(Text("Job states", style="bold underline"))
    outer.add_row(legend)
    outer.add_row(Text(""))
    outer.add_row(Text("GPU memory bar", style="bold underline"))
    outer.add_row(bars)
    outer.add_row(colours)
    outer.add_row(
        Text(
            "\nQuitting leaves running jobs running: the next `gtui QUEUE.toml` re-adopts them. "
            f"In tmux, detach ({prefix} d) to keep the dashboard itself running.",
            style="dim",
        )
    )
    return outer


MORE = "more ↓ · ↓ pgdn end"  # the help's bottom line while text is below the window


class HelpBox(VerticalScroll):
    """The help's scrolling box: says "more ↓" on its bottom line until scrolled to the end,
    so a reader at 120x40 or 80x24 knows the keys go on."""

    def on_mount(self) -> None:
        self.call_after_refresh(self._mark_more)  # once laid out with its text

    def _mark_more(self) -> None:
        self.border_subtitle = MORE if round(self.scroll_y) < self.max_scroll_y else ""

    def on_resize(self) -> None:
        self.call_after_refresh(self._mark_more)  # max_scroll_y is its new one after the layout

    def watch_virtual_size(self) -> None:
        self.call_after_refresh(self._mark_more)  # the text laid out: its height is known

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._mark_more()


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,q,question_mark", "close", "Close"),
    ]

    def __init__(self, prefix: str = "ctrl+b") -> None:
        super().__init__(classes="dialog-screen")
        self.prefix = prefix

    def compose(self) -> ComposeResult:
        with HelpBox(classes="dialog", id="help"):
            yield Static("gtui · keys  (↑ ↓ pgup pgdn scroll, esc closes)", classes="dialog-title")
            yield Static(help_text(self.prefix), id="help-body")

    def action_close(self) -> None:
        self.dismiss(None)
