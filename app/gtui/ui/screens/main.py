"""The main screen (DESIGN.md 6): header, GPUs, queue, log, diagnosis, and every key's action.

Engine events arrive through ``apply`` already coalesced (gtui.ui.events); the actions call the
engine's commands in workers, so a kill that waits out ``kill_grace`` never freezes the screen.

Size: the main screen's actions, one per key of DESIGN.md 6, each with its worker; the
widgets it holds are in gtui.ui.widgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Static
from textual.worker import Worker

from gtui.core import tmux
from gtui.core.api import JobView
from gtui.core.errors import GtuiError
from gtui.core.model import FINAL_STATES, JobState
from gtui.core.sched import transitions
from gtui.core.sched.eta import Estimate
from gtui.core.sched.handover import HANDOVER_STAY
from gtui.core.units import first_few, format_duration, plural
from gtui.ui.alerts import Alerts, end_events
from gtui.ui.events import Batch
from gtui.ui.forecast import UiForecast
from gtui.ui.format import display_path
from gtui.ui.forms import changed_fields, fields_from_form, form_from_spec
from gtui.ui.keys import KEYS, PANEL_KEYS, VIEW_KEYS, Key
from gtui.ui.pager import page
from gtui.ui.port import EnginePort
from gtui.ui.screens.confirm import Choice, ConfirmScreen
from gtui.ui.screens.detail import DetailScreen, state_db
from gtui.ui.screens.help import HelpScreen
from gtui.ui.screens.job_form import JobForm
from gtui.ui.widgets.diagnosis import DiagnosisPanel
from gtui.ui.widgets.filter_bar import FilterBar, parse_filter
from gtui.ui.widgets.gpu_panel import GpuPanel
from gtui.ui.widgets.gpu_sparks import MIN_ROWS as SPARKS_MIN_ROWS
from gtui.ui.widgets.gpu_sparks import GpuSparks
from gtui.ui.widgets.header import HeaderBar
from gtui.ui.widgets.job_table import JobTable, table_width
from gtui.ui.widgets.keybar import KeyBar
from gtui.ui.widgets.log_search import LogSearch
from gtui.ui.widgets.log_view import LogView

LOG_BESIDE_MIN = 60  # columns the log needs beside the queue; with fewer it goes under it
QUEUE_FRAME = 3  # the queue box's borders and the table's scrollbar
SMALL_BELOW = 120  # columns: below this a diagnosis takes the side panel whole (until l)
LOG_MIN_INTERVAL = 0.25  # seconds between two repaints of a growing log
FORECAST_EVERY_TICKS = 2  # progress and estimates are worked out every 2 s
LOADING_PAINT_S = 0.5  # the "reading" frame is waited for this long at most before the start
BROKEN_FILE = "queue file not reloaded"  # how gtui.core.queue.source words a broken edit


class MainScreen(Screen[None]):
    BINDINGS = [
        *(Binding(k.keys, k.action, k.label, show=False) for k in KEYS),
        Binding("escape", "back", "Back", show=False),
        *(Binding(k.keys, k.action, k.label, show=False) for k in PANEL_KEYS),  # issue 19
        *(Binding(k.keys, k.action, k.label, show=False) for k in VIEW_KEYS),
    ]

    def __init__(
        self,
        engine: EnginePort,
        *,
        host: str,
        clock: Callable[[], float] = time.time,
        in_tmux: bool = False,
    ) -> None:
        super().__init__(id="main-screen")
        self.engine = engine
        self.host = host
        self.clock = clock
        self.in_tmux = in_tmux
        self._log_job: str | None = None
        self._log_path: Path | None = None
        self._log_refreshed = 0.0
        self._log_timer_pending = False
        self._select_after: str | None = None
        self._summary = ""
        self._own_edit_until = 0.0
        self._tmux_prefix: str | None = None
        self.ready = False  # set once the engine runs and its state is on screen
        self.forecast = UiForecast(state_db(engine))  # progress and estimates (issue 19.3)
        self.estimates: dict[str, Estimate] = {}
        self._forecast_read: Worker[None] | None = None
        self.alerts = Alerts(self._terminal_write, in_tmux=in_tmux)
        self._ticks = 0
        self._counts: dict[JobState, int] = {}  # the table's jobs by state (the header's)
        self._sparks_shown: bool | None = None  # `s` chose; None: by the terminal's height
        self._main_fit: tuple[bool, int, int] | None = None  # beside?, queue's, screen's width
        self._title_folded = 0  # the done jobs the queue's title counts as folded

    # -- layout -----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        e = self.engine
        header = HeaderBar(
            host=self.host,
            queue=display_path(e.queue_path),
            settings=e.settings,
            fake=e.fake,
        )
        if not getattr(e, "started", False):  # not the mode, dispatch, counts: none read yet
            header.starting = f"reading {e.queue_path.name}…"
        yield header
        # A broken edit of the queue file: said here until the file is fixed (a toast goes
        # before the user has read it, and the last good queue runs on meanwhile).
        yield Static("", id="file-banner", markup=False)
        with VerticalScroll(id="gpus-box"):
            yield GpuPanel(e.settings, id="gpus")
            yield GpuSparks(clock=self.clock, id="gpu-sparks")  # issue 19.5
        with Container(id="main"):
            with Vertical(id="queue-box"):
                yield JobTable(clock=self.clock, id="jobs")
                with Horizontal(id="filter-line"):
                    yield Static("filter ", id="filter-label")
                    yield FilterBar(id="filter-bar")
            with Vertical(id="side"):
                yield LogView(id="log")
                yield LogSearch(id="log-search")
                yield DiagnosisPanel(id="diagnosis")
        yield KeyBar(self._key_label)

    def on_mount(self) -> None:
        # Widgets inside containers may not be mounted yet: set up after the first refresh.
        self.call_after_refresh(self._setup)

    async def _setup(self) -> None:
        self.query_one("#gpus-box").border_title = "GPUs  ▓ others █ ours ░ free"
        self.query_one("#diagnosis").display = False
        self.query_one("#filter-line").display = False
        self.query_one("#file-banner").display = False
        self._fit_main()
        self._fit_sparks()
        self._update_queue_title()
        self._update_log_title()
        self.query_one(JobTable).focus()
        start = getattr(self.app, "start_engine", None)
        if start is None:
            self._set_ready()
        elif getattr(self.engine, "started", False):
            await start()
            self._set_ready()
        else:
            # In a worker: this screen paints the frame that says so while it waits.
            self.run_worker(self._start_after_loading(start), group="start", exclusive=True)

    async def _start_after_loading(self, start: Callable[[], Awaitable[object]]) -> None:
        await self._show_loading()
        await start()
        self._set_ready()

    def _set_ready(self) -> None:
        """The engine's state is on screen: from now on the clock ticks. Not before: a tick
        held back by a long start came at once after it, and its estimates over every job
        (0.2-0.3 s at 100,000 jobs) went before the first frame of the table."""
        self.ready = True
        self.set_interval(1.0, self._tick)

    async def _show_loading(self) -> None:
        """The screen, with what is known, on the terminal before the engine's start (seconds
        for a 100,000-job file, the loop held all along): until now the last frame before it
        said "no jobs" and the default mode meanwhile (issue 16)."""
        what = f"reading {self.engine.queue_path.name}…"
        self.query_one(HeaderBar).starting = what
        self.query_one(HeaderBar).refresh()
        self.query_one("#queue-box").border_title = f"Queue · {what}"
        painted: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done() -> None:
            if not painted.done():
                painted.set_result(None)

        self.table.after_paint(done)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(painted, LOADING_PAINT_S)  # a table never painted: go on

    def on_resize(self) -> None:
        self._fit_main()
        self._fit_sparks()

    def _fit_main(self) -> None:
        """The log beside the queue only where the queue keeps the width its names and notes
        need (the log takes the rest, at most 2 parts of 5); else under it, the queue the
        screen's whole width."""
        tables = self.query(JobTable)
        if not tables:
            return
        table = tables.first()
        wanted = table_width(table.longest_name, table.gpu_width, progress=True) + QUEUE_FRAME
        beside = self.size.width - wanted >= LOG_BESIDE_MIN
        wanted = max(wanted, self.size.width * 3 // 5)  # never less than its old 3 parts of 5
        if (beside, wanted, self.size.width) == self._main_fit:
            return  # as it is: no new layout at every change of the jobs
        self._main_fit = (beside, wanted, self.size.width)
        for main in self.query("#main"):
            main.set_class(not beside, "-narrow")
            main.set_class(self.size.width < SMALL_BELOW, "-small")
        for box in self.query("#queue-box"):
            box.styles.width = wanted if beside else None

    def _fit_sparks(self) -> None:
        """The GPU sparklines where the screen is tall enough to spare the lines, unless ``s``
        said otherwise (then at any height)."""
        tall = self.size.height >= SPARKS_MIN_ROWS
        shown = tall if self._sparks_shown is None else self._sparks_shown
        for sparks in self.query(GpuSparks):
            sparks.display = shown
        for box in self.query("#gpus-box"):
            box.styles.max_height = 24 if tall and shown else None

    @property
    def composed(self) -> bool:
        """Every widget that ``apply`` updates is there (not before compose, nor while the app
        tears the screen down: its widgets go one by one)."""
        return all(self.query(w) for w in (HeaderBar, GpuPanel, JobTable, LogView, KeyBar))

    @property
    def table(self) -> JobTable:
        return self.query_one(JobTable)

    @property
    def log_view(self) -> LogView:
        return self.query_one(LogView)

    def _key_label(self, key: Key) -> str:
        if key.action == "pause_job":
            v = self._selected_view(quiet=True)
            if v is not None and v.record.state in (JobState.HELD, JobState.SUSPENDED):
                return "Resume"
        if key.action == "pause_queue":
            return "Resume queue" if self.engine.paused else "Pause queue"
        if key.action == "filter" and self._log_focused():
            return "Search"  # `/` in the focused log searches it
        return key.label

    def _log_focused(self) -> bool:
        focused = self.focused
        return isinstance(focused, (LogView, LogSearch))

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        for bar in self.query(KeyBar):
            bar.refresh()  # `/` reads Search in the log, Filter elsewhere

    @property
    def zoomed(self) -> bool:
        return self.has_class("-zoomed")

    # -- engine state in ------------------------------------------------------------------

    def populate(self) -> None:
        """The engine's whole state now (after start); events then keep it current."""
        self._sync_settings()
        buffer = getattr(self.app, "buffer", None)
        jobs = buffer.take_queue() if buffer is not None else None
        self.table.set_jobs(jobs if jobs is not None else self.engine.jobs())
        self.query_one(GpuPanel).set_read(self.engine.gpus)
        self.query_one(GpuSparks).set_read(self.engine.gpus)
        self._after_jobs_changed()

    def all_ended_note(self) -> str | None:
        """What the first screen says when every job had ended before this start (a demo, or a
        queue, opened again): how to run them again, or None while anything is left to run."""
        counts = self.table.counts
        total = sum(counts.values())
        if not total or any(n and st not in FINAL_STATES for st, n in counts.items()):
            return None
        q = self.engine.queue_path.name
        return (
            f"every job of {q} has ended, in an earlier run. r on a job runs it again; "
            f"`gtui retry {q} --all` runs them all again, done ones too"
        )

    def apply(self, batch: Batch) -> None:
        """One coalesced batch of events: update the widgets in place."""
        table = self.table
        jobs_changed = False
        with self.app.batch_update():
            if batch.queue is not None:
                self._sync_settings()  # a reload may have changed [settings]
                table.set_jobs(batch.queue)
                jobs_changed = True
            if batch.jobs:
                before = {n: v.record.state for n in batch.jobs if (v := table.view(n))}
                table.update_jobs(batch.jobs.values())
                jobs_changed = True
                conf = self.engine.settings.notify  # bell / OSC 9 (issue 19.4), off by default
                self.alerts.say(conf, end_events(before, batch.jobs.values(), conf.on))
                self.alerts.queue_state(conf, table.views())
            if batch.removed:
                table.remove_jobs(batch.removed)
                jobs_changed = True
            if batch.gpus is not None:
                self.query_one(GpuPanel).set_read(batch.gpus)
                self.query_one(GpuSparks).set_read(batch.gpus)
            if batch.summary is not None:
                self._summary = batch.summary
            for n in batch.notices:
                if self._file_banner(n.level, n.text):
                    continue
                if (
                    n.level == "info"
                    and n.text.startswith("reloaded")
                    and (time.monotonic() < self._own_edit_until)
                ):
                    continue  # our own add / edit / move rewrote the file: no news
                timeout = {"error": 12.0, "warning": 8.0}.get(n.level, 3.0)
                severity: Literal["information", "warning", "error"] = (
                    "error"
                    if n.level == "error"
                    else "warning"
                    if n.level == "warning"
                    else "information"
                )
                self.notify(n.text, severity=severity, timeout=timeout, markup=False)
            if jobs_changed or batch.paused is not None or batch.summary is not None:
                self._after_jobs_changed()
            sel = table.selected
            if sel is not None and (sel in batch.jobs or batch.queue is not None):
                self._show_selected()
            if sel is not None and sel in batch.logs:
                self._refresh_log()
            for screen in self.app.screen_stack:
                if isinstance(screen, DetailScreen) and screen.is_mounted:
                    screen.apply(batch)

    def _file_banner(self, level: str, text: str) -> bool:
        """Show / hide the broken-queue-file banner; True when ``text`` went there instead of
        a toast."""
        banner = self.query_one("#file-banner", Static)
        if level == "error" and text.startswith(BROKEN_FILE):
            path = self.engine.queue_path
            text = text.replace(str(path), display_path(path))  # as the header names it
            banner.update(f"✗ {text}  (fix the file: this stays until it loads)")
            banner.display = True
            return True
        if level == "info" and text.startswith("reloaded") and banner.display:
            banner.display = False  # fixed: the reload says so as usual
        return False

    def _sync_settings(self) -> None:
        header = self.query_one(HeaderBar)
        header.starting = None
        header.settings = self.engine.settings
        header.fake = self.engine.fake
        header.refresh()
        self.query_one(GpuPanel).settings = self.engine.settings
        self.table.starve_after_s = self.engine.settings.starve_after_s

    def _after_jobs_changed(self) -> None:
        if self._select_after and self.table.select(self._select_after):
            self._select_after = None
        self._counts = self.table.counts
        self._fit_main()  # a longer name may want a wider queue
        self.query_one(HeaderBar).set_state(paused=self.engine.paused, counts=self._counts)
        self._update_queue_title()
        self.query_one(KeyBar).refresh()

    def _update_queue_title(self) -> None:
        box = self.query_one("#queue-box")
        table = self.table
        shown = len(table.visible_names)
        total = len(table)
        f = table.filter_name
        filtered = f != "all" or bool(table.filter_text)
        what = f"{shown} of {plural(total, 'job')}" if filtered else plural(shown, "job")
        flt = f" · {f}" + (f" · name~{table.filter_text}" if table.filter_text else "")
        marked = len(table.marked_names)
        mark = f" · {marked} marked (esc unmarks)" if marked else ""
        self._title_folded = table.folded
        if table.folded:
            what = f"{shown} of {plural(total, 'job')} · {table.folded} done folded (E shows)"
        box.border_title = f"Queue{flt} · {what}{mark}  (/ filters)"
        box.border_subtitle = self._summary

    def _terminal_write(self, seq: str) -> None:
        """A bell or an OSC 9 straight to the terminal, as Textual's own ``bell`` does."""
        driver = getattr(self.app, "_driver", None)
        if driver is not None and not self.app.is_headless:
            driver.write(seq)

    def _tick(self) -> None:
        self._ticks += 1
        if self._ticks % FORECAST_EVERY_TICKS == 1:
            self._estimate(list(self.table.views()))
            if self._forecast_read is None or self._forecast_read.is_finished:
                # One read of the logs at a time: while one is stuck on a stalled disk, the
                # requests fold into it (issue 22.1). It reads the running jobs that the
                # estimate just listed.
                self._forecast_read = self.run_worker(
                    self._read_forecast(list(self.forecast.running)),
                    group="forecast",
                    exit_on_error=False,
                )
        self.table.tick()
        if self.log_view.poll():
            self._log_refreshed = time.monotonic()

    async def _read_forecast(self, jobs: list[tuple[str, str, int]]) -> None:
        if await self.forecast.read(jobs, self.clock()):
            # What was read, shown now rather than at the next update in 2 s. Only then: an
            # estimate over 10,000 jobs twice per update was most of an idle screen's CPU.
            self._estimate(list(self.table.views()))

    def _estimate(self, views: list[JobView]) -> None:
        self.estimates = self.forecast.update(views, self.clock(), counts=self._counts)
        self.table.set_estimates(self.estimates)
        self.table.set_mem_advice(self.forecast.mem_advice)

    # -- the selected job: its log and diagnosis -------------------------------------------

    @on(JobTable.MarksChanged)
    def _on_marks(self, event: JobTable.MarksChanged) -> None:
        self._update_queue_title()

    @on(JobTable.Selected)
    def _on_selected(self, event: JobTable.Selected) -> None:
        self._show_selected()
        if self.table.folded != self._title_folded:  # leaving a done job folded it
            self._update_queue_title()  # (not at every move: it counts the marks, O(jobs))
        self.query_one(KeyBar).refresh()

    def _show_selected(self) -> None:
        name = self.table.selected
        view = self.table.view(name) if name else None
        log = self.log_view
        diag = self.query_one(DiagnosisPanel)
        if view is None:
            self._log_job, self._log_path = None, None
            log.show(None, "no job selected")
            diag.show_job(None, 1.25)
            self._update_log_title()
            return
        try:
            path = self.engine.log_path(view.spec.name)
        except GtuiError:
            path = None
        if path is None and view.record.log:
            path = Path(view.record.log)
        if name != self._log_job or path != self._log_path:
            self._log_job, self._log_path = name, path
            placeholder = (
                "no log yet: the job has not started" if view.record.attempt == 0 else "no log"
            )
            log.show(path, placeholder)
        diag.show_job(view, self.engine.settings.oom_grow)
        if self.zoomed:
            diag.display = False  # the log alone; unzooming shows it again
        self._fit_side(log_wanted=False)
        self._update_log_title()

    def _fit_side(self, *, log_wanted: bool) -> None:
        """Below 120 columns the side panel is short: a diagnosis (what to do next) takes it
        whole, until you ask for the log (l; z zooms it to the whole screen)."""
        diagnosed = (
            bool(self.query_one(DiagnosisPanel).display) and not log_wanted and not self.zoomed
        )
        for side in self.query("#side"):
            side.set_class(diagnosed, "-diagnosed")

    def _refresh_log(self) -> None:
        """Throttled: a job printing as fast as it can repaints the log a few times a second."""
        now = time.monotonic()
        wait = LOG_MIN_INTERVAL - (now - self._log_refreshed)
        if wait <= 0:
            self._log_refreshed = now
            self.log_view.poll()
        elif not self._log_timer_pending:
            self._log_timer_pending = True

            def later() -> None:
                self._log_timer_pending = False
                self._log_refreshed = time.monotonic()
                self.log_view.poll()

            self.set_timer(wait, later)

    @on(LogView.Changed)
    def _update_log_title(self) -> None:
        name = self.table.selected
        view = self.table.view(name) if name else None
        log = self.log_view
        if view is None:
            log.border_title = "Log"
            log.border_subtitle = ""
            return
        attempt = f" · attempt {view.record.attempt}" if view.record.attempt else ""
        log.border_title = f"Log · {view.spec.name}{attempt}"
        log.border_subtitle = log.status()

    # -- helpers ------------------------------------------------------------------------------

    def _selected_view(self, quiet: bool = False) -> JobView | None:
        """The selected job as the engine has it now (the table may be 50 ms behind)."""
        name = self.table.selected
        view = self.table.view(name) if name else None
        if view is not None and name is not None:
            try:
                view = self.engine.view(name)
            except GtuiError:
                pass
        if view is None and not quiet:
            self.notify("no job selected (the queue is empty or filtered out)", timeout=3)
        return view

    def _marked_views(self) -> list[JobView]:
        """The marked jobs on screen, as the engine has them now (bulk actions), or []."""
        out = []
        for name in self.table.marked_names:
            try:
                out.append(self.engine.view(name))
            except GtuiError:
                continue  # gone from the queue meanwhile
        return out

    def _bulk(
        self,
        label: str,
        names: list[str],
        call: Callable[[list[str]], Awaitable[object]],
        verb: str,
    ) -> None:
        """One command on several jobs at once, and one toast that counts them."""
        if names:
            self._command(label, lambda: call(names), f"{verb} {plural(len(names), 'job')}")

    def _command(self, label: str, call: Callable[[], Awaitable[object]], done: str = "") -> None:
        """Run an engine command in a worker: the screen stays live; errors become a toast."""

        async def run() -> None:
            self._own_edit_until = time.monotonic() + 3.0
            try:
                await call()
            except GtuiError as e:
                self.notify(str(e), title=label, severity="error", timeout=8, markup=False)
                return
            if done:
                self.notify(done, timeout=3, markup=False)

        self.run_worker(run(), group="commands", exit_on_error=False)

    # -- actions (one per key of DESIGN.md 6) --------------------------------------------------

    def action_add(self) -> None:
        async def submit(values: dict[str, str]) -> str:
            fields = fields_from_form(values)
            self._own_edit_until = time.monotonic() + 3.0
            return await self.engine.add(fields)

        def added(name: str | None) -> None:
            if name:
                self._select_after = name
                self.table.select(name)
                self.notify(f"added {name}", timeout=3, markup=False)

        q = self.engine.queue_path.name
        self.app.push_screen(JobForm(f"Add a job to {q}", submit), added)

    def opens_filter(self, key: str) -> bool:
        """Whether ``key``, pressed now, opens the filter line (``/`` on the queue; in a
        focused log it searches the log instead)."""
        return key == "slash" and isinstance(self.focused, JobTable)

    def opens_form(self, key: str) -> bool:
        """Whether ``key``, pressed now, opens the add / edit form (GtuiApp keeps the keys typed
        after it for the form)."""
        if isinstance(self.focused, Input):
            return False  # typed into the filter line
        if key == "a":
            return True
        if key == "e":
            view = self._selected_view(quiet=True)
            return view is not None and transitions.why_not_edit(view.record) is None
        return False

    def _refused(self, why: str | None, timeout: float = 5) -> bool:
        """Say the core's refusal (transitions.why_not_*), if any: the dashboard has no rule of
        its own for what a command applies to."""
        if why is None:
            return False
        self.notify(why, severity="warning", timeout=timeout, markup=False)
        return True

    def action_edit(self) -> None:
        view = self._selected_view()
        if view is None or self._refused(transitions.why_not_edit(view.record)):
            return
        name = view.spec.name
        before = form_from_spec(view.spec)
        ended = view.record.final

        async def submit(values: dict[str, str]) -> str:
            fields = changed_fields(before, values)
            self._own_edit_until = time.monotonic() + 3.0
            if fields:
                await self.engine.edit(name, fields)
            new = fields.get("name")
            return new if isinstance(new, str) and new else name

        def edited(new_name: str | None) -> None:
            if not new_name:
                return
            self._select_after = new_name
            if ended:
                self._offer_run_again(new_name)
            else:
                self.notify(f"saved {new_name}", timeout=3, markup=False)

        self.app.push_screen(JobForm(f"Edit {name}", submit, before, verb="Save"), edited)

    def _offer_run_again(self, name: str) -> None:
        """After the edit of an ended job: run it again with one key (r), as ``r`` would."""

        def chosen(value: str | None) -> None:
            if value == "retry":
                self._command("retry", lambda: self.engine.retry([name]), f"{name}: queued again")

        self.app.push_screen(
            ConfirmScreen(
                f"Saved {name}. Run it again?",
                f"{name} has ended; the edit applies when it runs again (r on it later does the "
                "same).",
                [Choice("r", "Run it again", "retry", "primary")],
            ),
            chosen,
        )

    def action_remove(self) -> None:
        view = self._selected_view()
        if view is None:
            return
        name = view.spec.name
        if self._refused(transitions.why_not_remove(view.record)):
            return
        why = self._why_not_removable(view)
        if why:
            self.notify(why, severity="warning", timeout=8, markup=False)
            return
        q = self.engine.queue_path.name

        def chosen(value: str | None) -> None:
            if value == "remove":
                self._command("remove", lambda: self.engine.remove(name), f"removed {name}")

        self.app.push_screen(
            ConfirmScreen(
                f"Remove {name}?",
                f"Its entry is deleted from {q} (the file is rewritten; comments elsewhere stay).",
                [Choice("y", "Remove", "remove", "error")],
            ),
            chosen,
        )

    def _why_not_removable(self, view: JobView) -> str | None:
        """Why ``d`` cannot remove this job, said before asking (the file's rewrite would
        refuse it after): jobs wait for it, or it is one combination of a several-key matrix."""
        spec = view.spec
        jobs = [v.spec for v in self.engine.jobs()]
        siblings = [j.name for j in jobs if j.entry == spec.entry] if spec.matrix else []
        gone = {spec.name} if len(siblings) > 1 else set(siblings) or {spec.name}
        waiting = [j.name for j in jobs if j.name not in gone and gone & set(j.after)]
        if waiting:
            shown = first_few(waiting)
            verb = "waits" if len(waiting) == 1 else "wait"
            return (
                f"{spec.name} cannot be removed: {shown} {verb} for it (after); remove or edit "
                "those first"
            )
        if len(siblings) > 1 and len(spec.matrix) > 1:
            keys = ", ".join(spec.matrix)
            return (
                f"{spec.name} is one of the {len(siblings)} jobs of a matrix ({keys}): one "
                "combination of a matrix with several keys cannot be removed alone; edit the "
                f"entry in {self.engine.queue_path.name}"
            )
        return None

    def _move(self, where: Literal["up", "down", "top"]) -> None:
        marked = self._marked_views()
        if marked:
            waiting = [v.spec.name for v in marked if v.record.waiting]
            if not waiting:
                self.notify("none of the marked jobs is waiting: only waiting jobs move",
                            severity="warning", timeout=4, markup=False)  # fmt: skip
                return
            # up: the first first, so each keeps its place among them; down and top: the last
            # first (the first moved to the top would be passed by the next one).
            order = waiting if where == "up" else list(reversed(waiting))

            async def move_all() -> None:
                for name in order:
                    await self.engine.move(name, where)

            self._command("move", move_all, f"moved {plural(len(waiting), 'job')} {where}")
            return
        view = self._selected_view()
        if view is None or self._refused(transitions.why_not_move(view.record), timeout=4):
            return
        name = view.spec.name
        self._select_after = name
        self._command("move", lambda: self.engine.move(name, where))

    def action_move_up(self) -> None:
        self._move("up")

    def action_move_down(self) -> None:
        self._move("down")

    def action_move_top(self) -> None:
        self._move("top")

    def action_pause_job(self) -> None:
        marked = self._marked_views()
        if marked:
            pausable = [
                v.spec.name for v in marked if v.record.state in (JobState.QUEUED, JobState.RUNNING)
            ]
            if pausable:
                self._bulk("pause", pausable, self.engine.pause, "paused")
            else:
                paused = [
                    v.spec.name
                    for v in marked
                    if v.record.state in (JobState.HELD, JobState.SUSPENDED)
                ]
                self._bulk("resume", paused, self.engine.resume, "resumed")
            return
        view = self._selected_view()
        if view is None:
            return
        name, st = view.spec.name, view.record.state
        if transitions.why_not_switch(view.record, transitions.PAUSE) is None:
            self._command(
                "pause",
                lambda: self.engine.pause([name]),
                f"{name}: {'held' if st == JobState.QUEUED else 'suspended (SIGSTOP)'}",
            )
        elif transitions.why_not_switch(view.record, transitions.RESUME) is None:
            self._command("resume", lambda: self.engine.resume([name]), f"{name}: resumed")
        else:
            self._refused(transitions.why_not_switch(view.record, transitions.PAUSE), timeout=4)

    def action_pause_queue(self) -> None:
        if self.engine.paused:
            self._command("resume queue", self.engine.resume_queue, "queue resumed: dispatch ON")
        else:
            self._command(
                "pause queue",
                self.engine.pause_queue,
                "queue paused: no new job starts; running jobs go on",
            )

    def action_clear_quarantine(self) -> None:
        """Give back the GPUs a hardware fault took out of placement (asks first)."""
        read = self.engine.gpus
        gpus = tuple(read.quarantined) if read is not None else ()
        if not gpus:
            self.notify("no GPU is quarantined", timeout=3, markup=False)
            return
        listed = ",".join(map(str, gpus))

        def chosen(value: str | None) -> None:
            if value == "clear":
                self._command(
                    "clear quarantine",
                    lambda: self.engine.clear_quarantine(None),
                    f"GPU {listed} back in placement",
                )

        self.app.push_screen(
            ConfirmScreen(
                f"Give GPU {listed} back?",
                f"GPU {listed} was taken out of placement after a hardware fault (an "
                "uncorrectable ECC error, an Xid, a GPU fallen off the bus). Give it back only "
                "once it has been checked (nvidia-smi, a reset or a reboot): jobs start there "
                "again at once.",
                [
                    Choice("c", "Give it back", "clear", "warning"),
                    Choice("k", "Keep it out", "keep", "primary"),
                ],
            ),
            chosen,
        )

    def action_kill(self) -> None:
        marked = self._marked_views()
        if marked:
            self._kill_marked(marked)
            return
        view = self._selected_view()
        if view is None:
            return
        name, rec = view.spec.name, view.record
        if self._refused(transitions.why_not_kill(rec), timeout=4):
            return
        if rec.active:
            where = ",".join(map(str, rec.gpus)) or "the CPU"
            since = format_duration(self.clock() - rec.started_at) if rec.started_at else "?"
            grace = format_duration(self.engine.settings.kill_grace_s)
            body = (
                (
                    f"{name} is {rec.state.value} on GPU {where} for {since} (pid {rec.pid}).\n"
                    f"Its process group gets SIGTERM, then SIGKILL after {grace}; nothing of it "
                    "survives. r runs it again."
                )
                if rec.gpus
                else (
                    f"{name} is {rec.state.value} (pid {rec.pid}) for {since}.\n"
                    f"Its process group gets SIGTERM, then SIGKILL after {grace}. r runs it again."
                )
            )
        else:
            body = f"{name} has not started. It is marked killed and will not run (r retries it)."

        def chosen(value: str | None) -> None:
            if value == "kill":
                self._command("kill", lambda: self.engine.kill([name]), f"killing {name}")

        self.app.push_screen(
            ConfirmScreen(f"Kill {name}?", body, [Choice("y", "Kill", "kill", "error")]), chosen
        )

    def _kill_marked(self, marked: list[JobView]) -> None:
        names = [v.spec.name for v in marked if not v.record.final]
        if not names:
            self.notify("every marked job has ended: there is nothing to kill",
                        severity="warning", timeout=4, markup=False)  # fmt: skip
            return
        n = len(names)
        running = sum(1 for v in marked if v.record.active)
        listed = ", ".join(names[:8]) + (f" and {n - 8} more" if n > 8 else "")
        grace = format_duration(self.engine.settings.kill_grace_s)
        body = (
            f"{listed}.\n{plural(running, 'running job')} get SIGTERM, then SIGKILL after "
            f"{grace}; {plural(n - running, 'waiting job')} will not run. r runs them again."
        )

        def chosen(value: str | None) -> None:
            if value == "kill":
                self._bulk("kill", names, self.engine.kill, "killing")

        self.app.push_screen(
            ConfirmScreen(
                f"Kill {plural(n, 'job')}?", body, [Choice("y", "Kill", "kill", "error")]
            ),
            chosen,
        )

    def action_retry(self) -> None:
        marked = self._marked_views()
        if marked:
            ended = [v.spec.name for v in marked if v.record.final]
            if not ended:
                self.notify("none of the marked jobs has ended: nothing to retry",
                            severity="warning", timeout=4, markup=False)  # fmt: skip
            self._bulk("retry", ended, self.engine.retry, "queued again:")
            return
        view = self._selected_view()
        if view is None:
            return
        name = view.spec.name
        if self._refused(transitions.why_not_retry(view.record), timeout=4):
            return
        self._command("retry", lambda: self.engine.retry([name]), f"{name}: queued again")

    def action_details(self) -> None:
        view = self._selected_view()
        if view is not None:
            self.app.push_screen(DetailScreen(self.engine, view.spec.name, clock=self.clock))

    def action_focus_log(self) -> None:
        if self._selected_view() is not None:
            self._fit_side(log_wanted=True)
            self.log_view.focus()

    def action_back(self) -> None:
        if self.zoomed:
            self.action_zoom()
            return
        if self.focused is not self.table:
            self.table.focus()
        elif self.table.clear_marks():
            pass  # esc unmarks first, then clears the filter
        elif self.query_one("#filter-line").display:
            self._clear_filter()  # esc on the table clears the filter it shows

    def action_zoom(self) -> None:
        """The log alone on the screen (a traceback read whole at 80x24), and back."""
        zoom = not self.zoomed
        self.set_class(zoom, "-zoomed")
        if zoom:
            self.query_one(DiagnosisPanel).display = False
            self._fit_side(log_wanted=True)
            self.log_view.focus()
        else:
            self._show_selected()  # the diagnosis again, and at 80 columns its place
            self.table.focus()
        self.query_one(KeyBar).refresh()

    def action_pager(self) -> None:
        path = self._log_path if self.table.selected == self._log_job else None

        async def run() -> None:
            error = await page(self.app, path)
            if error:
                self.notify(error, severity="warning", timeout=6, markup=False)

        if self._selected_view() is not None:
            self.run_worker(run(), group="pager", exclusive=True, exit_on_error=False)

    @on(LogView.SearchRequested)
    def _open_search(self, event: LogView.SearchRequested) -> None:
        event.stop()
        self.query_one(LogSearch).open(event.log)

    def action_follow(self) -> None:
        self.log_view.toggle_follow()
        self.query_one(KeyBar).refresh()
        self.notify(
            "following the log" if self.log_view.follow else "log paused (f follows)", timeout=2
        )

    def action_filter(self) -> None:
        """``/``: the filter line under the table, filtering as you type (FilterBar)."""
        self.query_one("#filter-line").display = True
        self.query_one(FilterBar).open()

    @on(Input.Changed, "#filter-bar")
    def _filter_typed(self, event: Input.Changed) -> None:
        event.stop()
        self.table.set_filter(*parse_filter(event.value))
        self._update_queue_title()

    @on(FilterBar.Move)
    def _filter_move(self, event: FilterBar.Move) -> None:
        self.table.action_cursor(event.delta)

    @on(FilterBar.Closed)
    def _filter_closed(self, event: FilterBar.Closed) -> None:
        bar = self.query_one(FilterBar)
        table = self.table
        if not event.keep or not bar.active:
            self._clear_filter()
            return
        table.focus()
        table.action_first()  # the cursor on the first match: x acts on what is shown

    def _clear_filter(self) -> None:
        bar = self.query_one(FilterBar)
        bar.value = ""
        self.query_one("#filter-line").display = False
        self.query_one("#file-banner").display = False
        self.table.set_filter("all", "")
        self._update_queue_title()
        self.table.focus()

    def action_toggle_done(self) -> None:
        """E: the done jobs shown in their place, or folded away (then what runs and waits
        stays in view on a small screen)."""
        table = self.table
        table.set_fold_done(not table.fold_done)
        self._update_queue_title()
        if table.fold_done:
            self.notify(f"done jobs folded ({table.folded}): E shows them", timeout=2)
        else:
            self.notify("done jobs shown in their place: E folds them", timeout=2)

    def action_holders(self) -> None:
        """Expand / fold who holds each GPU under its bar (the GPU panel's own rendering)."""
        shown = self.query_one(GpuPanel).toggle_holders()
        self.notify("holders shown per process" if shown else "holders folded", timeout=2)

    def action_sparks(self) -> None:
        """Show or hide the GPU sparklines, at any height (issue 19.5)."""
        sparks = self.query_one(GpuSparks)
        self._sparks_shown = not sparks.display
        self._fit_sparks()
        self.notify(
            "GPU sparklines shown (s hides them)" if self._sparks_shown else "sparklines hidden",
            timeout=2,
        )

    def action_help(self) -> None:
        in_tmux = self.in_tmux or bool(os.environ.get("TMUX"))
        self.app.push_screen(HelpScreen(self.tmux_prefix if in_tmux else "ctrl+b"))

    @property
    def tmux_prefix(self) -> str:
        """The prefix key the user's tmux really uses (read once: it seldom changes)."""
        if self._tmux_prefix is None:
            self._tmux_prefix = tmux.prefix_key()
        return self._tmux_prefix

    def action_quit(self) -> None:
        if getattr(self.app, "engine_stopped", False):
            return  # leaving already (the queue is being handed over)
        # The engine's truth, not the table's (which may be one flush behind).
        views = self.engine.jobs()
        active = [v.spec.name for v in views if v.record.active]
        # Jobs that would start without a person: not held, not in a paused queue.
        waiting = [] if self.engine.paused else [
            v.spec.name for v in views if v.record.state == JobState.QUEUED
        ]
        quit_ = getattr(self.app, "shutdown_and_exit", None)
        if quit_ is None:  # pragma: no cover - always a GtuiApp
            self.app.exit()
            return
        if not (active or waiting) or getattr(self.engine, "remote", False):
            # Nothing would go on, or attached to a scheduler that runs elsewhere: quitting
            # this screen leaves it and its jobs running; there is nothing of ours to stop.
            quit_(kill_jobs=False)
            return
        running = [v for v in views if v.record.state == JobState.RUNNING]
        suspended = [v for v in views if v.record.state == JobState.SUSPENDED]
        n = len(active)
        q = self.engine.queue_path.name
        what = ", ".join(
            part
            for part in (
                f"{len(running)} running" if running else "",
                f"{len(suspended)} suspended" if suspended else "",
                f"{len(waiting)} waiting" if waiting else "",
            )
            if part
        )
        listed = active + waiting
        names = ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
        stays = " (a suspended job stays stopped)" if suspended else ""
        lines = [
            f"{plural(len(listed), 'job')} not ended ({what}): {names}.",
            "",
            "Keep going (enter, q): a scheduler in the background takes the queue over and "
            f"starts the waiting jobs, until {HANDOVER_STAY} after the last one ends; "
            f"`gtui {q}` shows it again, `gtui stop {q}` ends it.",
        ]
        if n:
            lines.append(
                f"Leave (l): running jobs go on{stays}, but no job starts until gtui opens {q} "
                "again."
            )
            lines.append("Kill (k): running jobs get SIGTERM (SIGKILL after kill_grace).")
        else:
            lines.append(f"Leave (l): no job starts until gtui opens {q} again.")
        body = "\n".join(lines)
        if self.in_tmux or os.environ.get("TMUX"):
            body += f"\n\nTo keep the dashboard running too, detach instead: {self.tmux_prefix} d."

        def chosen(value: str | None) -> None:
            hand_over = getattr(self.app, "hand_over_and_exit", None)
            if value == "handover" and hand_over is not None:
                hand_over()
            elif value in ("leave", "kill"):
                quit_(kill_jobs=value == "kill")

        choices = [
            Choice("q", "Keep going", "handover", "primary", default=True),
            Choice("l", "Leave", "leave"),
        ]
        if n:
            choices.append(Choice("k", "Kill, quit", "kill", "error"))
        self.app.push_screen(ConfirmScreen("Quit gtui?", body, choices), chosen)
