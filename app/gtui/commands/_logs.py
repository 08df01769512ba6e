"""What ``gtui log`` and ``gtui follow`` share: which file is a job's log, where its last lines
start (gtui.core.joblog reads every log: ``tail_offset`` and ``shown_line`` are its), and how its
bytes reach the user's screen.

To a terminal, a log is shown as the dashboard shows it (gtui.core.termtext): colours (SGR) kept,
every other escape sequence and control character dropped, and of a line redrawn with carriage
returns (tqdm) only the last redraw. The line still being written is shown and redrawn in place
until its newline comes. Piped or redirected, the bytes go out as the job wrote them (as ``cat``
would: a log is the job's data). With ``NO_COLOR`` set (https://no-color.org), the colours go,
on a terminal and into a pipe alike: whoever sets it asked to see none, wherever the text lands
(``NO_COLOR=1 gtui log q.toml job | less``); in a pipe every other byte stays.
"""

from __future__ import annotations

import codecs
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO

from gtui.core import joblog
from gtui.core.errors import GtuiError
from gtui.core.joblog import shown_line
from gtui.core.paths import QueuePaths
from gtui.core.termtext import strip_sgr_bytes

BLOCK = joblog.BLOCK  # what `gtui log` and `gtui follow` read at a time
tail_offset = joblog.last_lines_offset  # where the last N lines of a log start

_CLEAR_LINE = "\r\x1b[K"  # back to the line's start, erase it: gtui's own, not the log's
_RESET = "\x1b[0m"
REDRAW_MAX = 4096  # an unfinished line longer than this is redrawn by its last characters


def _ended(line: str) -> str:
    """A line with colours in it ends with a reset, so none runs on into gtui's own text."""
    return line + _RESET if "\x1b" in line and not line.endswith(_RESET) else line


def no_color() -> bool:
    """Whether the user asked for no colours: ``NO_COLOR`` set and not empty (no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))


class _Line:
    """The line being written, kept as a terminal shows it: of its carriage-return parts only
    the last non-empty one can be on the screen, so the parts before it are dropped as they
    come. Each byte of a log is handled a fixed number of times, however long the line runs
    (a tqdm bar written to a file is megabytes of redraws before its newline)."""

    def __init__(self) -> None:
        self.size = 0  # characters taken since the line began
        self._last = ""  # the last non-empty part ended by a carriage return
        self._cur: list[str] = []  # the part after the last carriage return, in pieces
        self._cur_len = 0

    def add(self, piece: str) -> None:
        """Take more of the line (``piece`` holds no newline)."""
        self.size += len(piece)
        if "\r" not in piece:
            if piece:
                self._cur.append(piece)
                self._cur_len += len(piece)
            return
        parts = piece.split("\r")
        tail = parts.pop()
        later = next((p for p in reversed(parts[1:]) if p), "")
        if later:
            self._last = later
        elif self._cur_len or parts[0]:
            self._last = "".join(self._cur) + parts[0]
        self._cur = [tail] if tail else []
        self._cur_len = len(tail)

    def shown_len(self) -> int:
        return self._cur_len or len(self._last)

    def shown(self) -> str:
        """The part a terminal shows: the last non-empty one (what ``shown_line`` picks)."""
        if not self._cur_len:
            return self._last
        if len(self._cur) > 1:
            self._cur = ["".join(self._cur)]
        return self._cur[0]

    def shown_tail(self, n: int) -> str:
        """The last ``n`` characters of :meth:`shown`, without joining the rest."""
        if not self._cur_len:
            return self._last[-n:]
        taken: list[str] = []
        got = 0
        for piece in reversed(self._cur):
            taken.append(piece[-(n - got) :])
            got += len(taken[-1])
            if got >= n:
                break
        return "".join(reversed(taken))


class LogPrinter:
    """Writes a log's bytes as they come, raw or made safe for a terminal (module docstring)."""

    def __init__(self, out: Any = None, *, terminal: bool | None = None) -> None:
        self.out = out if out is not None else sys.stdout
        self.terminal = self.out.isatty() if terminal is None else terminal
        self.colour = not no_color()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._line = _Line()  # the line being written, not yet ended by a newline
        self._shown = False  # whether that line is on the screen (to be redrawn)
        self._held = b""  # piped with NO_COLOR: a colour sequence the next read may end

    def feed(self, data: bytes) -> None:
        if not data:
            return
        if not self.terminal:
            if not self.colour:
                data, self._held = strip_sgr_bytes(self._held + data)
            self._write_raw(data)
            return
        pieces = self._decoder.decode(data).split("\n")
        parts: list[str] = []
        for piece in pieces[:-1]:
            if self._shown:
                parts.append(_CLEAR_LINE)
                self._shown = False
            self._line.add(piece)
            parts.append(_ended(shown_line(self._line.shown(), colour=self.colour)) + "\n")
            self._line = _Line()
        self._line.add(pieces[-1])
        if self._line.size:
            partial = self._partial()
            if partial or self._shown:
                parts.append(_CLEAR_LINE + _ended(partial))
                self._shown = True
        self.out.write("".join(parts))
        self.out.flush()

    def _partial(self) -> str:
        """The unfinished line's redraw. One longer than ``REDRAW_MAX`` (far wider than a
        terminal) is redrawn by its last ``REDRAW_MAX`` characters, so a line that grows for
        megabytes costs each read a bounded redraw (the cut may fall inside an escape
        sequence, shown as text until the line ends); its newline, or the log's end, prints
        it whole."""
        line = self._line
        if line.shown_len() <= REDRAW_MAX:
            return shown_line(line.shown(), colour=self.colour)
        return shown_line(line.shown_tail(REDRAW_MAX), colour=self.colour)

    def _write_raw(self, data: bytes) -> None:
        buffer: BinaryIO | None = getattr(self.out, "buffer", None)
        if buffer is not None:
            self.out.flush()
            buffer.write(data)
            buffer.flush()
        elif data:
            self.out.write(data.decode("utf-8", errors="replace"))
            self.out.flush()

    def close(self) -> None:
        """The log ended: end its last line."""
        if not self.terminal:
            held, self._held = self._held, b""
            if held:  # a sequence the log never ended: as written
                self._write_raw(held)
            return
        self._line.add(self._decoder.decode(b"", final=True))
        if self._line.size or self._shown:
            line = shown_line(self._line.shown(), colour=self.colour)
            self.out.write(_CLEAR_LINE + _ended(line) + "\n")
            self.out.flush()
        self._line = _Line()
        self._shown = False


def attempt_log(paths: QueuePaths, job: dict[str, Any], attempt: int | None) -> Path | None:
    """The log of ``attempt`` of the job (its ``gtui status --json`` object); None: the latest
    (the one the job has now, None before its first start)."""
    name = str(job["name"])
    latest = int(job.get("attempt") or 0)
    if attempt is None or attempt == latest:
        log = job.get("log")
        if attempt is not None and not log:
            raise GtuiError(f"{name} has no log of attempt {attempt}")
        return Path(log) if log else None
    if attempt < 1 or attempt > latest:
        tries = f"{latest} attempt{'s' if latest != 1 else ''}" if latest else "not started yet"
        raise GtuiError(f"{name} has no attempt {attempt}: it has {tries}")
    from gtui.core.queue.queuefile import load_queue
    from gtui.core.sched.recovery import find_log

    log_dir = paths.log_dir(load_queue(paths.queue).settings.log_dir)
    found = find_log(log_dir, name, attempt)
    if found is None:
        raise GtuiError(f"{name}: no log of attempt {attempt} in {log_dir}")
    return Path(found)
