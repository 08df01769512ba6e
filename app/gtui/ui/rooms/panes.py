"""The panes fitted to the terminal: the log beside the queue or under it, the GPU sparklines
shown where the screen is tall enough (or as ``s`` chose)."""

from __future__ import annotations

from gtui.ui.rooms.view import MainView
from gtui.ui.widgets.gpu_sparks import MIN_ROWS as SPARKS_MIN_ROWS
from gtui.ui.widgets.gpu_sparks import GpuSparks
from gtui.ui.widgets.job_table import JobTable, table_width

LOG_BESIDE_MIN = 60  # columns the log needs beside the queue; with fewer it goes under it
QUEUE_FRAME = 3  # the queue box's borders and the table's scrollbar
SMALL_BELOW = 120  # columns: below this a diagnosis takes the side panel whole (until l)


class Panes:
    """Sets the size classes and widths at a resize and when the jobs' names change; only
    when the fit changed (no new layout at every change of the jobs)."""

    def __init__(self, screen: MainView) -> None:
        self.screen = screen
        self.sparks_shown: bool | None = None  # `s` chose; None: by the terminal's height
        self._main_fit: tuple[bool, int, int] | None = None  # beside?, queue's, screen's width

    def fit_main(self) -> None:
        """The log beside the queue only where the queue keeps the width its names and notes
        need (the log takes the rest, at most 2 parts of 5); else under it, the queue the
        screen's whole width."""
        s = self.screen
        tables = s.query(JobTable)
        if not tables:
            return
        table = tables.first()
        width = s.size.width
        wanted = table_width(table.longest_name, table.gpu_width, progress=True) + QUEUE_FRAME
        beside = width - wanted >= LOG_BESIDE_MIN
        wanted = max(wanted, width * 3 // 5)  # never less than its old 3 parts of 5
        if (beside, wanted, width) == self._main_fit:
            return  # as it is: no new layout at every change of the jobs
        self._main_fit = (beside, wanted, width)
        for main in s.query("#main"):
            main.set_class(not beside, "-narrow")
            main.set_class(width < SMALL_BELOW, "-small")
        for box in s.query("#queue-box"):
            box.styles.width = wanted if beside else None

    def fit_sparks(self) -> None:
        """The GPU sparklines where the screen is tall enough to spare the lines, unless ``s``
        said otherwise (then at any height)."""
        s = self.screen
        tall = s.size.height >= SPARKS_MIN_ROWS
        shown = tall if self.sparks_shown is None else self.sparks_shown
        for sparks in s.query(GpuSparks):
            sparks.display = shown
        for box in s.query("#gpus-box"):
            box.styles.max_height = 24 if tall and shown else None

    def toggle_sparks(self) -> None:
        """``s``: show or hide the GPU sparklines, at any height."""
        self.sparks_shown = not self.screen.query_one(GpuSparks).display
        self.fit_sparks()
        self.screen.notify(
            "GPU sparklines shown (s hides them)" if self.sparks_shown else "sparklines hidden",
            timeout=2,
        )
