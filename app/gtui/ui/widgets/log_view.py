"""The selected job's log: followed live, scrollable, and bounded in memory whatever its size.

The widget keeps a byte offset (the first shown line while scrolling) and reads only the lines
that fit on screen through LogTail; it never holds the file. tqdm's carriage returns and ANSI
colours are resolved per line (LogTail cleans, Rich decodes the colours).

Every read goes through aiofiles (LogTail's ``*_async`` readers) in a worker, never on the event
loop: a log on a network disk that stops answering stalls one read, not the screen.
While a read is under way, more requests (a poll, a key that scrolls) are folded into one more
read when it ends, so a stuck file holds one executor thread, not one per poll; showing another
file drops the stuck read and reads the new one at once.

Search (``/`` while the log has the focus, then ``n`` / ``N``) reads the file the same way,
chunk by chunk from the current position (LogTail.search_async); the match is shown with two
lines of context above it, and every match on screen is highlighted.
"""

from __future__ import annotations

import threading
from pathlib import Path

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from gtui.ui.logtail import LogLine, LogTail, SearchQuery

MATCH_STYLE = Style(color="black", bgcolor="yellow")
CURRENT_MATCH_STYLE = Style(color="black", bgcolor="bright_magenta", bold=True, underline=True)
SEARCH_CONTEXT = 2  # lines shown above a match


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


class LogView(Widget, can_focus=True):
    """Shows a window of one log file. ``follow`` keeps the window at the end."""

    BINDINGS = [
        Binding("up,k", "scroll_lines(-1)", "Up", show=False),
        Binding("down,j", "scroll_lines(1)", "Down", show=False),
        Binding("pageup", "scroll_page(-1)", "Page up", show=False),
        Binding("pagedown,space", "scroll_page(1)", "Page down", show=False),
        Binding("home,g", "top", "Top", show=False),
        Binding("end,G", "bottom", "Bottom", show=False),
        Binding("slash", "search", "Search", show=False),
        Binding("n", "search_next(1)", "Next match", show=False),
        Binding("N", "search_next(-1)", "Previous match", show=False),
    ]

    follow: reactive[bool] = reactive(True)

    class Changed(Message):
        """Follow mode or position changed: the title should say so."""

    class SearchRequested(Message):
        """``/`` in the log: the screen opens its search input for this log."""

        def __init__(self, log: LogView) -> None:
            super().__init__()
            self.log = log

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._tail: LogTail | None = None
        self._placeholder = "select a job to see its log"
        self._top = 0  # byte offset of the first shown line while not following
        self._shown: list[LogLine] = []
        self._rows: list[Text] = []
        self._rows_width = 0  # the width self._rows were wrapped at
        self._strips: dict[int, Strip] = {}
        self._file_size = 0
        self.search_query: SearchQuery | None = None  # the last search
        self.match: LogLine | None = None  # the line it found last
        self.searching = False
        self._search_cancel: threading.Event | None = None
        self._gen = 0  # bumped when the file changes: what a read of an older one finds is dropped
        self._reading = False  # a read of the current file is under way
        self._again = False  # asked again meanwhile: one more read when it ends
        self._scroll = 0  # lines to scroll, taken by the next read
        self._exists: bool | None = None  # file there at the last read? None: no read yet

    # -- what is shown ----------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        return self._tail.path if self._tail else None

    @property
    def file_size(self) -> int:
        return self._file_size

    @property
    def position(self) -> float:
        """Where the window is, 0..1 (1 while following)."""
        if self.follow or not self._file_size:
            return 1.0
        return min(1.0, self._top / self._file_size)

    def show(self, path: Path | None, placeholder: str = "no log yet") -> None:
        """Switch to another file (or none); a new file starts followed."""
        if path is not None and self._tail is not None and self._tail.path == path:
            self.reload()
            return
        self._tail = LogTail(path) if path is not None else None
        self._placeholder = placeholder
        self._top = 0
        self.follow = True
        self._stop_search()
        self.match = None
        self._gen += 1
        self._reading = False  # a read of the old file, stuck or not, no longer counts
        self._scroll = 0
        self._shown, self._rows, self._file_size, self._exists = [], [], 0, None
        self._strips.clear()
        self.reload()

    def poll(self) -> bool:
        """Re-read if the file changed size (off the loop); False while a read is under way."""
        if self._tail is None:
            return False
        return self._request(check=True)

    def reload(self) -> None:
        """Read (off the loop) the window for the current size and position; only it is kept."""
        self._request(check=False)

    def _request(self, *, check: bool) -> bool:
        if self._tail is None:
            self._apply([], 0, exists=True)
            return False
        if self._reading:
            self._again = self._again or not check
            return False
        self._reading = True
        self._again = False
        self.run_worker(
            self._read(self._gen, check), group="log-read", exclusive=True, exit_on_error=False
        )
        return True

    async def _read(self, gen: int, check: bool) -> None:
        """Read until nothing more was asked meanwhile; a read for a file no longer shown is
        dropped."""
        tail = self._tail
        try:
            while tail is not None and gen == self._gen:
                size = await tail.size_async()
                if gen != self._gen:
                    return
                if check and size == self._file_size and not (self._scroll or self._again):
                    return
                check = self._again = False  # asked so far: served here (asked later: again)
                if self._scroll:
                    delta, self._scroll = self._scroll, 0
                    await self._scroll_by(tail, delta, size)
                height = max(1, self.content_size.height or self.size.height or 20)
                if self.follow:
                    shown = await tail.last_lines_async(height)
                else:
                    shown = await tail.lines_from_async(self._top, height)
                exists = size > 0 or await tail.exists_async()
                if gen != self._gen:
                    return
                self._apply(shown, size, exists=exists)
                if not self._again:
                    return
        finally:
            if gen == self._gen:
                self._reading = False

    async def _scroll_by(self, tail: LogTail, delta: int, size: int) -> None:
        if delta < 0:
            before = await tail.lines_before_async(self._top, -delta)
            if before:
                self._top = before[0].start
        else:
            if self._shown and self._shown[-1].end >= size:
                return  # the end of the file is already on screen
            ahead = await tail.lines_from_async(self._top, delta + 1)
            if len(ahead) > delta:
                self._top = ahead[delta].start

    def _apply(self, shown: list[LogLine], size: int, *, exists: bool) -> None:
        self._shown, self._file_size, self._exists = shown, size, exists
        self._rows = self._layout(self._shown)
        self._strips.clear()
        self.refresh()
        self.post_message(self.Changed())

    def _layout(self, lines: list[LogLine]) -> list[Text]:
        width = self._rows_width = max(10, self.content_size.width or self.size.width or 80)
        height = max(1, self.content_size.height or self.size.height or 20)
        rows: list[Text] = []
        console = self.app.console
        q, match = self.search_query, self.match
        for line in lines:
            text = Text.from_ansi(line.text) if "\x1b" in line.text else Text(line.text)
            text.end = ""
            if "\t" in text.plain:
                text.expand_tabs(8)
            if q is not None:
                current = match is not None and match.start <= line.start < match.end
                text.highlight_words(
                    [q.text],
                    CURRENT_MATCH_STYLE if current else MATCH_STYLE,
                    case_sensitive=q.case_sensitive,
                )
            wrapped = text.wrap(console, width, overflow="fold") if text.plain else [Text("")]
            for row in wrapped:
                row.end = ""
                row.no_wrap = True
                rows.append(row)
        if self.follow:
            return rows[-height:]
        return rows[:height]

    def text(self) -> Text:
        """What is shown, as one Text (tests and screenshots read this)."""
        return Text("\n", no_wrap=True, end="").join(self._display_rows())

    def _display_rows(self) -> list[Text]:
        if self._tail is None:
            return [Text(self._placeholder, style="dim")]
        if not self._rows:  # "reading…" until the first read is in, never "(empty log)"
            name = self._tail.path.name
            notes = {None: "reading…", False: f"{self._placeholder} ({name} not written yet)"}
            return [Text(notes.get(self._exists, "(empty log)"), style="dim")]
        return self._rows

    def render_line(self, y: int) -> Strip:
        """Line API: each row becomes a Strip once per reload, and only rows on screen do."""
        width = self.content_size.width or self.size.width
        if self._shown and self._rows_width != max(10, width or 80):  # resized since the read:
            self._rows, self._strips = self._layout(self._shown), {}  # never old rows cropped
        strip = self._strips.get(y)
        if strip is None or strip.cell_length != width:
            style = self.rich_style
            rows = self._display_rows()
            if y >= len(rows):
                return Strip.blank(width, style)
            segments = list(rows[y].render(self.app.console))
            strip = Strip(segments).apply_style(style).crop_extend(0, width, style)
            self._strips[y] = strip
        return strip

    def on_resize(self, event: events.Resize) -> None:
        self.reload()

    # -- scrolling --------------------------------------------------------------------------

    def _stop_following(self) -> None:
        if self.follow:
            self._top = self._shown[0].start if self._shown else 0
            self.follow = False

    def action_scroll_lines(self, delta: int) -> None:
        if self._tail is None:
            return
        self._stop_following()
        self._scroll += delta  # taken by the read, with any other scroll pressed meanwhile
        self.reload()

    def action_scroll_page(self, direction: int) -> None:
        height = max(1, self.content_size.height - 1)
        self.action_scroll_lines(direction * height)

    def action_top(self) -> None:
        if self._tail is None:
            return
        self.follow = False
        self._top = 0
        self.reload()

    def action_bottom(self) -> None:
        self.follow = True
        self.reload()

    def toggle_follow(self) -> None:
        if self.follow:
            self._stop_following()
        else:
            self.follow = True
        self.reload()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self.action_scroll_lines(-3)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self.action_scroll_lines(3)

    def status(self) -> str:
        """``following`` / ``paused at 45%`` and the file's size, and the search: for the
        panel's title."""
        if self._tail is None:
            return ""
        where = "following" if self.follow else f"paused at {self.position:.0%} (f follows)"
        out = f"{where} · {'reading…' if self._exists is None else _human_bytes(self._file_size)}"
        if self.search_query is not None:
            busy = " searching…" if self.searching else ""
            out = f"/{self.search_query.text}{busy} · {out}"
        return out

    # -- search -----------------------------------------------------------------------------

    def action_search(self) -> None:
        self.post_message(self.SearchRequested(self))

    def search(self, text: str) -> None:
        """Look for ``text``: while following, its last occurrence (the latest output); else
        the first at or after the top line shown. An empty text clears the search."""
        self._stop_search()
        self.match = None
        self.search_query = SearchQuery(text) if text else None
        if self.search_query is None or self._tail is None:
            self.reload()
            return
        if self.follow:
            self._find(self._file_size, forward=False)
        else:
            self._find(self._top, forward=True)

    def action_search_next(self, direction: int) -> None:
        """``n`` (1): the next match below the last one; ``N`` (-1): the one above."""
        if self.search_query is None:
            self.notify("no search yet: / searches the log", timeout=3)
            return
        if self._tail is None:
            return
        m = self.match
        if direction > 0:
            offset = m.end if m is not None else (self._shown[0].start if self._shown else 0)
            self._find(offset, forward=True)
        else:
            if m is not None:
                offset = m.start
            else:
                offset = self._file_size if self.follow or not self._shown else self._top
            self._find(offset, forward=False)

    def _stop_search(self) -> None:
        if self._search_cancel is not None:
            self._search_cancel.set()
            self._search_cancel = None
        self.searching = False

    def _find(self, offset: int, *, forward: bool) -> None:
        tail, query = self._tail, self.search_query
        if tail is None or query is None:
            return
        self._stop_search()
        cancel = threading.Event()
        self._search_cancel = cancel
        self.searching = True
        self.reload()

        async def run() -> None:
            try:
                found = await tail.search_async(
                    query, offset, forward=forward, cancelled=cancel.is_set
                )
            finally:
                if self._search_cancel is cancel:
                    self._search_cancel = None
                    self.searching = False
            if cancel.is_set() or tail is not self._tail or query is not self.search_query:
                return  # another search, or another file, came meanwhile
            await self._show_match(found, forward)

        self.run_worker(run(), group="log-search", exclusive=True, exit_on_error=False)

    async def _show_match(self, found: LogLine | None, forward: bool) -> None:
        if found is None or self._tail is None:
            where = "below" if forward else "above"
            what = self.search_query.text if self.search_query is not None else ""
            more = "more " if self.match is not None else ""
            self.notify(f"no {more}match for {what!r} {where}", timeout=3, markup=False)
            self.reload()
            return
        self.match = found
        self.follow = False
        before = await self._tail.lines_before_async(found.start, SEARCH_CONTEXT)
        self._top = before[0].start if before else found.start
        self.reload()
