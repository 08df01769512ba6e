"""The scheduler: a thin asyncio orchestrator of parts that each do one job.

- the queue source (gtui.core.queue.source) and the intake (sched.intake): the file, one valid
  version at a time, taken in while it runs;
- the job book (gtui.core.state.book) over the store: the records, committed before told;
- the GPU reader (gtui.core.gpus.reader): readings that a hanging driver cannot stop;
- the planner (sched.planner) around the pure policy: who starts where, and why not;
- occupancy (sched.occupancy): what our jobs and our neighbours hold on the GPUs;
- the job runner (sched.runs): starts, watches, time limits and kills, through the executor;
- the operations (sched.commands): one method per client request;
- forecasts and notifications (sched.forecast, sched.notifying): subscribers of a run's end;
- the event bus (gtui.core.bus): what changed, to every front end.

The engine keeps the lifecycle (start, the loop, shutdown) and the accessors the front ends
call; each part is built with what it needs once the store is open (sched.wiring). A placement
pass runs whenever a job ends, the queue changes, or ``poll`` elapses. It never imports a UI.
Commands build an engine through sched.build.

Size: about 550 lines; the class is under 400 (its parts hold the logic), the rest is its
imports and a few small functions of the module that need no engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from gtui.core.api import EventSink, GpusRead, JobView, QueueChanged, QueuePaused
from gtui.core.bus import EventBus
from gtui.core.control.server import refuse_if_served, serve
from gtui.core.diagnosis.userrules import UserRules
from gtui.core.errors import GtuiError
from gtui.core.exec.base import Executor, off_loop
from gtui.core.exec.local import LocalExecutor
from gtui.core.gcpause import paused_gc
from gtui.core.gpus.reader import GpuReader
from gtui.core.gpus.snapshot import GpuBackend, GpuSnapshot
from gtui.core.memtrim import give_back_freed
from gtui.core.model import JobState, Settings
from gtui.core.paths import QueuePaths, queue_paths
from gtui.core.queue.queuefile import refuse_node_names
from gtui.core.queue.source import QueueSource
from gtui.core.sched.closing import save_for_next
from gtui.core.sched.commands import Operations
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.faults import crash_point
from gtui.core.sched.handover import Successor, spawn_successor
from gtui.core.sched.opening import lock_queue, open_queue, readopt
from gtui.core.sched.planner import Planner
from gtui.core.sched.policy import pool_totals
from gtui.core.sched.quarantine import Quarantine
from gtui.core.sched.report import Moment, document, pieces, status_head, status_tail
from gtui.core.sched.runs import UNISOLATED_WARNING
from gtui.core.sched.wiring import Hooks, Parts, wire
from gtui.core.state.backup import Backups
from gtui.core.state.book import JobBook
from gtui.core.units import plural

__all__ = ["UNISOLATED_WARNING", "Engine", "pool_totals"]  # pool_totals: sched.policy

REASON_SAVE_S = 30.0  # waiting reasons are saved at most this often (and at shutdown)
QUIT_NOTIFY_S = 3.0  # what a quitting dashboard gives notifications still being delivered
FREEZE_FROM = 5000  # jobs in the queue from which the start's objects are frozen (gc.freeze)
DEFERRED_CHUNK = 5000  # never-run records saved per turn of the loop (~0.1 s at most)

P = ParamSpec("P")
R = TypeVar("R")


class _Operation(Generic[P, R]):
    """``engine.kill`` is ``engine.parts.ops.kill``: the operations keep their names on the engine,
    where the control socket (ControlledEngine) and the dashboard (EnginePort) call them."""

    def __init__(self, method: Callable[Concatenate[Operations, P], R]) -> None:
        self._name = method.__name__

    @overload
    def __get__(self, engine: None, owner: type) -> _Operation[P, R]: ...

    @overload
    def __get__(self, engine: Engine, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(
        self, engine: Engine | None, owner: type | None = None
    ) -> Callable[P, R] | _Operation[P, R]:
        if engine is None:
            return self  # on the class (a monkeypatch saving it, help())
        method: Callable[P, R] = getattr(engine.parts.ops, self._name)
        return method


class Engine:
    """Owns one queue while it runs it: its parts, the lock, and the control socket."""

    def __init__(
        self,
        queue_path: Path | str,
        *,
        fake_gpus: str | None = None,
        backend: GpuBackend | None = None,
        executor: Executor | None = None,
        control: bool = True,
        dispatch: bool = True,
        cluster: str | None = None,
    ) -> None:
        self.paths: QueuePaths = queue_paths(queue_path)
        self.queue_path: Path = self.paths.queue
        self._fake_opt = fake_gpus
        self._backend_given = backend
        self._executor = executor or LocalExecutor()
        self._executor_given = executor is not None
        self._cluster_opt = cluster  # --backend: "ray" / "local" over the file's [cluster]
        self._control_wanted = control
        self._dispatch = dispatch  # False: a scheduler that starts nothing (tests, simulator)
        self._scheduler = dispatch  # a scheduler, not an engine that only applies commands
        self._bus = EventBus()
        self._config = QueueConfig(self._bus)
        self._reader: GpuReader | None = None
        self._pool = lambda: pool_totals(self._config.settings, _snapshot(self._reader))
        self._source = QueueSource(self.queue_path, self._bus, self._pool)
        self._user_rules = UserRules(self._bus)
        self._quarantine = Quarantine(None)  # the store's, once started
        # The book and the parts that need the store: made by start() (sched.wiring).
        self._book: JobBook = None  # type: ignore[assignment,unused-ignore]
        self._planner: Planner | None = None
        self.parts: Parts = None  # type: ignore[assignment,unused-ignore]
        self._lock: Any = None
        self._backups: Backups | None = None  # set with the store
        self._control: Any = None
        self._started = False
        self._stopping = False
        self.stop_requested = False  # by ``stop`` (`gtui stop`): the loop ends, then shutdown
        self.exits_with_run = False  # by `gtui run`: `gtui stop` waits for the process to end
        self.taking_over = False  # by a dashboard's successor: its start has crash points
        self._shut_down = False  # a shutdown completed: another one has nothing to do
        self._wake: asyncio.Event | None = None
        self._started_at: float | None = None
        self._fresh_pass = False  # a job's end just read the GPUs and ran a pass (see run)
        self._last_poll = 0.0  # monotonic time of the loop's last GPU read and pass
        self._deferring: asyncio.Task[None] | None = None
        self._froze = False  # gc.freeze() done by start (undone by shutdown)

    # ------------------------------------------------------------------ the operations
    kill = _Operation(Operations.kill)
    pause = _Operation(Operations.pause)
    resume = _Operation(Operations.resume)
    retry = _Operation(Operations.retry)
    preempt = _Operation(Operations.preempt)
    pause_queue = _Operation(Operations.pause_queue)
    resume_queue = _Operation(Operations.resume_queue)
    clear_quarantine = _Operation(Operations.clear_quarantine)
    add = _Operation(Operations.add)
    add_many = _Operation(Operations.add_many)
    edit = _Operation(Operations.edit)
    remove = _Operation(Operations.remove)
    move = _Operation(Operations.move)

    # ------------------------------------------------------------------ read-only accessors
    @property
    def settings(self) -> Settings:
        return self._config.settings

    @property
    def paused(self) -> bool:
        return self._config.paused

    @property
    def gpus(self) -> GpusRead | None:
        return self.parts.occupancy.gpus if self.parts is not None else None

    @property
    def fake(self) -> bool:
        return self._reader is not None and self._reader.source == "fake"

    @property
    def started(self) -> bool:
        return self._started

    @property
    def quarantined(self) -> dict[int, dict[str, object]]:
        """GPUs out of placement after a hardware fault: index -> why, which job, since."""
        return dict(self._quarantine.gpus)

    def jobs(self) -> list[JobView]:
        return self._book.views() if self._book is not None else []

    def view(self, name: str) -> JobView:
        book = _started(self._book, self.queue_path)
        book.require(name)
        return book.view(name)

    def names_in(self, *states: JobState) -> list[tuple[str, JobState]]:
        """The jobs in ``states``, by name and state, in queue order (no view of every job)."""
        return self._book.names_in(states) if self._book is not None else []

    def counts(self) -> dict[str, int]:
        return _started(self._book, self.queue_path).counts()

    def log_path(self, name: str) -> Path | None:
        log = _started(self._book, self.queue_path).require(name).log
        return Path(log) if log else None

    def _moment(self) -> Moment:
        book, running, paused = self._book, self._scheduler, self._config.paused
        return Moment(
            head=status_head(
                self.queue_path, running, self._started_at, paused, _snapshot(self._reader)
            ),
            views=book.views(copies=False) if book is not None else [],
            tail=status_tail(book, self._source, self._quarantine, _host_of(self.parts)),
            forecast=self.parts.forecast if self.parts is not None else None,
        )

    def status_json(self) -> dict[str, Any]:
        return document(self._moment())

    def status_chunks(self) -> Iterator[str]:
        """``status_json`` as compact JSON text (sched/statustext.py), in pieces made as they are
        taken: the control socket sends a piece at a time, letting the loop run between them.
        Every job's document is one moment's; the jobs and their order are its start's."""
        yield from pieces(self._moment())

    async def status(self) -> dict[str, Any]:
        """The client API's status (gtui.core.control.client): here, in-process."""
        return self.status_json()

    def subscribe(
        self, sink: EventSink, kinds: tuple[type, ...] | None = None
    ) -> Callable[[], None]:
        return self._bus.subscribe(sink, kinds)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Load the queue, take the lock, open the store, re-adopt running jobs."""
        if self._started:
            return
        self._wake = asyncio.Event()
        with paused_gc():
            snapshot = await self._start()
            self._started = True
            self._started_at = time.time()
            if self._scheduler:
                self._book.store.set_meta("scheduler_since", f"{self._started_at:.3f}")
            freeze = len(self._book.order) >= FREEZE_FROM
            if freeze:
                # What the start made (a spec and a record per job, 100,000 in a long sweep)
                # lives on, holds no cycles, and is frozen out of the collector's way (its
                # full passes were 40 % of the first pass). One collection first, so that no
                # garbage is frozen, and before a screen's views are made (with them it
                # walked ~960,000 objects, 0.65-0.8 s of a dashboard's start). Undone at
                # shutdown.
                _collect_and_give_back()
            if self._bus.wants(QueueChanged):
                self._bus.publish(QueueChanged(tuple(self.jobs())))
            if freeze:
                gc.freeze()
                self._froze = True
        self._bus.publish(QueuePaused(self._config.paused))
        if snapshot.error:
            self._bus.notice("warning", snapshot.error)

    async def _start(self) -> GpuSnapshot:
        """The body of ``start`` (with the collector paused); returns the first GPU read."""
        queue, _text = self._source.first()  # taken again once the GPUs are read
        ray = (self._cluster_opt or queue.settings.cluster_backend) == "ray"
        if not ray:  # before any state is made: a refused file leaves nothing behind
            refuse_node_names(queue.path, queue.settings)
        self.paths, self._lock = lock_queue(self.paths)
        if self.taking_over:
            crash_point("handover_locked")
        try:
            if self._control_wanted:
                refuse_if_served(self.paths)
            fake, backend = self._fake_opt or queue.settings.fake_gpus, self._backend_given
            opened = open_queue(self.paths, self._source, self._bus, queue, ray, backend, fake)
            if opened.executor is not None and not self._executor_given:
                self._executor = opened.executor
            self._reader, self._backups, self._book = opened.reader, opened.backups, opened.book
            self._config.paused = opened.paused
            hooks = Hooks(self._kick, self._after_end, lambda: self._stopping)
            common = (self._bus, self._config, self._executor, self.paths, self._source)
            self.parts = parts = wire(
                opened.book, opened.reader, *common, self._user_rules, self._pool, hooks
            )
            self._planner, self._quarantine = parts.planner, parts.quarantine
            parts.intake.take(opened.queue, initial=True)
            self._source.taken(opened.text)
            opened.reader.snapshot = opened.snapshot
            local = not ray and isinstance(self._executor, LocalExecutor)
            log_dir = self.paths.log_dir(self._config.settings.log_dir)
            run_dir = self.paths.run_dir if local else None
            book, runner, backups = self._book, parts.runner, opened.backups
            readopt(book, self._executor, runner, log_dir, run_dir, self._bus, backups)
            if self._control_wanted:
                self._control = await serve(self, self._bus)
            if self.taking_over:
                crash_point("handover_adopted")
        except BaseException:
            self._release()
            raise
        return opened.snapshot

    async def run(self, *, exit_when_idle: bool = False, stay_s: float = 0.0) -> int:
        """The scheduling loop. Returns 0 if every job is done, else 1.
        ``exit_when_idle``: it ends ``stay_s`` after the queue last had nothing to do (``inf``:
        only when stopped), so a `gtui add` meanwhile still finds a scheduler."""
        await self.start()
        assert self._wake is not None
        idle_since: float | None = None
        log_task = asyncio.create_task(self.parts.logs.watch_logs())
        file_task = asyncio.create_task(self.parts.intake.watch())
        try:
            while not self._stopping:
                fresh, self._fresh_pass = self._fresh_pass, False
                interval = self.parts.occupancy.poll_interval(self._config.settings.poll_s)
                if not fresh or time.monotonic() - self._last_poll >= interval:
                    await self._poll()
                    self._last_poll = time.monotonic()
                    self._schedule()
                    deferring = self._deferring
                    if self._book.deferred and (deferring is None or deferring.done()):
                        saving = _save_deferred(self._book, lambda: self._stopping)
                        self._deferring = asyncio.create_task(saving)
                # else: woken by a job's end, which has just read the GPUs and run a pass;
                # another pass now would find the same and take the CPU from the job it started
                # (end to start: 2 ms of 10 on 2 busy cores, benchmarks/end_to_start.py).
                self.parts.occupancy.publish_gpus()
                wait = self.parts.occupancy.poll_interval(self._config.settings.poll_s)
                if exit_when_idle and self._idle():
                    self.parts.notifying.check_queue_done(lambda: True)  # queue_done, before exit
                    now = time.monotonic()
                    if idle_since is None:
                        idle_since = now
                        if stay_s > 0:
                            self._bus.notice("info", _staying_words(self.queue_path.name, stay_s))
                    left = idle_since + stay_s - now
                    if left <= 0:
                        break
                    wait = min(wait, left)
                else:
                    idle_since = None
                await _woken_or_after(self._wake, wait)
                self._wake.clear()
        finally:
            for task in (log_task, file_task):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if exit_when_idle or self.stop_requested:
            await self.shutdown()
        book = self._book
        state = book.records.state
        return 0 if all(state(n) == JobState.DONE for n in book.order) else 1

    async def hand_over(self) -> Successor:
        """Give the queue to a headless scheduler in the background (a dashboard that quits):
        start it, then release the queue (lock, socket, store) for it to take; it re-adopts
        the running jobs as any restart does. Running jobs go on throughout. GtuiError when
        no successor could be started: the queue is then still this engine's."""
        successor = spawn_successor(self.paths, fake_gpus=self._fake_opt, backend=self._cluster_opt)
        crash_point("handover_spawned")
        await self.shutdown()
        crash_point("handover_released")
        return successor

    async def stop(self, *, kill: bool = False) -> None:
        """End the scheduler for a client (``gtui stop``): ``run``'s loop ends and the engine
        shuts down. Running jobs go on (the next scheduler re-adopts them) unless ``kill``.
        Returns before the shutdown: the request is answered while the socket still serves."""
        self._dispatch = False  # nothing new starts from here on
        killed: list[str] = []
        if kill and self._started:
            killed = [n for n in self._book.active_names() if self._book.records[n].active]
            if killed:
                with contextlib.suppress(GtuiError):  # told already; what still runs is said
                    await self.kill(killed)
        left = _left_words([v.spec.name for v in self.jobs() if v.record.active], killed)
        self._bus.notice("warning", f"stopped by `gtui stop`: this scheduler has ended; {left}")
        self.stop_requested = True
        self._stopping = True
        if self._wake is not None:
            self._wake.set()

    async def shutdown(self, *, kill_jobs: bool = False) -> None:
        """Stop scheduling and release the queue; running jobs go on unless ``kill_jobs``."""
        if self._shut_down:
            return  # already done (``gtui stop`` ended the loop, then the screen quit)
        self._dispatch = False  # nothing new starts from here on
        if kill_jobs and self._started:
            # Kill while the watchers still record the ends: the jobs are stored as killed.
            active = [n for n in self._book.active_names() if self._book.records[n].active]
            if active:
                with contextlib.suppress(GtuiError):  # a kill that failed is told already
                    await self.kill(active)
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        if self._deferring is not None:  # it stops at its next chunk; the rest is saved below
            self._deferring.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._deferring
            self._deferring = None
        if self.parts is not None:
            await self.parts.runner.close()  # what runs in the background, timers, watchers
            # Deliveries under way: `gtui run` waits their deadline out ("queue done" goes out
            # before it exits); a dashboard that quits, a few seconds at most.
            notify_s = self._config.settings.notify.timeout_s + 1.0
            await self.parts.notifying.drain(notify_s if self.exits_with_run else QUIT_NOTIFY_S)
        self._source.close()
        if self._control is not None:
            with contextlib.suppress(Exception):
                await self._control.close()
            self._control = None
        self._user_rules.close()
        if self._book is not None:
            save_for_next(self._book, self._planner, self._backups, self._scheduler, self._bus)
        if self.parts is not None:
            with contextlib.suppress(Exception):
                self.parts.occupancy.publish_claims()  # jobs left running stay claimed; ended: not
        self._release()
        if self._froze:  # collectable again: a process may go on (tests, benchmarks)
            self._froze = False
            gc.unfreeze()
            gc.collect()
        self._shut_down = True

    def _release(self) -> None:
        if self._book is not None:
            with contextlib.suppress(Exception):
                self._book.store.close()
        if self._lock is not None:
            with contextlib.suppress(Exception):
                self._lock.release()
            self._lock = None
        if self._reader is not None:
            self._reader.close()

    def _idle(self) -> bool:
        """Nothing runs and nothing more can start without a person (``gtui run`` exits); a
        paused queue is not idle: `gtui resume` must find someone to resume."""
        known = len(_snapshot(self._reader).gpus)
        return not self._config.paused and self._book.idle(gpus_known=known)

    async def reload(self) -> None:
        """Read the queue file again now (the control socket's ``reload``, after ``gtui add``)."""
        await self.parts.intake.reload()
        self._schedule()

    async def _poll(self) -> None:
        book = self._book
        book.save_unsaved()
        if time.monotonic() - book.reasons_saved >= REASON_SAVE_S:
            book.save_reasons()
        self.parts.intake.reload_if_changed()
        if self._scheduler and self._backups is not None and self._backups.due():
            self.parts.runner.spawn(_back_up(self._backups))  # a whole file's copy: off the loop
        await self.parts.occupancy.read()  # the GPUs, our jobs' use of them, the neighbours' claims
        self.parts.health.check()  # a GPU that failed: out, its jobs queued again
        self.parts.energy.sample()  # running attempts' power, and whether their GPUs are shared

    def _schedule(self) -> None:
        """One placement pass: block what can never run, start what can, explain the rest."""
        if not self._started or self._stopping or self._planner is None:
            return
        self._planner.block_dependents()
        occupancy = self.parts.occupancy
        decision = occupancy.decide()  # counts neighbours' claims
        starts = decision.starts if self._dispatch and not self._book.unsaved else ()
        with occupancy.claiming(starts) as claims_changed:  # the claims board locked, read again
            if claims_changed:
                decision = occupancy.decide()
                starts = decision.starts
            for start in starts:
                self.parts.runner.start_job(start.name, start.gpus)
        self._planner.explain(self.parts.preemption.plan(decision) if self._dispatch else decision)

    def _kick(self) -> None:
        self._schedule()
        if self._wake is not None:
            self._wake.set()

    async def _after_end(self, name: str) -> None:
        """A job ended (its watcher, after its end is recorded): read the GPUs at once so the
        freed one is seen, run a pass, and tell [notify] when the queue is done."""
        await self.parts.occupancy.read_after_end()
        self._schedule()
        self._fresh_pass = True
        if self._wake is not None:
            self._wake.set()
        self.parts.notifying.check_queue_done(self._idle)


async def _woken_or_after(wake: asyncio.Event, seconds: float) -> None:
    """Until ``wake`` is set or ``seconds`` pass. Not ``asyncio.wait_for``: on Python 3.11 it
    returns normally when the task is cancelled as the event is set (a job's end and a SIGTERM
    at once), and the cancel of ``gtui run``'s SIGTERM was lost: the loop ran on for good."""
    waiter = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait((waiter,), timeout=seconds)
    finally:
        waiter.cancel()


def _snapshot(reader: GpuReader | None) -> GpuSnapshot:
    if reader is None:
        return GpuSnapshot(gpus=(), taken_at=0.0, source="none")
    return reader.snapshot


def _host_of(parts: Parts | None) -> dict[str, object] | None:
    """The host's cores and memory for the status (None before the start, or not read)."""
    return parts.occupancy.host.doc() if parts is not None else None


def _started(book: JobBook | None, queue_path: Path) -> JobBook:
    if book is None:
        raise GtuiError(f"the scheduler of {queue_path.name} has not started yet")
    return book


def _left_words(running: list[str], killed: list[str]) -> str:
    """What became of the jobs when `gtui stop` ended the scheduler."""
    n = len(running)
    if running:
        more = " ..." if n > 5 else ""
        return (
            f"{plural(n, 'running job')} keep{'s' if n == 1 else ''} running "
            f"({', '.join(running[:5])}{more}) and {'is' if n == 1 else 'are'} re-adopted by "
            "the next scheduler"
        )
    return f"{plural(len(killed), 'running job')} killed" if killed else "no job was running"


def _collect_and_give_back() -> None:
    """A full collection, then the memory the start's parse freed back to the system: the C
    heap kept ~30 MB of it at 100,000 jobs (gtui.core.memtrim)."""
    gc.collect()
    give_back_freed()


async def _save_deferred(book: JobBook, stopping: Callable[[], bool]) -> None:
    """The records of jobs that never ran, saved once the first jobs have started, a chunk
    at a time with the loop free in between: at 100,000 jobs one transaction held the loop
    (and the dashboard's first screens) for ~2 s. Shutdown saves whatever is left."""
    many = len(book.deferred) > DEFERRED_CHUNK
    while not stopping() and book.save_deferred(limit=DEFERRED_CHUNK):
        await asyncio.sleep(0)
    if many and not book.deferred:
        give_back_freed()  # the chunks' JSON documents and the reasons' set are gone


async def _back_up(backups: Backups) -> None:
    await off_loop(backups.write)


def _staying_words(queue: str, stay_s: float) -> str:
    """What a `gtui run` with nothing more to run says about how long it stays."""
    span = f"{stay_s / 60:g} min" if stay_s >= 60 else f"{stay_s:g} s"
    until = (
        f"until `gtui stop {queue}`"
        if math.isinf(stay_s)
        else f"until {time.strftime('%H:%M:%S', time.localtime(time.time() + stay_s))}, "
        f"{span} after its last job ended (`gtui stop {queue}` ends it sooner)"
    )
    return f"nothing more to run: this scheduler stays for `gtui add {queue}` {until}"
