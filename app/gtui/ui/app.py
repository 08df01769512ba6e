"""The Textual app: runs the engine as a worker and feeds its events to the main screen.

Engine events are folded into a buffer (gtui.ui.events) and applied at most every FLUSH_S, so a
storm of JobChanged / LogGrew costs a few repaints, not one per event.

The engine may publish from a task that knows nothing of the app: ``gtui QUEUE.toml`` starts the
engine (and its control socket, its re-adopted jobs' watchers) before the app runs, so a
`gtui kill` from another shell is served outside it. Textual's timers need the app's context,
so a flush is scheduled on the event loop and handed to the app as a message, which works from
any task; events that come before the app runs wait in the buffer until it does.

Size: about 400 lines, of what needs the app's own loop and nothing else: the engine's life
(its start, its loop, quitting and handing the queue over), the event flush, and the keys typed
ahead of a form or the filter line.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.worker import Worker

from gtui.core.api import Event
from gtui.core.errors import GtuiError
from gtui.core.sched.handover import taken_over
from gtui.styles import stylesheet
from gtui.ui import escape
from gtui.ui.events import EventBuffer
from gtui.ui.keys import DETAIL_KEYS, KEYS, PANEL_KEYS, ROOM_KEYS, VIEW_KEYS
from gtui.ui.port import EnginePort
from gtui.ui.prefs import save_theme, saved_theme
from gtui.ui.screens.detail import DetailScreen
from gtui.ui.screens.job_form import JobForm
from gtui.ui.screens.main import MainScreen
from gtui.ui.widgets.filter_bar import FilterBar

TYPEAHEAD_MAX_S = 2.0  # a form's key that opened no form by then gives its kept keys back
# A filter line that got enter / esc and still has the focus by then (it never closes: no
# known way) gives the keys read after it back; its close moves the focus well before.
FILTER_CLOSE_MAX_S = 30.0
FLUSH_S = 0.05  # coalescing window for engine events (20 repaints a second at most)
LOOP_AFTER_S = 1.0  # the engine's loop starts by then even if the table was not painted


class GtuiApp(App[int]):
    """``GtuiApp(engine).run()``; returns the exit code (0, or the engine's error code)."""

    CSS_PATH = [stylesheet("app.tcss")]
    TITLE = "gtui"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True),
        Binding("ctrl+c", "quit", "Quit", show=False),
    ]

    def __init__(
        self,
        engine: EnginePort,
        *,
        host: str | None = None,
        clock: Callable[[], float] = time.time,
        in_tmux: bool = False,
        startup_notice: str | None = None,
    ) -> None:
        super().__init__()
        escape.install(in_tmux=in_tmux)
        self.engine = engine
        self.host = host or socket.gethostname().split(".")[0]
        self.clock = clock
        self.in_tmux = in_tmux
        self.startup_notice = startup_notice
        self.buffer = EventBuffer()
        self._flush_pending = False
        self._events_loop: asyncio.AbstractEventLoop | None = None  # set once the app runs
        self._thread = threading.get_ident()
        # Subscribed now, not once the app runs: what the engine says meanwhile (a notice of
        # its start, a refused reload) waits in the buffer instead of being lost.
        self._unsubscribe: Callable[[], None] | None = engine.subscribe(self._sink)
        self._shut_down = False
        self.flushes = 0  # batches applied (the benchmark reads it)
        self.engine_error: str | None = None
        self.start_error: GtuiError | None = None  # what the engine's start raised, if it did
        # Keys typed after a key that opens a form, kept for that form (typed_ahead).
        self._typeahead: list[events.Key] | None = None
        self._typeahead_round = 0  # which form's key the kept keys are for
        # Keys typed after "/" until its line has the focus (and, after an enter there, until
        # the table has it back): the filter's own, then the table's (_feed_held).
        self._held: list[events.Key] | None = None
        self._held_for = "bar"
        self._held_since = 0.0
        self._held_timer: Timer | None = None
        self._theme_restored = False
        self.engine_loop: Worker[None] | None = None  # the engine's loop, once it runs

    # -- the theme, kept between runs (gtui.ui.prefs) ----------------------------------------

    def on_mount(self) -> None:
        saved = saved_theme()
        if saved is not None and saved in self.available_themes:
            self.theme = saved
        self._theme_restored = True  # from now on a change is the user's, and is saved

    def watch_theme(self, theme: str) -> None:
        if self._theme_restored:
            # A thread: a config folder on a slow network disk must not stall the screen.
            self.run_worker(partial(save_theme, theme), thread=True, group="prefs")

    # -- screens --------------------------------------------------------------------------

    def get_default_screen(self) -> Screen[None]:
        return MainScreen(self.engine, host=self.host, clock=self.clock, in_tmux=self.in_tmux)

    @property
    def main(self) -> MainScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    # -- the engine -----------------------------------------------------------------------

    async def start_engine(self) -> bool:
        """Called by the main screen once it is composed: subscribe, start, show, run."""
        self._thread = threading.get_ident()
        if self._unsubscribe is None:
            self._unsubscribe = self.engine.subscribe(self._sink)
        if not getattr(self.engine, "started", False):
            try:
                await self.engine.start()
            except GtuiError as e:
                self.start_error = e
                self._shut_down = True
                self.exit(e.exit_code, return_code=e.exit_code, message=f"gtui: {e}")
                return False
        self.main.populate()
        # From now on events flush to the screen; what came before is flushed now (applied
        # after the full read it is no older than it: the buffer folds every event in order).
        self._events_loop = asyncio.get_running_loop()
        self._schedule_flush()
        # The loop (its first placement pass: ~1.4 s over 100,000 waiting jobs, then the
        # never-run records saved a chunk at a time) starts once the filled table is on
        # screen, not before: started here, it ran ahead of the first frame and the user
        # looked at an empty screen for all of it.
        self.main.table.after_paint(self._start_loop)
        self.set_timer(LOOP_AFTER_S, self._start_loop)  # a table never painted (hidden)
        if self.startup_notice:
            self.notify(self.startup_notice, severity="warning", timeout=20, markup=False)
        again = self.main.all_ended_note()
        if again:
            self.notify(again, title="nothing left to run", timeout=60, markup=False)
        return True

    def _start_loop(self) -> None:
        if self._shut_down or self.engine_loop is not None:
            return
        self.engine_loop = self.run_worker(
            self._run_engine(), name="engine", group="engine", exit_on_error=False
        )

    async def _run_engine(self) -> None:
        try:
            await self.engine.run()
            if getattr(self.engine, "stop_requested", False) and not self._shut_down:
                # `gtui stop`: the scheduler this screen ran has ended, so the screen goes too
                # (a dashboard left open on a stopped queue would look alive and do nothing).
                await self.stop_engine()
                q = self.engine.queue_path.name
                self.exit(
                    0,
                    return_code=0,
                    message=f"gtui: stopped by `gtui stop`; running jobs keep running, and the "
                    f"next `gtui {q}` or `gtui run {q}` re-adopts them",
                )
        except GtuiError as e:
            self.engine_error = str(e)
            self.notify(f"the scheduler stopped: {e}", severity="error", timeout=30, markup=False)
        except Exception as e:  # a bug: keep the screen, say it loudly
            self.engine_error = repr(e)
            self.notify(
                f"the scheduler stopped with an internal error: {e!r}. Jobs that run keep "
                "running; quit and open the queue again to re-adopt them.",
                severity="error",
                timeout=60,
                markup=False,
            )

    def _sink(self, event: Event) -> None:
        """Called by the engine (on this loop's thread, synchronously, from any task, before
        or while the app runs): buffer and schedule."""
        if threading.get_ident() != self._thread:
            self.call_from_thread(self._sink, event)
            return
        self.buffer.add(event)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        """One flush FLUSH_S from now, unless one is due. Not ``set_timer``: a Textual timer
        made in a task outside the app dies on its first tick, and the flag stayed set."""
        loop = self._events_loop
        if self._flush_pending or loop is None or not self.buffer:
            return  # one is due, or the app does not run yet (start_engine flushes), or no news
        self._flush_pending = True
        try:
            loop.call_later(FLUSH_S, self._deliver_flush)
        except BaseException:
            self._flush_pending = False  # the loop is closing: nothing will flush
            raise

    def _deliver_flush(self) -> None:
        """On the loop, in whatever task context: have the app apply the batch in its own."""
        if not self.call_later(self._apply_events):
            self._flush_pending = False  # the app is closing: it takes no more messages

    def _apply_events(self) -> None:
        self._flush_pending = False
        if not self.buffer or not self.screen_stack:
            return  # nothing new, or the app is closing
        main = self.screen_stack[0]
        if not isinstance(main, MainScreen) or not main.composed:
            # Its widgets are not there (not composed yet, or torn down as the app leaves):
            # the events stay in the buffer, and the next event's flush delivers them.
            return
        self.flushes += 1
        main.apply(self.buffer.take())

    def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    # -- keys typed ahead of a form -------------------------------------------------------

    async def on_event(self, event: events.Event) -> None:
        """Keys reach the app in order, well before a binding's action has opened its form:
        a whole form typed at once (a paste, a script, a fast typist over SSH) would run its
        letters as the main screen's keys (`e` edit, `d` remove, `p` pause). So from a key that
        opens a form until the form is there, keys are kept for it, in order."""
        fresh = isinstance(event, events.Key) and not event.is_forwarded  # not bubbled back
        if fresh and isinstance(event, events.Key) and event.key not in ("ctrl+c", "ctrl+q"):
            if self._typeahead is not None:
                self._typeahead.append(event)
                return
            form = self.screen
            if isinstance(form, JobForm) and event.key in ("enter", "tab", "shift+tab"):
                form.type_key(event)  # moves the field now, before the next key is routed
                return
            if self._held is not None:  # typed after "/", before its line had the focus
                self._held.append(event)
                self._feed_held()
                return
            if len(self.screen_stack) == 1 and self.main.opens_filter(event.key):
                self._hold_for_filter()
            if len(self.screen_stack) == 1 and self.main.closes_filter(event.key):
                await super().on_event(event)  # the line's, behind the letters it has yet
                self._hold_for_table()
                return
            if len(self.screen_stack) == 1 and self.main.opens_form(event.key):
                self._typeahead = []
                self._typeahead_round += 1
                round_ = self._typeahead_round
                self.set_timer(TYPEAHEAD_MAX_S, lambda: self._release_typeahead(round_))
        await super().on_event(event)

    def _hold_for_filter(self) -> None:
        self._held, self._held_for, self._held_since = [], "bar", time.monotonic()
        self._held_timer = self.set_interval(0.02, self._feed_held)

    def _hold_for_table(self) -> None:
        """Enter / esc went to the focused filter line, which closes it only once the line
        has handled it (a message later): the keys read with it wait for the table."""
        self._held, self._held_for, self._held_since = [], "table", time.monotonic()
        self._held_timer = self.set_interval(0.02, self._feed_held)

    def _feed_held(self) -> None:
        """Give the keys typed after ``/`` to the filter line once it has the focus; after an
        enter or esc there, the rest to the table once it has the focus back. Past
        TYPEAHEAD_MAX_S (a line that never opened) they go where they would have gone; the
        wait for the table is not cut short by load (only past FILTER_CLOSE_MAX_S)."""
        held = self._held
        if held is None:
            return
        main = self.main
        bar = main.query_one(FilterBar)
        waited = time.monotonic() - self._held_since
        late = waited > TYPEAHEAD_MAX_S
        closing_late = waited > FILTER_CLOSE_MAX_S
        if self._held_for == "bar" and bar.has_focus:
            while held:
                key = held.pop(0)
                if not bar.type_ahead(key):
                    held.insert(0, key)  # not the line's: the screen's, in order
                    break
                if key.key in ("enter", "escape"):
                    # the line closes; the table takes what follows, however long that takes
                    self._held_for, self._held_since = "table", time.monotonic()
                    break
            if not held and self._held_for == "bar":
                self._stop_holding([])  # the line has the focus: keys reach it as usual
                return
            if held and self._held_for == "bar":
                self._stop_holding(held)
                return
        if self._held_for == "table" and (not bar.has_focus or closing_late):
            self._stop_holding(held)
            return
        if self._held_for == "bar" and late:
            self._stop_holding(held)

    def _stop_holding(self, rest: list[events.Key]) -> None:
        self._held = None
        if self._held_timer is not None:
            self._held_timer.stop()
            self._held_timer = None
        for key in rest:
            self.post_message(key)

    def typed_ahead(self) -> list[events.Key]:
        """The keys kept since the form's key (for the form, once it is there)."""
        keys, self._typeahead = self._typeahead or [], None
        return keys

    def _release_typeahead(self, round_: int) -> None:
        """No form came (the key was refused): the kept keys go where they would have. Only
        for the form's key that set this timer, not a later one."""
        if round_ != self._typeahead_round:
            return
        for key in self.typed_ahead():
            self.post_message(key)

    # -- quitting ---------------------------------------------------------------------------

    async def action_quit(self) -> None:
        """ctrl+q / ctrl+c: the same question as ``q`` when jobs run."""
        if len(self.screen_stack) > 1:
            self.pop_screen()
        self.main.action_quit()

    def shutdown_and_exit(self, *, kill_jobs: bool = False) -> None:
        """Stop the engine (and maybe its jobs), then leave."""
        if kill_jobs:
            self.notify("killing running jobs…", timeout=30)

        async def stop() -> None:
            await self.stop_engine(kill_jobs=kill_jobs)
            self.exit(0, return_code=0)

        self.run_worker(stop(), group="quit", exclusive=True)

    def hand_over_and_exit(self) -> None:
        """Quit, and let a scheduler in the background go on with the queue (the engine's
        hand_over). One that cannot be started is said, and this screen keeps the queue."""
        if self._shut_down:
            return
        self._shut_down = True  # from here `q` does nothing: the hand-over is under way
        self.notify("handing the queue to a scheduler in the background…", timeout=60)

        async def hand_over() -> None:
            try:
                successor = await self.engine.hand_over()
            except GtuiError as e:
                self._shut_down = False
                msg = f"{e}; this dashboard goes on running the queue"
                self.notify(msg, severity="error", timeout=30, markup=False)
                return
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None
            q = self.engine.queue_path.name
            code, message = await asyncio.to_thread(taken_over, successor, q)
            self.exit(code, return_code=code, message=message)

        self.run_worker(hand_over(), group="handover")

    async def stop_engine(self, *, kill_jobs: bool = False) -> None:
        if self._shut_down:
            return
        self._shut_down = True
        if kill_jobs:
            # Kill through the command first, while the engine still records what ends: the
            # jobs are then "killed" in the store, not "running" until the next start finds
            # them gone.
            active = [v.spec.name for v in self.engine.jobs() if v.record.active]
            if active:
                try:
                    await self.engine.kill(active)
                except GtuiError as e:
                    self.notify(str(e), severity="error", markup=False)
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        await self.engine.shutdown(kill_jobs=kill_jobs)

    @property
    def engine_stopped(self) -> bool:
        return self._shut_down

    # -- command palette ------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The keys of the screen the palette was opened on (the job detail view has its
        own), each run on that screen; from a dialog, the main screen's."""
        target: Screen[Any] = screen if isinstance(screen, DetailScreen) else self.main
        main_keys = (*KEYS, *VIEW_KEYS, *PANEL_KEYS, *ROOM_KEYS)
        keys = DETAIL_KEYS if isinstance(screen, DetailScreen) else main_keys
        for k in keys:
            yield SystemCommand(
                k.palette,
                f"key {k.shown}: {k.help}",
                partial(self._palette_action, target, k.action),
            )
        if not isinstance(screen, DetailScreen):
            yield SystemCommand(
                "Give quarantined GPUs back",
                "GPUs out of placement after a hardware fault (also: gtui quarantine --clear)",
                partial(self._palette_action, self.main, "clear_quarantine"),
            )
        for cmd in super().get_system_commands(screen):
            if cmd.title not in ("Quit", "Keys"):
                yield cmd

    def _palette_action(self, screen: Screen[Any], action: str) -> None:
        self.call_later(screen.run_action, action)
