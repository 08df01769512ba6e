"""A sparkline per GPU of its memory use and utilization over the last minutes.

Its own widget under the GPU rows (the rows stay as they are; another line per GPU can go
under each row for its holders). One line per GPU: ``  0 mem ▁▂▅▇█▇ 62G  util ▁▁▅█▇ 71%``.
Each cell is a slice of the window (:data:`WINDOW_S`), showing the highest reading in it (the
newest cell: the latest reading); a slice with no reading yet is blank, so the line fills
from the right as the minutes pass. It takes room from the queue, so it shows by itself only on
a tall terminal (:data:`MIN_ROWS`); ``s`` on the main screen shows or hides it at any height.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

from rich.text import Text
from textual.widget import Widget

from gtui.core.api import GpusRead
from gtui.core.units import format_mib

WINDOW_S = 300.0  # the last 5 minutes
MIN_ROWS = 50  # the terminal's rows from which the sparklines show by themselves
BLOCKS = "▁▂▃▄▅▆▇█"
_KEEP = 2000  # readings kept per GPU (a 0.1 s poll for 200 s; the window trims the rest)


def sparkline(values: Sequence[float | None]) -> str:
    """One block per value in [0, 1] (``▁`` empty to ``█`` full); None is a blank."""
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        else:
            out.append(BLOCKS[min(len(BLOCKS) - 1, max(0, int(v * len(BLOCKS) - 1e-9)))])
    return "".join(out)


def bucket(
    samples: Sequence[tuple[float, float]], now: float, cells: int, window: float = WINDOW_S
) -> list[float | None]:
    """``samples`` (time, value) of the last ``window`` seconds in ``cells`` slices, oldest
    first: the highest value of each slice (a spike must not vanish between two cells), but
    the newest reading for the slice now under way (a GPU just freed shows it at once)."""
    out: list[float | None] = [None] * cells
    if cells <= 0:
        return out
    start = now - window
    last = cells - 1
    for t, v in samples:
        if t < start or t > now:
            continue
        i = min(last, int((t - start) / window * cells))
        cur = out[i]
        out[i] = v if cur is None or i == last else max(cur, v)
    return out


class GpuHistory:
    """The recent readings of each GPU: memory used as a fraction of total, utilization."""

    def __init__(self) -> None:
        self.mem: dict[int, deque[tuple[float, float]]] = {}
        self.util: dict[int, deque[tuple[float, float]]] = {}

    def add(self, read: GpusRead, now: float) -> None:
        for g in read.snapshot.gpus:
            if g.mem_total_mib and g.mem_used_mib is not None:
                q = self.mem.setdefault(g.index, deque(maxlen=_KEEP))
                q.append((now, g.mem_used_mib / g.mem_total_mib))
            if g.util is not None:
                u = self.util.setdefault(g.index, deque(maxlen=_KEEP))
                u.append((now, g.util / 100))


class GpuSparks(Widget):
    """The sparklines of every GPU; fed with each GPU reading by the main screen."""

    DEFAULT_CSS = "GpuSparks { height: auto; }"

    def __init__(self, *, clock: Callable[[], float] = time.time, id: str | None = None) -> None:
        super().__init__(id=id)
        self.clock = clock
        self.history = GpuHistory()
        self.read: GpusRead | None = None

    def set_read(self, read: GpusRead | None) -> None:
        if read is None:
            return
        self.read = read
        self.history.add(read, self.clock())
        self.refresh(layout=True)

    def lines(self, width: int) -> list[Text]:
        read = self.read
        if read is None:
            return []
        now = self.clock()
        cells = max(4, (width - 40) // 2)  # what is left after the labels and figures
        out = []
        for g in read.snapshot.gpus:
            line = Text(no_wrap=True, overflow="ellipsis")
            line.append(f"{g.index:>3} ", style="bold")
            line.append("mem ", style="dim")
            line.append(sparkline(bucket(self.history.mem.get(g.index, ()), now, cells)), "cyan")
            line.append(f" {format_mib(g.mem_used_mib):>5}  ")
            line.append("util ", style="dim")
            line.append(sparkline(bucket(self.history.util.get(g.index, ()), now, cells)), "green")
            line.append(f" {'n/a' if g.util is None else f'{g.util}%':>4}")
            out.append(line)
        if out:
            out[0].append("  last 5 min", style="dim")
        return out

    def render(self) -> Text:
        text = Text("\n", no_wrap=True, overflow="crop").join(self.lines(self.size.width or 120))
        text.no_wrap, text.overflow = True, "crop"
        return text
