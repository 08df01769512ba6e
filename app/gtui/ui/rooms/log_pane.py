"""The side panel: the selected job's log and diagnosis, what shows them, and the keys on them
(l, z, f, the pager)."""

from __future__ import annotations

import time
from pathlib import Path

from gtui.ui.pager import page
from gtui.ui.port import current_log
from gtui.ui.rooms.selection import Selection
from gtui.ui.rooms.view import MainView
from gtui.ui.widgets.diagnosis import DiagnosisPanel
from gtui.ui.widgets.keybar import KeyBar

LOG_MIN_INTERVAL = 0.25  # seconds between two repaints of a growing log


class LogPane:
    """Which log the pane shows (the selected job's, found again when its attempt changes),
    and how often a growing one is repainted."""

    def __init__(self, screen: MainView, selection: Selection) -> None:
        self.screen = screen
        self.selection = selection
        self._job: str | None = None
        self._path: Path | None = None
        self._refreshed = 0.0
        self._timer_pending = False

    def show_selected(self) -> None:
        s = self.screen
        name = s.table.selected
        view = s.table.view(name) if name else None
        log = s.log_view
        diag = s.query_one(DiagnosisPanel)
        if view is None:
            self._job, self._path = None, None
            log.show(None, "no job selected")
            diag.show_job(None, 1.25)
            self.update_title()
            return
        path = current_log(s.engine, view)
        if name != self._job or path != self._path:
            self._job, self._path = name, path
            placeholder = (
                "no log yet: the job has not started" if view.record.attempt == 0 else "no log"
            )
            log.show(path, placeholder)
        diag.show_job(view, s.engine.settings.oom_grow)
        if s.zoomed:
            diag.display = False  # the log alone; unzooming shows it again
        self.fit_side(log_wanted=False)
        self.update_title()

    def fit_side(self, *, log_wanted: bool) -> None:
        """Below 120 columns the side panel is short: a diagnosis (what to do next) takes it
        whole, until you ask for the log (l; z zooms it to the whole screen)."""
        s = self.screen
        diagnosed = bool(s.query_one(DiagnosisPanel).display) and not log_wanted and not s.zoomed
        for side in s.query("#side"):
            side.set_class(diagnosed, "-diagnosed")

    def poll(self) -> None:
        """The clock's tick: read what the log grew by."""
        if self.screen.log_view.poll():
            self._refreshed = time.monotonic()

    def refresh(self) -> None:
        """Throttled: a job printing as fast as it can repaints the log a few times a second."""
        now = time.monotonic()
        wait = LOG_MIN_INTERVAL - (now - self._refreshed)
        if wait <= 0:
            self._refreshed = now
            self.screen.log_view.poll()
        elif not self._timer_pending:
            self._timer_pending = True

            def later() -> None:
                self._timer_pending = False
                self._refreshed = time.monotonic()
                self.screen.log_view.poll()

            self.screen.set_timer(wait, later)

    def update_title(self) -> None:
        s = self.screen
        name = s.table.selected
        view = s.table.view(name) if name else None
        log = s.log_view
        if view is None:
            log.border_title = "Log"
            log.border_subtitle = ""
            return
        attempt = f" · attempt {view.record.attempt}" if view.record.attempt else ""
        log.border_title = f"Log · {view.spec.name}{attempt}"
        log.border_subtitle = log.status()

    def focus(self) -> None:
        if self.selection.view() is not None:
            self.fit_side(log_wanted=True)
            self.screen.log_view.focus()

    def zoom(self) -> None:
        """The log alone on the screen (a traceback read whole at 80x24), and back."""
        s = self.screen
        zoom = not s.zoomed
        s.set_class(zoom, "-zoomed")
        if zoom:
            s.query_one(DiagnosisPanel).display = False
            self.fit_side(log_wanted=True)
            s.log_view.focus()
        else:
            self.show_selected()  # the diagnosis again, and at 80 columns its place
            s.table.focus()
        s.query_one(KeyBar).refresh()

    def pager(self) -> None:
        """The selected job's log as the engine has it now, not as the pane last showed it: a
        job that started since then has a log the pane learns of only on its next tick."""
        s = self.screen
        if s.table.selected != self._job:
            self.show_selected()  # the pane catches up with the selection now, not on its tick
        view = self.selection.view()
        if view is None:
            return
        path = current_log(s.engine, view)

        async def run() -> None:
            error = await page(s.app, path)
            if error:
                s.notify(error, severity="warning", timeout=6, markup=False)

        s.run_worker(run(), group="pager", exclusive=True, exit_on_error=False)

    def follow(self) -> None:
        s = self.screen
        s.log_view.toggle_follow()
        s.query_one(KeyBar).refresh()
        s.notify("following the log" if s.log_view.follow else "log paused (f follows)", timeout=2)
