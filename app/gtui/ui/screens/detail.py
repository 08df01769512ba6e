"""The job detail view (``enter`` on a job, ``esc`` back): everything about one job, its log below.

What it says is built by gtui.ui.detail from the job's view, the queue (who it waits for, who
waits for it) and the attempts history, read from the state db read-only: the same whether the
scheduler runs in this process or elsewhere (a dashboard attached over the control socket). The
main screen hands it every batch of engine events while it is open (``apply``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gtui.core.api import JobView
from gtui.core.errors import GtuiError
from gtui.core.paths import queue_paths
from gtui.core.sched.eta import Estimate
from gtui.core.state.history import Attempt, attempts
from gtui.ui.detail import detail_renderable, detail_title
from gtui.ui.events import Batch
from gtui.ui.keys import DETAIL_KEYS, Key
from gtui.ui.pager import page
from gtui.ui.port import EnginePort, current_log
from gtui.ui.screens.help import HelpScreen
from gtui.ui.widgets.job_table import JobTable
from gtui.ui.widgets.keybar import KeyBar
from gtui.ui.widgets.log_search import LogSearch
from gtui.ui.widgets.log_view import LogView


def state_db(engine: EnginePort) -> Path:
    """The queue's state db: the engine's own paths (in process, or a RemoteEngine's), else
    worked out from the queue file as every command does."""
    paths = getattr(engine, "paths", None)
    db = getattr(paths, "db", None)
    return db if isinstance(db, Path) else queue_paths(engine.queue_path).db


class DetailScreen(Screen[None]):
    BINDINGS = [Binding(k.keys, k.action, k.label, show=False) for k in DETAIL_KEYS]

    def __init__(
        self, engine: EnginePort, name: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        super().__init__(id="detail-screen")
        self.engine = engine
        self.job = name
        self.clock = clock
        self.db = state_db(engine)
        self._history: list[Attempt] = []
        self._history_key: tuple[object, ...] | None = None
        self._view: JobView | None = None
        self._log_path: Path | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="detail-header")
        with VerticalScroll(id="detail-box"):
            yield Static(id="detail-body")
        yield LogView(id="detail-log")
        yield LogSearch(id="detail-search")
        yield KeyBar(self._key_label, keys=DETAIL_KEYS)

    def on_mount(self) -> None:
        self.call_after_refresh(self._setup)

    def _setup(self) -> None:
        self.show_job()
        self.query_one("#detail-box").focus()
        self.set_interval(1.0, self._tick)

    @property
    def log_view(self) -> LogView:
        return self.query_one("#detail-log", LogView)

    @property
    def history(self) -> list[Attempt]:
        """The job's recorded attempts, as last read from the state db."""
        return list(self._history)

    @property
    def zoomed(self) -> bool:
        return self.has_class("-zoomed")

    def _key_label(self, key: Key) -> str:
        if key.action == "zoom" and self.zoomed:
            return "Unzoom"
        return key.label

    # -- what it shows ------------------------------------------------------------------------

    def show_job(self) -> None:
        """Read the job, its attempts, and show them (again)."""
        view: JobView | None
        try:
            view = self.engine.view(self.job)
        except GtuiError:
            view = self._view  # removed from the queue: what was last known stays
        if view is None:
            self.query_one("#detail-body", Static).update(
                Text(f"{self.job} is not in the queue", style="dim")
            )
            return
        self._view = view
        rec = view.record
        key = (rec.attempt, rec.state, rec.ended_at)
        if key != self._history_key:
            self._history = attempts(self.db, self.job)
            self._history_key = key
        body = detail_renderable(
            view,
            jobs=self.engine.jobs(),
            history=self._history,
            settings=self.engine.settings,
            queue_path=self.engine.queue_path,
            now=self.clock(),
            estimate=self._estimate(),
            backfill=self._backfill(view),
            gpus=read.snapshot.gpus if (read := self.engine.gpus) is not None else (),
        )
        self.query_one("#detail-body", Static).update(body)
        self.query_one("#detail-header", Static).update(detail_title(view))
        self.query_one("#detail-box").border_title = f"Job · {view.spec.name}"
        path = current_log(self.engine, view)
        if path != self._log_path or self.log_view.path is None:
            self._log_path = path
            placeholder = "no log yet: the job has not started" if not rec.attempt else "no log"
            self.log_view.show(path, placeholder)
        self._update_log_title()

    def _estimate(self) -> Estimate | None:
        """The main screen's estimate for this job (it works them out every 2 s)."""
        for screen in self.app.screen_stack:
            estimates = getattr(screen, "estimates", None)
            if isinstance(estimates, dict):
                return estimates.get(self.job)
        return None

    def _backfill(self, view: JobView) -> str:
        """The main table's backfill note for ``view`` (it knows the whole queue), if any."""
        tables = [w for screen in self.app.screen_stack for w in screen.query(JobTable)]
        note = tables[0].backfill_note(view) if tables else None
        return note.plain if note is not None else ""

    def apply(self, batch: Batch) -> None:
        """A batch of engine events (from the main screen): show what concerns this job."""
        if batch.queue is not None or self.job in batch.jobs or self.job in batch.removed:
            self.show_job()
        elif batch.jobs and self._view is not None:
            names = {self.job, *self._view.spec.after}
            if names & set(batch.jobs) or any(
                self.job in v.spec.after for v in batch.jobs.values()
            ):
                self.show_job()  # one it waits for, or one that waits for it, changed
        if self.job in batch.logs:
            self.log_view.poll()

    def _tick(self) -> None:
        self.log_view.poll()
        if self._view is not None and self._view.record.active:
            self.show_job()  # "running for" moves

    @on(LogView.Changed)
    def _update_log_title(self) -> None:
        view = self._view
        log = self.log_view
        if view is None:
            return
        attempt = f" · attempt {view.record.attempt}" if view.record.attempt else ""
        log.border_title = f"Log · {view.spec.name}{attempt}"
        log.border_subtitle = log.status()

    @on(LogView.SearchRequested)
    def _open_search(self, event: LogView.SearchRequested) -> None:
        event.stop()
        self.action_search()

    # -- actions --------------------------------------------------------------------------------

    def action_back(self) -> None:
        if self.zoomed:
            self.action_zoom()
            return
        self.dismiss(None)

    def action_switch(self) -> None:
        box = self.query_one("#detail-box")
        if self.focused is box and self.log_view.display:
            self.log_view.focus()
        elif not self.zoomed:
            box.focus()

    def action_search(self) -> None:
        self.query_one("#detail-search", LogSearch).open(self.log_view)

    def action_search_next(self, direction: int) -> None:
        self.log_view.action_search_next(direction)

    def action_follow(self) -> None:
        self.log_view.toggle_follow()

    def action_zoom(self) -> None:
        self.toggle_class("-zoomed")
        if self.zoomed:
            self.log_view.focus()
        else:
            self.query_one("#detail-box").focus()
        self.query_one(KeyBar).refresh()
        self.call_after_refresh(self.log_view.reload)  # the window's height changed

    def action_pager(self) -> None:
        self.show_job()  # the log as the engine has it now: a job that just started has one

        async def run() -> None:
            error = await page(self.app, self._log_path)
            if error:
                self.notify(error, severity="warning", timeout=6, markup=False)

        self.run_worker(run(), group="pager", exclusive=True, exit_on_error=False)

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen())
