"""Read a window of a log file by byte offsets, never the whole file.

A job's log can reach gigabytes (tqdm bars, a chatty trainer). The log panel only ever shows a
screenful, so it keeps byte offsets (like toolong) and reads the lines it shows by ``seek``: the
tail window backwards from the end while following, a window forward from an offset while the
user scrolls. Memory is bounded by ``lines x max_line``, whatever the file's size.

No Textual here: the widget turns these raw lines into Rich text (ANSI, carriage returns).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gtui.core.termtext import safe_text

BLOCK = 64 * 1024
MAX_LINE = 8 * 1024  # longer lines are cut: a screen shows a few hundred columns at most


@dataclass(frozen=True)
class LogLine:
    """One line of the file: where it starts, where the next one starts, and its text."""

    start: int
    end: int  # offset just after its newline (or the end of what was read)
    text: str  # decoded, carriage returns resolved, still with SGR escapes


def clean_line(raw: str) -> str:
    """What a terminal would show for ``raw``: the last carriage-return segment, no cursor moves.

    tqdm redraws its bar with ``\\r``; a terminal shows only the last redraw, so do we. A line
    ending with ``\\r`` (``\\r\\n`` endings, a bar about to be redrawn) keeps its last non-empty
    part.
    """
    raw = raw.rstrip("\r\n")
    if "\r" in raw:
        parts = [p for p in raw.split("\r") if p]
        raw = parts[-1] if parts else ""
    # Only SGR (colours) stays, for Rich's decoder: cursor moves (tqdm's multi-bar ``ESC[A``),
    # resets, titles, clipboard writes would act on the user's terminal (issue 14.10).
    return safe_text(raw)  # tabs stay: the widget expands them after the colours


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class LogTail:
    """Line windows of one file, addressed by byte offsets. Cheap to create; holds no data."""

    def __init__(self, path: str | os.PathLike[str], max_line: int = MAX_LINE) -> None:
        self.path = Path(path)
        self.max_line = max_line

    def size(self) -> int:
        """The file's size now; 0 when it does not exist (yet)."""
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def last_lines(self, n: int) -> list[LogLine]:
        """The last ``n`` lines of the file (the tail window while following)."""
        try:
            with self.path.open("rb") as f:
                end = f.seek(0, os.SEEK_END)
                return self._lines_before(f, end, n)
        except OSError:
            return []

    def lines_before(self, offset: int, n: int) -> list[LogLine]:
        """The ``n`` lines that end at or before ``offset`` (scrolling up)."""
        try:
            with self.path.open("rb") as f:
                end = min(offset, f.seek(0, os.SEEK_END))
                return self._lines_before(f, end, n)
        except OSError:
            return []

    def lines_from(self, offset: int, n: int) -> list[LogLine]:
        """Up to ``n`` lines starting at ``offset`` (a line start) going forward."""
        out: list[LogLine] = []
        try:
            with self.path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                pos = max(0, min(offset, size))
                while len(out) < n and pos < size:
                    f.seek(pos)
                    chunk = f.read(self.max_line)
                    nl = chunk.find(b"\n")
                    if nl >= 0:
                        end = pos + nl + 1
                        data = chunk[: nl + 1]
                    else:
                        # The last line (no newline yet), or a line longer than max_line: cut it
                        # and go on after the cut so the window always advances.
                        end = pos + len(chunk)
                        data = chunk
                    out.append(LogLine(pos, end, clean_line(_decode(data))))
                    pos = end
        except OSError:
            return out
        return out

    def _lines_before(self, f: BinaryIO, end: int, n: int) -> list[LogLine]:
        """Read backwards from ``end`` by blocks until ``n`` lines are found.

        Reads at most ``n * max_line`` bytes, so a file with no newline at all (a sparse 1 GB
        file, a binary dump) costs no more than a window of long lines.
        """
        if n <= 0 or end <= 0:
            return []
        budget = n * self.max_line
        start = end
        buf = b""
        newlines = 0
        while start > 0 and end - start < budget:
            step = min(BLOCK, start, budget - (end - start))
            start -= step
            f.seek(start)
            block = f.read(step)
            newlines += block.count(b"\n")
            buf = block + buf
            # n lines need n newlines before the last line's own (final) newline.
            if newlines - (1 if buf.endswith(b"\n") else 0) >= n:
                break
        spans: list[tuple[int, int]] = []
        s = 0
        while True:
            nl = buf.find(b"\n", s)
            if nl < 0:
                break
            spans.append((s, nl + 1))
            s = nl + 1
        if s < len(buf):
            spans.append((s, len(buf)))
        if start > 0 and len(spans) > n:
            spans = spans[1:]  # a partial first line; not needed
        # A line longer than max_line is shown as max_line pieces, cut from its end (its latest
        # output); lines_from then steps through the same pieces going forward.
        pieces: list[tuple[int, int]] = []
        for a, b in reversed(spans):
            while b - a > self.max_line and len(pieces) < n:
                pieces.append((b - self.max_line, b))
                b -= self.max_line
            if len(pieces) >= n:
                break
            if b > a:
                pieces.append((a, b))
            if len(pieces) >= n:
                break
        pieces.reverse()
        return [LogLine(start + a, start + b, clean_line(_decode(buf[a:b]))) for a, b in pieces]

    def line_start(self, offset: int) -> int:
        """The start of the line that holds ``offset`` (reads at most ``max_line`` bytes back)."""
        if offset <= 0:
            return 0
        try:
            with self.path.open("rb") as f:
                lo = max(0, offset - self.max_line)
                f.seek(lo)
                data = f.read(offset - lo)
        except OSError:
            return 0
        nl = data.rfind(b"\n")
        if nl >= 0:
            return lo + nl + 1
        return lo
