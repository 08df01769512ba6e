"""The main screen: header, GPUs, queue, log, diagnosis, and every key's action.

The screen composes the widgets and binds the keys; what each key does, how the engine's state
comes in and how the panes fit the terminal is done by its rooms (gtui.ui.rooms), one job each.
Engine events arrive through ``apply`` already coalesced (gtui.ui.events); the actions call the
engine's commands in workers, so a kill that waits out ``kill_grace`` never freezes the screen.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable

from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Container, Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Static

from gtui.core.sched.eta import Estimate
from gtui.ui.alerts import Alerts
from gtui.ui.events import Batch
from gtui.ui.forecast import UiForecast
from gtui.ui.format import display_path
from gtui.ui.keys import KEYS, PANEL_KEYS, ROOM_KEYS, VIEW_KEYS, Key
from gtui.ui.port import EnginePort
from gtui.ui.rooms.commands import Commands
from gtui.ui.rooms.feed import Feed
from gtui.ui.rooms.job_keys import JobKeys
from gtui.ui.rooms.log_pane import LogPane
from gtui.ui.rooms.panes import Panes
from gtui.ui.rooms.queue_box import QueueBox
from gtui.ui.rooms.queue_edits import QueueEdits
from gtui.ui.rooms.quit import ask_quit
from gtui.ui.rooms.selection import Selection
from gtui.ui.rooms.view import MainView
from gtui.ui.screens.detail import DetailScreen
from gtui.ui.screens.help import HelpScreen
from gtui.ui.widgets.diagnosis import DiagnosisPanel
from gtui.ui.widgets.filter_bar import FilterBar
from gtui.ui.widgets.gpu_panel import GPU_TITLE, GpuPanel, host_title
from gtui.ui.widgets.gpu_sparks import GpuSparks
from gtui.ui.widgets.header import HeaderBar
from gtui.ui.widgets.job_table import JobTable
from gtui.ui.widgets.keybar import KeyBar
from gtui.ui.widgets.log_search import LogSearch
from gtui.ui.widgets.log_view import LogView

LOADING_PAINT_S = 0.5  # the "reading" frame is waited for this long at most before the start


class MainScreen(MainView):
    BINDINGS = [
        *(Binding(k.keys, k.action, k.label, show=False) for k in KEYS),
        Binding("escape", "back", "Back", show=False),
        *(Binding(k.keys, k.action, k.label, show=False) for k in PANEL_KEYS),
        *(Binding(k.keys, k.action, k.label, show=False) for k in VIEW_KEYS),
        *(Binding(k.keys, k.action, k.label, show=False) for k in ROOM_KEYS),
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
        self.ready = False  # set once the engine runs and its state is on screen
        self.panes = Panes(self)
        self.selection = Selection(self)
        self.commands = Commands(self)
        self.queue_box = QueueBox(self)
        self.log_pane = LogPane(self, self.selection)
        self.job_keys = JobKeys(self, self.selection, self.commands)
        self.queue_edits = QueueEdits(self, self.selection, self.commands)
        self.feed = Feed(
            self,
            in_tmux=in_tmux,
            selection=self.selection,
            commands=self.commands,
            panes=self.panes,
            queue_box=self.queue_box,
            log_pane=self.log_pane,
        )

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
            yield GpuSparks(clock=self.clock, id="gpu-sparks")
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
        gpus = self.query_one(GpuPanel)
        self.query_one("#gpus-box").border_title = GPU_TITLE + host_title(
            gpus.read.host if gpus.read else None
        )
        self.query_one("#diagnosis").display = False
        self.query_one("#filter-line").display = False
        self.query_one("#file-banner").display = False
        self.panes.fit_main()
        self.panes.fit_sparks()
        self.queue_box.update_title()
        self.log_pane.update_title()
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
        self.set_interval(1.0, self.feed.tick)

    async def _show_loading(self) -> None:
        """The screen, with what is known, on the terminal before the engine's start (seconds
        for a 100,000-job file, the loop held all along): without it the last frame before the
        start said "no jobs" and the default mode meanwhile."""
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
        self.panes.fit_main()
        self.panes.fit_sparks()

    @property
    def composed(self) -> bool:
        """Every widget that ``apply`` updates is there (not before compose, nor while the app
        tears the screen down: its widgets go one by one)."""
        return all(self.query(w) for w in (HeaderBar, GpuPanel, JobTable, LogView, KeyBar))

    def _key_label(self, key: Key) -> str:
        if key.action == "pause_job":
            return self.job_keys.pause_label(key.label)
        if key.action == "pause_queue":
            return "Resume queue" if self.engine.paused else "Pause queue"
        if key.action == "filter" and isinstance(self.focused, (LogView, LogSearch)):
            return "Search"  # `/` in the focused log searches it
        return key.label

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        for bar in self.query(KeyBar):
            bar.refresh()  # `/` reads Search in the log, Filter elsewhere

    # -- engine state in (gtui.ui.rooms.feed) ---------------------------------------------

    @property
    def forecast(self) -> UiForecast:
        return self.feed.forecast

    @property
    def estimates(self) -> dict[str, Estimate]:
        """The estimates of the last tick (the detail view reads its job's here)."""
        return self.feed.estimates

    @property
    def alerts(self) -> Alerts:
        return self.feed.alerts

    def populate(self) -> None:
        """The engine's whole state now (after start); events then keep it current."""
        self.feed.populate()

    def all_ended_note(self) -> str | None:
        return self.feed.all_ended_note()

    def apply(self, batch: Batch) -> None:
        """One coalesced batch of events: update the widgets in place."""
        self.feed.apply(batch)

    # -- what the widgets say ---------------------------------------------------------------

    @on(JobTable.MarksChanged)
    def _on_marks(self, event: JobTable.MarksChanged) -> None:
        self.queue_box.update_title()

    @on(JobTable.Selected)
    def _on_selected(self, event: JobTable.Selected) -> None:
        self.log_pane.show_selected()
        if self.table.folded != self.queue_box.title_folded:  # leaving a done job folded it
            self.queue_box.update_title()  # (not at every move: it counts the marks, O(jobs))
        self.query_one(KeyBar).refresh()

    @on(LogView.Changed)
    def _on_log_changed(self) -> None:
        self.log_pane.update_title()

    @on(LogView.SearchRequested)
    def _open_search(self, event: LogView.SearchRequested) -> None:
        event.stop()
        self.query_one(LogSearch).open(event.log)

    @on(Input.Changed, "#filter-bar")
    def _filter_typed(self, event: Input.Changed) -> None:
        event.stop()
        self.queue_box.filter_typed(event.value)

    @on(FilterBar.Move)
    def _filter_move(self, event: FilterBar.Move) -> None:
        self.table.action_cursor(event.delta)

    @on(FilterBar.Closed)
    def _filter_closed(self, event: FilterBar.Closed) -> None:
        self.queue_box.filter_closed(event.keep)

    # -- the keys (gtui.ui.keys), each done by its room ------------------------------------------

    def opens_filter(self, key: str) -> bool:
        """Whether ``key``, pressed now, opens the filter line (``/`` on the queue; in a
        focused log it searches the log instead)."""
        return key == "slash" and isinstance(self.focused, JobTable)

    def closes_filter(self, key: str) -> bool:
        """Whether ``key``, pressed now, ends the typing in the filter line (enter or esc
        while the line has the focus)."""
        return key in ("enter", "escape") and isinstance(self.focused, FilterBar)

    def opens_form(self, key: str) -> bool:
        """Whether ``key``, pressed now, opens the add / edit form (GtuiApp keeps the keys typed
        after it for the form)."""
        return self.queue_edits.opens_form(key)

    def action_add(self) -> None:
        self.queue_edits.add()

    def action_edit(self) -> None:
        self.queue_edits.edit()

    def action_remove(self) -> None:
        self.queue_edits.remove()

    def action_move_up(self) -> None:
        self.job_keys.move("up")

    def action_move_down(self) -> None:
        self.job_keys.move("down")

    def action_move_top(self) -> None:
        self.job_keys.move("top")

    def action_pause_job(self) -> None:
        self.job_keys.pause_job()

    def action_pause_queue(self) -> None:
        self.job_keys.pause_queue()

    def action_clear_quarantine(self) -> None:
        """Give back the GPUs a hardware fault took out of placement (asks first)."""
        self.job_keys.clear_quarantine()

    def action_kill(self) -> None:
        """In a worker: the room awaits the question, then the kill (``kill_grace`` long)."""
        self.run_worker(self.job_keys.kill(), group="commands", exit_on_error=False)

    def action_retry(self) -> None:
        self.job_keys.retry()

    def action_make_room(self) -> None:
        self.job_keys.make_room()

    def action_details(self) -> None:
        view = self.selection.view()
        if view is not None:
            self.app.push_screen(DetailScreen(self.engine, view.spec.name, clock=self.clock))

    def action_focus_log(self) -> None:
        self.log_pane.focus()

    def action_back(self) -> None:
        if self.zoomed:
            self.action_zoom()
            return
        if self.focused is not self.table:
            self.table.focus()
        elif self.table.clear_marks():
            pass  # esc unmarks first, then clears the filter
        elif self.queue_box.filter_shown:
            self.queue_box.clear_filter()  # esc on the table clears the filter it shows

    def action_zoom(self) -> None:
        """The log alone on the screen (a traceback read whole at 80x24), and back."""
        self.log_pane.zoom()

    def action_pager(self) -> None:
        self.log_pane.pager()

    def action_follow(self) -> None:
        self.log_pane.follow()

    def action_filter(self) -> None:
        """``/``: the filter line under the table, filtering as you type (FilterBar)."""
        self.queue_box.open_filter()

    def action_toggle_done(self) -> None:
        self.queue_box.toggle_done()

    def action_toggle_groups(self) -> None:
        self.queue_box.toggle_groups()

    def action_holders(self) -> None:
        """Expand / fold who holds each GPU under its bar (the GPU panel's own rendering)."""
        shown = self.query_one(GpuPanel).toggle_holders()
        self.notify("holders shown per process" if shown else "holders folded", timeout=2)

    def action_sparks(self) -> None:
        self.panes.toggle_sparks()

    def action_help(self) -> None:
        in_tmux = self.in_tmux or bool(os.environ.get("TMUX"))
        self.app.push_screen(HelpScreen(self.tmux_prefix if in_tmux else "ctrl+b"))

    def action_quit(self) -> None:
        ask_quit(self)
