"""The one reader of a job's log: byte ranges and tails, where the last N lines start, windows
of shown lines by byte offset, search, and the decoded text. The dashboard's log panel
(gtui.ui.logtail), ``gtui log`` / ``gtui follow`` (gtui.commands._logs), the progress reader
(gtui.core.progress), the executors' ``read_log`` and the diagnosis (gtui.core.diagnosis) all
read a log here, so what a line is, how a tail is cut and how bytes are decoded is said once.

A job's log can reach gigabytes (tqdm bars, a chatty trainer). Nothing here reads a whole file:
a reader keeps byte offsets (like toolong) and reads what it needs by ``seek``: the tail
backwards from the end, a window forward from an offset while the user scrolls. Memory is
bounded by ``lines x max_line`` plus a few cached blocks, whatever the file's size.

A line is what lies between two newlines, shown as a terminal would show it: tqdm redraws its
bar with ``\\r``, so only the part after the line's last carriage return is shown, however many
redraws came before (a bar written to a file can run for megabytes before its newline). That
part, when longer than ``max_line``, comes in pieces of ``max_line`` cut from its end (the
latest output); the redraws before it are never read, never shown. A line longer than
``LINE_SCAN`` (no newline in 4 MiB) is taken as ending or starting there.

Search reads the file in chunks from a position, forward or backward, and stops at the first
line whose shown text holds the pattern; a chunk that cannot hold it is skipped at C speed.

The dashboard reads through the ``*_async`` methods (aiofiles: a stalled disk stalls a thread,
never the screen); they run the same line logic over a window read ahead, and the search is one
generator that both readers drive.

No Textual here: the widget turns these raw lines into Rich text (ANSI colours).

Size: the plain and the aiofiles readers share every rule of what a line is (carriage
returns, long lines, windows by byte offset); split, the two would drift.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gtui.core.termtext import plain_text, safe_text, strip_escapes_bytes

BLOCK = 64 * 1024
MAX_LINE = 8 * 1024  # longer shown parts are cut: a screen shows a few hundred columns at most
LINE_SCAN = 4 * 1024 * 1024  # how far a line's newline is looked for
CACHE_BLOCKS = 16  # blocks kept while one window is read (1 MiB)
SEARCH_CHUNK = 1024 * 1024
WINDOW = 256 * 1024  # read ahead around the lines asked for, through aiofiles
WINDOW_MAX = 16 * 1024 * 1024  # wider than this, the block reader runs in a thread


@dataclass(frozen=True)
class LogLine:
    """One shown line: where it starts, where the next one starts, and its text."""

    start: int
    end: int  # offset just after its newline (or the end of what was read)
    text: str  # decoded, carriage returns resolved, still with SGR escapes


def shown_line(raw: str, *, colour: bool = True) -> str:
    """What a terminal would show for ``raw``: the last carriage-return segment, no cursor moves;
    ``colour`` False: without its colours too.

    tqdm redraws its bar with ``\\r``; a terminal shows only the last redraw, so do we. A line
    ending with ``\\r`` (``\\r\\n`` endings, a bar about to be redrawn) keeps its last non-empty
    part.
    """
    raw = raw.rstrip("\r\n")
    if "\r" in raw:
        parts = [p for p in raw.split("\r") if p]
        raw = parts[-1] if parts else ""
    # Only SGR (colours) stays, for Rich's decoder: cursor moves (tqdm's multi-bar ``ESC[A``),
    # resets, titles, clipboard writes would act on the user's terminal. Tabs stay: the widget
    # expands them after the colours.
    return safe_text(raw) if colour else plain_text(raw)


def decode(data: bytes) -> str:
    """A log's bytes as text: UTF-8, what does not decode shown as U+FFFD (a log is the job's
    data, not always valid UTF-8; a tail may start inside a character)."""
    return data.decode("utf-8", errors="replace")


# ------------------------------------------------------------------------------ byte ranges


def read_range(path: str | os.PathLike[str], offset: int, limit: int) -> bytes:
    """Up to ``limit`` bytes of the file from byte ``offset`` (b"": unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(limit)
    except OSError:
        return b""


def reader(path: str | os.PathLike[str]) -> Callable[[int, int], bytes]:
    """``read(offset, limit)`` on one file: :func:`read_range` bound to ``path``."""
    return lambda offset, limit: read_range(path, offset, limit)


def tail_start(size: int, limit: int) -> int:
    """Where the last ``limit`` bytes of a log of ``size`` bytes start."""
    return max(0, size - max(0, limit))


def tail_bytes(f: BinaryIO, max_bytes: int) -> bytes:
    """The last ``max_bytes`` of a seekable binary file, read in one call from its end.

    When the read starts inside the file, the partial first line is dropped (it may also
    start inside a multi-byte character) unless it is the only line.
    """
    size = f.seek(0, os.SEEK_END)
    start = tail_start(size, max_bytes)
    f.seek(start)
    data = f.read(size - start)
    if start > 0:
        nl = data.find(b"\n")
        if 0 <= nl < len(data) - 1:
            data = data[nl + 1 :]
    return data


def read_tail(path: str | os.PathLike[str], max_bytes: int) -> bytes | None:
    """:func:`tail_bytes` of the file at ``path``; None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return tail_bytes(f, max_bytes)
    except OSError:
        return None


def chunks(f: BinaryIO) -> Iterator[bytes]:
    """What an open log holds past its position, BLOCK bytes at a time: ``gtui log`` copies a
    log through it, ``gtui follow`` comes back for more as the log grows."""
    while chunk := f.read(BLOCK):
        yield chunk


def last_lines_offset(path: Path, lines: int) -> int:
    """The byte offset where the last ``lines`` lines of the file start (0: all of it). A last
    line without its newline yet counts as a line. OSError when the file cannot be read."""
    if lines <= 0:
        try:
            return path.stat().st_size
        except OSError:
            return 0
    with path.open("rb") as f:
        end = f.seek(0, os.SEEK_END)
        pos = end
        seen = 0
        first = True
        while pos > 0:
            start = max(0, pos - BLOCK)
            f.seek(start)
            chunk = f.read(pos - start)
            if first and chunk.endswith(b"\n"):
                chunk = chunk[:-1]  # the newline that ends the last line starts nothing
            first = False
            i = len(chunk)
            while True:
                i = chunk.rfind(b"\n", 0, i)
                if i < 0:
                    break
                seen += 1
                if seen == lines:
                    return start + i + 1
            pos = start
        return 0


# ------------------------------------------------------------------- windows of shown lines


class _NeedMore(Exception):
    """The lines asked for reach past the bytes read ahead: read a wider window."""


class _Blocks:
    """One open file read by aligned blocks, the last few kept: finding a line's newline, then
    its last carriage return, then reading its shown part asks for the same bytes again."""

    def __init__(
        self, f: BinaryIO | None, size: int, window: tuple[int, bytes] | None = None
    ) -> None:
        self.f = f
        self.size = size
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._window = window  # (offset, bytes) read ahead, when there is no file to read

    def _block(self, i: int) -> bytes:
        data = self._cache.get(i)
        if data is not None:
            self._cache.move_to_end(i)
            return data
        if self.f is None:
            return self._from_window(i)
        self.f.seek(i * BLOCK)
        data = self.f.read(max(0, min(BLOCK, self.size - i * BLOCK)))
        self._cache[i] = data
        if len(self._cache) > CACHE_BLOCKS:
            self._cache.popitem(last=False)
        return data

    def _from_window(self, i: int) -> bytes:
        """Block ``i`` out of the bytes read ahead; _NeedMore when they do not hold it."""
        lo, data = self._window or (0, b"")
        start, end = i * BLOCK, min((i + 1) * BLOCK, self.size)
        if start < lo or end > lo + len(data):
            raise _NeedMore
        return data[start - lo : end - lo]

    def find(self, byte: bytes, lo: int, hi: int) -> int:
        """The first ``byte`` in [lo, hi), or -1."""
        pos, hi = max(0, lo), min(hi, self.size)
        while pos < hi:
            base = pos - pos % BLOCK
            data = self._block(base // BLOCK)
            if not data:
                break
            j = data.find(byte, pos - base, hi - base)
            if j >= 0:
                return base + j
            pos = base + len(data)
        return -1

    def rfind(self, byte: bytes, lo: int, hi: int) -> int:
        """The last ``byte`` in [lo, hi), or -1."""
        lo, pos = max(0, lo), min(hi, self.size)
        while pos > lo:
            base = (pos - 1) - (pos - 1) % BLOCK
            data = self._block(base // BLOCK)
            j = data.rfind(byte, max(lo - base, 0), pos - base)
            if j >= 0:
                return base + j
            pos = base
        return -1

    def read(self, lo: int, hi: int) -> bytes:
        parts = []
        pos, hi = max(0, lo), min(hi, self.size)
        while pos < hi:
            base = pos - pos % BLOCK
            data = self._block(base // BLOCK)
            if not data:
                break
            parts.append(data[pos - base : hi - base])
            pos = base + len(data)
        return b"".join(parts)

    def content_end(self, start: int, end: int) -> int:
        """``end`` less the line's own newline and the carriage returns just before it."""
        if end > start and self.read(end - 1, end) == b"\n":
            end -= 1
        while end > start:
            tail = self.read(max(start, end - 256), end)
            kept = tail.rstrip(b"\r")
            end -= len(tail) - len(kept)
            if kept:
                break
        return end

    def shown_start(self, start: int, content_end: int) -> int:
        """Where the shown part of a line begins: after its last carriage return."""
        cr = self.rfind(b"\r", start, content_end)
        return cr + 1 if cr >= 0 else start


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

    def _text(self, r: _Blocks, lo: int, hi: int) -> str:
        return shown_line(decode(r.read(lo, hi)))

    def last_lines(self, n: int) -> list[LogLine]:
        """The last ``n`` lines of the file (the tail window while following)."""
        try:
            with self.path.open("rb") as f:
                end = f.seek(0, os.SEEK_END)
                return self._lines_before(_Blocks(f, end), end, n)
        except OSError:
            return []

    def lines_before(self, offset: int, n: int) -> list[LogLine]:
        """The ``n`` lines that end at or before ``offset`` (scrolling up)."""
        try:
            with self.path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                return self._lines_before(_Blocks(f, size), min(offset, size), n)
        except OSError:
            return []

    def lines_from(self, offset: int, n: int) -> list[LogLine]:
        """Up to ``n`` lines starting at ``offset`` (a line start) going forward."""
        try:
            with self.path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                return self._lines_from(_Blocks(f, size), offset, n)
        except OSError:
            return []

    def _lines_from(self, r: _Blocks, offset: int, n: int) -> list[LogLine]:
        out: list[LogLine] = []
        size = r.size
        pos = max(0, min(offset, size))
        while len(out) < n and pos < size:
            nl = r.find(b"\n", pos, pos + LINE_SCAN)
            line_end = nl + 1 if nl >= 0 else min(size, pos + LINE_SCAN)
            content = r.content_end(pos, line_end)
            seg = r.shown_start(pos, content)
            if content - seg <= self.max_line:
                out.append(LogLine(pos, line_end, self._text(r, seg, line_end)))
                pos = line_end
                continue
            # A long shown part: pieces cut as lines_before cuts them (from its end), so
            # scrolling down and up meet the same pieces. The first one stands for the
            # whole line before it (the redraws it overwrote are not shown).
            a = pos
            b = seg + ((content - seg) % self.max_line or self.max_line)
            while len(out) < n and a < content:
                end = line_end if b >= content else b
                out.append(LogLine(a, end, self._text(r, max(a, seg), b)))
                a, b = end, min(b + self.max_line, content)
            pos = a
        return out

    def _lines_before(self, r: _Blocks, end: int, n: int) -> list[LogLine]:
        """Walk back from ``end`` line by line until ``n`` shown lines are found.

        Each line costs the bytes of its shown part (at most ``n * max_line`` in all) and the
        search for its newline, never its overwritten redraws; a file with no newline at all (a
        sparse 1 GB file, a binary dump) costs one LINE_SCAN.
        """
        out: list[LogLine] = []
        pos = end
        while len(out) < n and pos > 0:
            line_end = pos
            content = r.content_end(0, line_end)
            lo = max(0, content - LINE_SCAN)
            nl = r.rfind(b"\n", lo, content)
            start = nl + 1 if nl >= 0 else lo
            seg = r.shown_start(start, content)
            if content - seg <= self.max_line:
                out.append(LogLine(start, line_end, self._text(r, seg, line_end)))
            else:
                b, e = content, line_end
                while len(out) < n and b - seg > self.max_line:
                    out.append(LogLine(b - self.max_line, e, self._text(r, b - self.max_line, b)))
                    b = e = b - self.max_line
                if len(out) < n:
                    out.append(LogLine(start, e, self._text(r, seg, b)))
            if nl < 0 and lo > 0:
                break  # no newline in LINE_SCAN: what lies before is the same line, not shown
            pos = start
        out.reverse()
        return out

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

    # -- search -----------------------------------------------------------------------------

    def search(
        self,
        query: SearchQuery,
        offset: int,
        *,
        forward: bool = True,
        cancelled: Callable[[], bool] | None = None,
        chunk: int = SEARCH_CHUNK,
    ) -> LogLine | None:
        """The first line at or after ``offset`` (forward), or the last one ending at or before
        it (backward), whose shown text holds ``query``; None if none (or ``cancelled``).

        The file is read ``chunk`` bytes at a time from ``offset``: memory is one chunk,
        whatever the file's size. ``offset`` should be a line start.
        """
        try:
            with self.path.open("rb") as f:
                size = f.seek(0, os.SEEK_END)
                steps = _search_steps(size, query, offset, forward, cancelled, chunk)
                try:
                    at, n = next(steps)
                    while True:
                        f.seek(at)
                        at, n = steps.send(f.read(n))
                except StopIteration as done:
                    found: LogLine | None = done.value
                    return found
        except OSError:
            return None

    # -- the same, read through aiofiles: the dashboard's way (a stalled disk stalls a thread
    # of the executor, never the screen) --------------------------------------------------

    async def size_async(self) -> int:
        """:meth:`size`, without blocking the event loop."""
        import aiofiles.os  # the dashboard's only: `gtui log` and the scheduler never load it

        try:
            st = await aiofiles.os.stat(self.path)
        except OSError:
            return 0
        return st.st_size

    async def exists_async(self) -> bool:
        import aiofiles.os

        return bool(await aiofiles.os.path.exists(self.path))

    async def last_lines_async(self, n: int) -> list[LogLine]:
        """:meth:`last_lines`, without blocking the event loop."""
        return await self._windowed(
            lambda size: (size, size),
            lambda r: self._lines_before(r, r.size, n),
            lambda: self.last_lines(n),
        )

    async def lines_before_async(self, offset: int, n: int) -> list[LogLine]:
        """:meth:`lines_before`, without blocking the event loop."""
        return await self._windowed(
            lambda size: (min(offset, size), min(offset, size)),
            lambda r: self._lines_before(r, min(offset, r.size), n),
            lambda: self.lines_before(offset, n),
        )

    async def lines_from_async(self, offset: int, n: int) -> list[LogLine]:
        """:meth:`lines_from`, without blocking the event loop."""
        return await self._windowed(
            lambda size: (offset, offset + n * 256),
            lambda r: self._lines_from(r, offset, n),
            lambda: self.lines_from(offset, n),
        )

    async def _windowed(
        self,
        around: Callable[[int], tuple[int, int]],
        lines: Callable[[_Blocks], list[LogLine]],
        fallback: Callable[[], list[LogLine]],
    ) -> list[LogLine]:
        """Read a window of the file around ``around(size)`` with aiofiles and find the lines
        in it; a window too narrow for them (long lines, a tqdm bar megabytes long) is read
        again 4 times wider, up to WINDOW_MAX, past which the plain reader runs in a thread
        (its memory is bounded by its block cache, a window's would not be)."""
        import aiofiles

        try:
            async with aiofiles.open(self.path, "rb") as f:
                size = await f.seek(0, os.SEEK_END)
                lo_at, hi_at = around(size)
                span = WINDOW
                while True:
                    lo = max(0, lo_at - span)
                    lo -= lo % BLOCK
                    hi = min(size, hi_at + span)
                    await f.seek(lo)
                    data = await f.read(hi - lo)
                    try:
                        end = size if len(data) == hi - lo else lo + len(data)  # shrank
                        return lines(_Blocks(None, end, (lo, data)))
                    except _NeedMore:
                        if lo == 0 and hi >= size:
                            return []  # the whole file is read: nothing more to ask
                        if span >= WINDOW_MAX:
                            break
                        span *= 4
        except OSError:
            return []
        return await asyncio.to_thread(fallback)

    async def search_async(
        self,
        query: SearchQuery,
        offset: int,
        *,
        forward: bool = True,
        cancelled: Callable[[], bool] | None = None,
        chunk: int = SEARCH_CHUNK,
    ) -> LogLine | None:
        """:meth:`search`, read through aiofiles chunk by chunk."""
        import aiofiles

        try:
            async with aiofiles.open(self.path, "rb") as f:
                size = await f.seek(0, os.SEEK_END)
                steps = _search_steps(size, query, offset, forward, cancelled, chunk)
                try:
                    at, n = next(steps)
                    while True:
                        await f.seek(at)
                        at, n = steps.send(await f.read(n))
                except StopIteration as done:
                    found: LogLine | None = done.value
                    return found
        except OSError:
            return None


def _search_steps(
    size: int,
    query: SearchQuery,
    offset: int,
    forward: bool,
    cancelled: Callable[[], bool] | None,
    chunk: int,
) -> Generator[tuple[int, int], bytes, LogLine | None]:
    """The search as a generator: it yields (offset, length) to read and is sent the bytes;
    its return value is the line found. The plain and the aiofiles readers both drive it, so
    there is one search whatever reads the file."""
    pos = max(0, min(offset, size))
    if forward:
        while pos < size:
            if cancelled is not None and cancelled():
                return None
            data = yield pos, min(chunk, size - pos)
            if not data:
                break
            if pos + len(data) < size:
                nl = data.rfind(b"\n")
                if nl >= 0:
                    data = data[: nl + 1]  # whole lines only; the rest comes with the next
            if query.may_be_in(data):
                for a, b in _spans(data):
                    text = shown_line(decode(data[a:b]))
                    if query.in_text(text):
                        return LogLine(pos + a, pos + b, text)
            pos += len(data)
        return None
    while pos > 0:
        if cancelled is not None and cancelled():
            return None
        lo = max(0, pos - chunk)
        data = yield lo, pos - lo
        if not data:
            break
        if lo > 0:
            nl = data.find(b"\n")
            if 0 <= nl < len(data) - 1:
                data = data[nl + 1 :]  # whole lines only; the partial first one comes next
                lo += nl + 1
        if query.may_be_in(data):
            for a, b in reversed(_spans(data)):
                text = shown_line(decode(data[a:b]))
                if query.in_text(text):
                    return LogLine(lo + a, lo + b, text)
        pos = lo
    return None


def _spans(data: bytes) -> list[tuple[int, int]]:
    """The lines of ``data`` as (start, end) pairs, each end just after its newline."""
    spans: list[tuple[int, int]] = []
    s = 0
    while s < len(data):
        nl = data.find(b"\n", s)
        e = len(data) if nl < 0 else nl + 1
        spans.append((s, e))
        s = e
    return spans


# C1 controls in UTF-8: termtext drops them too
_C1_B = re.compile(rb"\xc2[\x80-\x9f]")
_C0_B = bytes(range(0x20)).replace(b"\t", b"") + b"\x7f"


class SearchQuery:
    """What ``/`` looks for: plain text, case-insensitive unless it has a capital (as less -i
    and vim's smartcase do)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.case_sensitive = text != text.lower()
        self._needle = text if self.case_sensitive else text.lower()
        ascii_ = text.isascii()
        self._needle_b = self._needle.encode() if ascii_ else None

    def in_text(self, text: str) -> bool:
        """Whether a shown line (with its SGR colours) holds the query."""
        plain = plain_text(text) if "\x1b" in text else text
        return self._needle in (plain if self.case_sensitive else plain.lower())

    def may_be_in(self, data: bytes) -> bool:
        """False only if no line of ``data`` can show the query: its bytes, less every escape
        sequence and control character (what the shown text loses), do not hold it."""
        if self._needle_b is None or _C1_B.search(data):
            return True  # a non-ASCII query (case folding) or C1 controls: look line by line
        data = strip_escapes_bytes(data)
        data = data.translate(None, _C0_B)
        if not self.case_sensitive:
            data = data.lower()
        return self._needle_b in data
