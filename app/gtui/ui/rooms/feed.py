"""The engine's state coming in: the whole of it after the start, then coalesced batches of
events (gtui.ui.events), the clock's tick with its estimates, and the alerts a job's end rings."""

from __future__ import annotations

from typing import Literal

from textual.widgets import Static
from textual.worker import Worker

from gtui.core.api import JobView
from gtui.core.model import FINAL_STATES, JobState
from gtui.core.sched.eta import Estimate
from gtui.ui.alerts import Alerts, end_events, fault_events
from gtui.ui.events import Batch
from gtui.ui.forecast import UiForecast
from gtui.ui.format import display_path
from gtui.ui.rooms.commands import Commands
from gtui.ui.rooms.log_pane import LogPane
from gtui.ui.rooms.panes import Panes
from gtui.ui.rooms.queue_box import QueueBox
from gtui.ui.rooms.selection import Selection
from gtui.ui.rooms.view import MainView
from gtui.ui.screens.detail import DetailScreen, state_db
from gtui.ui.widgets.gpu_panel import GpuPanel
from gtui.ui.widgets.gpu_sparks import GpuSparks
from gtui.ui.widgets.header import HeaderBar
from gtui.ui.widgets.keybar import KeyBar

FORECAST_EVERY_TICKS = 2  # progress and estimates are worked out every 2 s
BROKEN_FILE = "queue file not reloaded"  # how gtui.core.queue.source words a broken edit


class Feed:
    """Puts what the engine says on the widgets, in place."""

    def __init__(
        self,
        screen: MainView,
        *,
        in_tmux: bool,
        selection: Selection,
        commands: Commands,
        panes: Panes,
        queue_box: QueueBox,
        log_pane: LogPane,
    ) -> None:
        self.screen = screen
        self.selection = selection
        self.commands = commands
        self.panes = panes
        self.queue_box = queue_box
        self.log_pane = log_pane
        self.forecast = UiForecast(state_db(screen.engine))  # progress and estimates
        self.estimates: dict[str, Estimate] = {}
        self.alerts = Alerts(self._terminal_write, in_tmux=in_tmux)
        self._forecast_read: Worker[None] | None = None
        self._ticks = 0
        self._counts: dict[JobState, int] = {}  # the table's jobs by state (the header's)

    def populate(self) -> None:
        """The engine's whole state now (after start); events then keep it current."""
        s = self.screen
        self.sync_settings()
        buffer = getattr(s.app, "buffer", None)
        jobs = buffer.take_queue() if buffer is not None else None
        s.table.set_jobs(jobs if jobs is not None else s.engine.jobs())
        s.query_one(GpuPanel).set_read(s.engine.gpus)
        s.query_one(GpuSparks).set_read(s.engine.gpus)
        self.after_jobs_changed()

    def all_ended_note(self) -> str | None:
        """What the first screen says when every job had ended before this start (a demo, or a
        queue, opened again): how to run them again, or None while anything is left to run."""
        counts = self.screen.table.counts
        total = sum(counts.values())
        if not total or any(n and st not in FINAL_STATES for st, n in counts.items()):
            return None
        q = self.screen.engine.queue_path.name
        return (
            f"every job of {q} has ended, in an earlier run. r on a job runs it again; "
            f"`gtui retry {q} --all` runs them all again, done ones too"
        )

    def apply(self, batch: Batch) -> None:
        """One coalesced batch of events: update the widgets in place."""
        s = self.screen
        table = s.table
        jobs_changed = False
        with s.app.batch_update():
            if batch.queue is not None:
                self.sync_settings()  # a reload may have changed [settings]
                table.set_jobs(batch.queue)
                jobs_changed = True
            if batch.jobs:
                before = {n: v.record.state for n in batch.jobs if (v := table.view(n))}
                table.update_jobs(batch.jobs.values())
                jobs_changed = True
                conf = s.engine.settings.notify  # bell / OSC 9, off by default
                self.alerts.say(conf, end_events(before, batch.jobs.values(), conf.on))
                self.alerts.queue_state(conf, table.views())
            if batch.removed:
                table.remove_jobs(batch.removed)
                jobs_changed = True
            if batch.gpus is not None:
                s.query_one(GpuPanel).set_read(batch.gpus)
                s.query_one(GpuSparks).set_read(batch.gpus)
            if batch.summary is not None:
                self.queue_box.summary = batch.summary
            if batch.notices:  # a GPU that failed: bell / OSC 9 as for a failure
                conf = s.engine.settings.notify
                said = [(n.level, n.text) for n in batch.notices]
                self.alerts.say(conf, fault_events(said, conf.on))
            for n in batch.notices:
                if self._file_banner(n.level, n.text):
                    continue
                if n.level == "info" and n.text.startswith("reloaded") and self.commands.own_edit:
                    continue  # our own add / edit / move rewrote the file: no news
                timeout = {"error": 12.0, "warning": 8.0}.get(n.level, 3.0)
                severity: Literal["information", "warning", "error"] = (
                    "error"
                    if n.level == "error"
                    else "warning"
                    if n.level == "warning"
                    else "information"
                )
                s.notify(n.text, severity=severity, timeout=timeout, markup=False)
            if jobs_changed or batch.paused is not None or batch.summary is not None:
                self.after_jobs_changed()
            sel = table.selected
            if sel is not None and (sel in batch.jobs or batch.queue is not None):
                self.log_pane.show_selected()
            if sel is not None and sel in batch.logs:
                self.log_pane.refresh()
            for screen in s.app.screen_stack:
                if isinstance(screen, DetailScreen) and screen.is_mounted:
                    screen.apply(batch)

    def _file_banner(self, level: str, text: str) -> bool:
        """Show / hide the broken-queue-file banner; True when ``text`` went there instead of
        a toast."""
        banner = self.screen.query_one("#file-banner", Static)
        if level == "error" and text.startswith(BROKEN_FILE):
            path = self.screen.engine.queue_path
            text = text.replace(str(path), display_path(path))  # as the header names it
            banner.update(f"✗ {text}  (fix the file: this stays until it loads)")
            banner.display = True
            return True
        if level == "info" and text.startswith("reloaded") and banner.display:
            banner.display = False  # fixed: the reload says so as usual
        return False

    def sync_settings(self) -> None:
        s = self.screen
        header = s.query_one(HeaderBar)
        header.starting = None
        header.settings = s.engine.settings
        header.fake = s.engine.fake
        header.refresh()
        s.query_one(GpuPanel).settings = s.engine.settings
        s.table.starve_after_s = s.engine.settings.starve_after_s

    def after_jobs_changed(self) -> None:
        s = self.screen
        self.selection.select_pending()
        self._counts = s.table.counts
        self.panes.fit_main()  # a longer name may want a wider queue
        s.query_one(HeaderBar).set_state(paused=s.engine.paused, counts=self._counts)
        self.queue_box.update_title()
        s.query_one(KeyBar).refresh()

    def _terminal_write(self, seq: str) -> None:
        """A bell or an OSC 9 straight to the terminal, as Textual's own ``bell`` does."""
        app = self.screen.app
        driver = getattr(app, "_driver", None)
        if driver is not None and not app.is_headless:
            driver.write(seq)

    def tick(self) -> None:
        s = self.screen
        self._ticks += 1
        if self._ticks % FORECAST_EVERY_TICKS == 1:
            self._estimate(list(s.table.views()))
            if self._forecast_read is None or self._forecast_read.is_finished:
                # One read of the logs at a time: while one is stuck on a stalled disk, the
                # requests fold into it. It reads the running jobs the estimate just listed.
                self._forecast_read = s.run_worker(
                    self._read_forecast(list(self.forecast.running)),
                    group="forecast",
                    exit_on_error=False,
                )
        s.table.tick()
        self.log_pane.poll()

    async def _read_forecast(self, jobs: list[tuple[str, str, int]]) -> None:
        if await self.forecast.read(jobs, self.screen.clock()):
            # What was read, shown now rather than at the next update in 2 s. Only then: an
            # estimate over 10,000 jobs twice per update was most of an idle screen's CPU.
            self._estimate(list(self.screen.table.views()))

    def _estimate(self, views: list[JobView]) -> None:
        table = self.screen.table
        self.estimates = self.forecast.update(views, self.screen.clock(), counts=self._counts)
        table.set_estimates(self.estimates)
        table.set_mem_advice(self.forecast.mem_advice)
