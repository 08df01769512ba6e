"""The main screen (DESIGN.md 6): header, GPUs, queue, log, diagnosis, and every key's action.

Engine events arrive through ``apply`` already coalesced (gtui.ui.events); the actions call the
engine's commands in workers, so a kill that waits out ``kill_grace`` never freezes the screen.

Size: the main screen's actions, one per key of DESIGN.md 6, each with its worker; the
widgets it holds are in gtui.ui.widgets.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Literal

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Vertical, VerticalScroll
from textual.screen import Screen

from gtui.core.api import JobView
from gtui.core.errors import GtuiError
from gtui.core.model import JobState
from gtui.core.units import format_duration
from gtui.ui.events import Batch
from gtui.ui.format import count_states, display_path
from gtui.ui.forms import changed_fields, fields_from_form, form_from_spec
from gtui.ui.keys import KEYS, Key
from gtui.ui.pager import page
from gtui.ui.port import EnginePort
from gtui.ui.screens.confirm import Choice, ConfirmScreen
from gtui.ui.screens.detail import DetailScreen
from gtui.ui.screens.filter import FilterScreen
from gtui.ui.screens.help import HelpScreen
from gtui.ui.screens.job_form import JobForm
from gtui.ui.widgets.diagnosis import DiagnosisPanel
from gtui.ui.widgets.gpu_panel import GpuPanel
from gtui.ui.widgets.header import HeaderBar
from gtui.ui.widgets.job_table import JobTable
from gtui.ui.widgets.keybar import KeyBar
from gtui.ui.widgets.log_search import LogSearch
from gtui.ui.widgets.log_view import LogView

NARROW_BELOW = 120  # columns: below this the log goes under the queue instead of beside it
LOG_MIN_INTERVAL = 0.25  # seconds between two repaints of a growing log


class MainScreen(Screen[None]):
    BINDINGS = [
        *(Binding(k.keys, k.action, k.label, show=False) for k in KEYS),
        Binding("escape", "back", "Back", show=False),
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
        self.ready = False  # set once the engine runs and its state is on screen

    # -- layout -----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        e = self.engine
        yield HeaderBar(
            host=self.host,
            queue=display_path(e.queue_path),
            settings=e.settings,
            fake=e.fake,
        )
        with VerticalScroll(id="gpus-box"):
            yield GpuPanel(e.settings, id="gpus")
        with Container(id="main"):
            with Vertical(id="queue-box"):
                yield JobTable(clock=self.clock, id="jobs")
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
        self.query_one("#main").set_class(self.size.width < NARROW_BELOW, "-narrow")
        self._update_queue_title()
        self._update_log_title()
        self.query_one(JobTable).focus()
        self.set_interval(1.0, self._tick)
        start = getattr(self.app, "start_engine", None)
        if start is not None:
            await start()
        self.ready = True

    def on_resize(self) -> None:
        for main in self.query("#main"):
            main.set_class(self.size.width < NARROW_BELOW, "-narrow")

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
        self._after_jobs_changed()

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
                table.update_jobs(batch.jobs.values())
                jobs_changed = True
            if batch.removed:
                table.remove_jobs(batch.removed)
                jobs_changed = True
            if batch.gpus is not None:
                self.query_one(GpuPanel).set_read(batch.gpus)
            if batch.summary is not None:
                self._summary = batch.summary
            for n in batch.notices:
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

    def _sync_settings(self) -> None:
        header = self.query_one(HeaderBar)
        header.settings = self.engine.settings
        header.fake = self.engine.fake
        header.refresh()
        self.query_one(GpuPanel).settings = self.engine.settings

    def _after_jobs_changed(self) -> None:
        if self._select_after and self.table.select(self._select_after):
            self._select_after = None
        self.query_one(HeaderBar).set_state(
            paused=self.engine.paused, counts=count_states(self.table.views())
        )
        self._update_queue_title()
        self.query_one(KeyBar).refresh()

    def _update_queue_title(self) -> None:
        box = self.query_one("#queue-box")
        table = self.table
        shown = len(table.visible_names)
        total = len(table)
        f = table.filter_name
        what = f"{shown} jobs" if f == "all" and not table.filter_text else f"{shown} of {total}"
        flt = f" · {f}" + (f" · name~{table.filter_text}" if table.filter_text else "")
        box.border_title = f"Queue{flt} · {what}  (/ filters)"
        box.border_subtitle = self._summary

    def _tick(self) -> None:
        self.table.tick()
        if self.log_view.poll():
            self._log_refreshed = time.monotonic()

    # -- the selected job: its log and diagnosis -------------------------------------------

    @on(JobTable.Selected)
    def _on_selected(self, event: JobTable.Selected) -> None:
        self._show_selected()
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
        """At 80 columns the side panel is short: a diagnosis (what to do next) takes it whole,
        until you ask for the log (l; z zooms it to the whole screen)."""
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

    def action_edit(self) -> None:
        view = self._selected_view()
        if view is None:
            return
        if not view.record.waiting:
            self.notify(
                f"{view.spec.name} is {view.record.state.value}: only a waiting (queued or held) "
                "job can be edited",
                severity="warning",
                timeout=5,
                markup=False,
            )
            return
        name = view.spec.name
        before = form_from_spec(view.spec)

        async def submit(values: dict[str, str]) -> str:
            fields = changed_fields(before, values)
            self._own_edit_until = time.monotonic() + 3.0
            if fields:
                await self.engine.edit(name, fields)
            new = fields.get("name")
            return new if isinstance(new, str) and new else name

        def edited(new_name: str | None) -> None:
            if new_name:
                self._select_after = new_name
                self.notify(f"saved {new_name}", timeout=3, markup=False)

        self.app.push_screen(JobForm(f"Edit {name}", submit, before, verb="Save"), edited)

    def action_remove(self) -> None:
        view = self._selected_view()
        if view is None:
            return
        name = view.spec.name
        if view.record.active:
            self.notify(
                f"{name} is {view.record.state.value}: kill it first (x)",
                severity="warning",
                timeout=5,
                markup=False,
            )
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

    def _move(self, where: Literal["up", "down", "top"]) -> None:
        view = self._selected_view()
        if view is None:
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
        view = self._selected_view()
        if view is None:
            return
        name, st = view.spec.name, view.record.state
        if st in (JobState.QUEUED, JobState.RUNNING):
            self._command(
                "pause",
                lambda: self.engine.pause([name]),
                f"{name}: {'held' if st == JobState.QUEUED else 'suspended (SIGSTOP)'}",
            )
        elif st in (JobState.HELD, JobState.SUSPENDED):
            self._command("resume", lambda: self.engine.resume([name]), f"{name}: resumed")
        else:
            self.notify(
                f"{name} is {st.value}: nothing to pause (r retries it)",
                severity="warning",
                timeout=4,
                markup=False,
            )

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
        view = self._selected_view()
        if view is None:
            return
        name, rec = view.spec.name, view.record
        if rec.final:
            self.notify(
                f"{name} is {rec.state.value}: there is nothing to kill",
                severity="warning",
                timeout=4,
                markup=False,
            )
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

    def action_retry(self) -> None:
        view = self._selected_view()
        if view is None:
            return
        name = view.spec.name
        if not view.record.final:
            self.notify(
                f"{name} is {view.record.state.value}: only a finished job can be retried",
                severity="warning",
                timeout=4,
                markup=False,
            )
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
        table = self.table

        def chosen(result: tuple[str, str] | None) -> None:
            if result is not None:
                table.set_filter(*result)
                self._update_queue_title()

        self.app.push_screen(
            FilterScreen(table.filter_name, table.filter_text, count_states(table.views())),
            chosen,
        )

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())

    def action_quit(self) -> None:
        # The engine's truth, not the table's (which may be one flush behind).
        active = [v.spec.name for v in self.engine.jobs() if v.record.active]
        quit_ = getattr(self.app, "shutdown_and_exit", None)
        if quit_ is None:  # pragma: no cover - always a GtuiApp
            self.app.exit()
            return
        if not active or getattr(self.engine, "remote", False):
            # Attached to a scheduler that runs elsewhere: quitting this screen leaves it and
            # its jobs running; there is nothing of ours to kill.
            quit_(kill_jobs=False)
            return
        n = len(active)
        names = ", ".join(active[:5]) + (f" and {n - 5} more" if n > 5 else "")
        q = self.engine.queue_path.name
        it, they = ("it", "it") if n == 1 else ("they", "them")
        body = (
            f"{n} job{'s' if n > 1 else ''} running: {names}.\n\n"
            f"Leave: {it} keep{'s' if n == 1 else ''} running, and gtui re-adopts {they} the "
            f"next time it opens {q}. No queued job starts until then.\n"
            f"Kill: {it} get{'s' if n == 1 else ''} SIGTERM (SIGKILL after kill_grace), "
            "then gtui quits."
        )
        if self.in_tmux or os.environ.get("TMUX"):
            body += "\n\nTo keep the dashboard running too, detach instead: ctrl+b d."

        def chosen(value: str | None) -> None:
            if value in ("leave", "kill"):
                quit_(kill_jobs=value == "kill")

        self.app.push_screen(
            ConfirmScreen(
                "Quit gtui?",
                body,
                [
                    Choice("q", "Leave running", "leave", "primary"),
                    Choice("k", "Kill, quit", "kill", "error"),
                ],
            ),
            chosen,
        )
