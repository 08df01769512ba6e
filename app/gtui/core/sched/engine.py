"""The scheduler: a thin asyncio orchestrator of parts that each do one job.

- the queue source (gtui.core.queue.source): the file, one valid version at a time;
- the job book (gtui.core.state.book) over the store: the records, committed before told;
- the GPU reader (gtui.core.gpus.reader): readings that a hanging driver cannot stop;
- the planner (gtui.core.sched.planner) around the pure policy: who starts where, and why not;
- the executor (gtui.core.exec): the only part that touches processes;
- the event bus (gtui.core.bus): what changed, to every front end.

A placement pass runs whenever a job ends, the queue changes, or ``poll`` elapses. It never
imports a UI. How a job's run goes is in ``runs``; the operations clients call, in ``commands``.

Size: about 600 lines of lifecycle (start, loop, shutdown) and the wiring of the parts; each
part's logic lives in its own module.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gtui.core.api import EventSink, GpusRead, JobRemoved, JobView, QueueChanged, QueuePaused
from gtui.core.bus import EventBus
from gtui.core.control.server import refuse_if_served, serve
from gtui.core.diagnosis.userrules import UserRules
from gtui.core.errors import GtuiError
from gtui.core.exec.base import Executor, off_loop
from gtui.core.exec.local import LocalExecutor
from gtui.core.gpus.backend import open_backend
from gtui.core.gpus.reader import GpuReader
from gtui.core.gpus.snapshot import GpuBackend, GpuSnapshot
from gtui.core.model import JobState, Settings
from gtui.core.paths import (
    QueuePaths,
    ensure_state_dir,
    queue_paths,
    register_queue,
)
from gtui.core.queue.queuefile import QueueFile, refuse_node_names
from gtui.core.queue.source import QueueSource
from gtui.core.sched.commands import Commands
from gtui.core.sched.faults import crash_point
from gtui.core.sched.forecast import Forecast
from gtui.core.sched.handover import Successor, spawn_successor
from gtui.core.sched.notifying import Notifying
from gtui.core.sched.occupancy import Occupancy
from gtui.core.sched.outcome import Rules
from gtui.core.sched.planner import Planner
from gtui.core.sched.policy import pool_totals
from gtui.core.sched.quarantine import Quarantine
from gtui.core.sched.recovery import rebuilt_words, recover
from gtui.core.sched.runs import UNISOLATED_WARNING, Runs
from gtui.core.sched.statustext import status_chunks
from gtui.core.state.backup import Backups, open_checked
from gtui.core.state.book import JobBook, paused_gc
from gtui.core.state.status import status_dict
from gtui.core.state.store import Store, StoreError
from gtui.core.units import plural

__all__ = ["UNISOLATED_WARNING", "Engine", "pool_totals"]  # pool_totals: sched.policy

FILE_WATCH_S = 0.2  # how often the queue file's stat is looked at between polls
REASON_SAVE_S = 30.0  # waiting reasons are saved at most this often (and at shutdown)
FAST_POLL_S = 0.2  # after a job ends on real GPUs, poll this often (occupancy.FAST_POLL_FOR_S)
QUIT_NOTIFY_S = 3.0  # what a quitting dashboard gives notifications still being delivered
FREEZE_FROM = 5000  # jobs in the queue from which the start's objects are frozen (gc.freeze)
DEFERRED_CHUNK = 5000  # never-run records saved per turn of the loop (~0.1 s at most)


class Engine(Runs, Occupancy, Commands, Forecast, Notifying):
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
        # dispatch=False: a scheduler that starts nothing (tests, the simulator's checks).
        self._dispatch = dispatch
        self._scheduler = dispatch  # a scheduler, not an engine that only applies commands
        self._bus = EventBus()
        self._source = QueueSource(self.queue_path, self._bus, self._pool)
        self._book: JobBook = None  # type: ignore[assignment,unused-ignore]  # set by start()
        self._planner: Planner | None = None
        self._reader: GpuReader | None = None
        self._settings = Settings()
        self._user_rules = UserRules(self._bus)
        self._quarantine = Quarantine(None)  # the store's, once started
        self._rules = Rules(self._settings)
        self._lock: Any = None
        self._backups: Backups | None = None  # set with the store
        self._control: Any = None
        self._paused = False
        self._gpus: GpusRead | None = None
        self._started = False
        self._stopping = False
        # Set by ``stop`` (``gtui stop``): the loop ends and the engine shuts down.
        self.stop_requested = False
        # Set by `gtui run`: the process ends with ``run`` (`gtui stop` waits for it to be gone).
        self.exits_with_run = False
        # Set by the `gtui run` a dashboard handed its queue to: its start has crash points.
        self.taking_over = False
        self._shut_down = False  # a shutdown completed: another one has nothing to do
        self._wake: asyncio.Event | None = None
        self._started_at: float | None = None
        self._observed: dict[str, dict[int, int]] = {}
        self._last_gpu_meta = ""
        self._fresh_pass = False  # a job's end just read the GPUs and ran a pass (see run)
        self._last_poll = 0.0  # monotonic time of the loop's last GPU read and pass
        self._fast_until = 0.0
        self._deferring: asyncio.Task[None] | None = None
        # Held by an edit of the queue file from its write to its take-in (see Commands).
        self._file_edits = asyncio.Lock()
        self._froze = False  # gc.freeze() done by start (undone by shutdown)
        self._init_runs()
        self._init_forecast()
        self._init_notifying()

    # ------------------------------------------------------------------ read-only accessors
    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def gpus(self) -> GpusRead | None:
        return self._gpus

    @property
    def fake(self) -> bool:
        reader = self._reader
        return reader is not None and reader.source == "fake"

    @property
    def started(self) -> bool:
        return self._started

    @property
    def _snapshot(self) -> GpuSnapshot:
        if self._reader is None:
            return GpuSnapshot(gpus=(), taken_at=0.0, source="none")
        return self._reader.snapshot

    def jobs(self) -> list[JobView]:
        return self._book.views() if self._book is not None else []

    def _started_book(self) -> JobBook:
        if self._book is None:
            raise GtuiError(f"the scheduler of {self.queue_path.name} has not started yet")
        return self._book

    def view(self, name: str) -> JobView:
        book = self._started_book()
        book.require(name)
        return book.view(name)

    def counts(self) -> dict[str, int]:
        return self._started_book().counts()

    def log_path(self, name: str) -> Path | None:
        log = self._started_book().require(name).log
        return Path(log) if log else None

    def _status_head(self) -> dict[str, Any]:
        scheduler = {"running": self._scheduler, "pid": os.getpid(), "since": self._started_at}
        return {
            "queue": str(self.queue_path),
            "scheduler": scheduler,
            "paused": self._paused,
            "gpus": [g.to_json() for g in self._snapshot.gpus],
        }

    def _status_tail(self) -> dict[str, Any]:
        """What is wrong right now, in words (a full disk, a broken queue file), and the GPUs
        out of placement."""
        problems = []
        book = self._book
        if book is not None and book.unsaved and book.store_error:
            problems.append(
                f"cannot save the job states ({len(book.unsaved)} change(s) waiting): "
                f"{book.store_error}; no job starts until they are saved"
            )
        if self._source.error and self._source.problem:
            problems.append(self._source.problem)
        quarantined = {str(g): why for g, why in sorted(self._quarantine.gpus.items())}
        return {"problems": problems, "quarantined": quarantined}

    def status_json(self) -> dict[str, Any]:
        head = self._status_head()
        views = self._book.views(copies=False) if self._book is not None else []
        with paused_gc():  # 100,000 dicts of jobs: see JobBook.views
            doc = status_dict(self.queue_path, self._paused, head["gpus"], views, head["scheduler"])
        if views:
            self._add_estimates(doc["jobs"], views)  # progress, ETAs (issue 19.3)
        doc.update(self._status_tail())
        return doc

    def status_text(self) -> str:
        """``status_json`` as compact JSON text (sched/statustext.py)."""
        return "".join(self.status_chunks())

    def status_chunks(self) -> Iterator[str]:
        """``status_text`` in pieces, made as they are taken: what the control socket sends,
        a piece at a time, letting the loop run between them. Every job's document is one
        moment's; the jobs and their order are those of the moment it began."""
        views = self._book.views(copies=False) if self._book is not None else []
        with paused_gc():
            est = self._estimates(views) if views else {}
        head, tail = self._status_head(), self._status_tail()
        chunks = status_chunks(head, views, tail, est, time.time())
        while True:
            with paused_gc():  # thousands of strings a piece: see JobBook.views
                piece = next(chunks, None)
            if piece is None:
                return
            yield piece

    async def status(self) -> dict[str, Any]:
        """The client API's status (gtui.core.control.client): here, in-process."""
        return self.status_json()

    def subscribe(
        self, sink: EventSink, kinds: tuple[type, ...] | None = None
    ) -> Callable[[], None]:
        return self._bus.subscribe(sink, kinds)

    @property
    def _store(self) -> Store | None:
        return self._book.store if self._book is not None else None

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
                # What the start made (a spec, a record and, for a screen, a view per job:
                # 100,000 of each in a long sweep) lives on and holds no cycles: out of the
                # collector's way from here on. Its full passes over them were 40 % of the
                # first pass at 100,000 jobs. One full collection first, so that no garbage is
                # frozen with them (a screen an earlier engine left, in a process that starts
                # several), and before the screen's views are made: they are new and live,
                # and with them the collection walked ~960,000 objects, 0.65-0.8 s of a
                # dashboard's start at 100,000 jobs. Undone at shutdown.
                gc.collect()
            if self._bus.wants(QueueChanged):
                self._bus.publish(QueueChanged(tuple(self.jobs())))
            if freeze:
                gc.freeze()
                self._froze = True
        self._bus.publish(QueuePaused(self._paused))
        if snapshot.error:
            self._bus.notice("warning", snapshot.error)

    async def _start(self) -> GpuSnapshot:
        """The body of ``start`` (with the collector paused); returns the first GPU read."""
        queue, text = self._source.first()
        ray = (self._cluster_opt or queue.settings.cluster_backend) == "ray"
        if not ray:  # before any state is made: a refused file leaves nothing behind
            refuse_node_names(queue.path, queue.settings)
        from gtui.core.state.lock import QueueLock

        ensure_state_dir(self.paths)
        # The queue's identity, not its file name, keys the lock: after `mv q.toml q2.toml`,
        # `gtui run q2.toml` meets the scheduler that runs q.toml.
        self.paths = register_queue(self.paths)
        lock = QueueLock(self.paths)
        lock.acquire()
        self._lock = lock
        if self.taking_over:
            crash_point("handover_locked")
        try:
            if self._control_wanted:
                refuse_if_served(self.paths)
            backend = self._backend_given
            spec = self._fake_opt or queue.settings.fake_gpus
            store: Store | None = None
            try:
                if ray:  # the store first: it keeps the nodes' GPU numbers (the records')
                    store = self._open_store()
                    backend = self._open_ray(queue.settings.cluster_address, backend, store, spec)
                if backend is None:
                    backend = open_backend(spec, self.queue_path.parent)
                self._reader = GpuReader(backend, self._bus)
                snapshot = backend.read(())
                queue, text = self._source.first(pool_totals(queue.settings, snapshot))
                # The two loads are done: the parse's ~1.5 KB a job goes before the records
                # and Candidates are made, which then take its freed memory instead of more
                # (at 100,000 jobs the start's RSS stays at the parse's peak).
                self._source.forget()
                store = store or self._open_store()
                self._book = JobBook(store, self._bus, self.queue_path.name)
            except BaseException:
                if store is not None:
                    store.close()
                raise
            self._planner = Planner(self._book, self._bus)
            self._quarantine = Quarantine(store)
            self._paused = store.get_meta("paused") == "1"
            store.set_meta("scheduler_pid", str(os.getpid()))
            # Which executor ran the jobs: a command given while no scheduler runs must not
            # judge a cluster's jobs from this machine (gtui.core.control.offline).
            store.set_meta("backend", "ray" if ray else "local")
            self._take_queue(queue, initial=True)
            self._source.taken(text)
            self._reader.snapshot = snapshot
            self._recover(ray)
            self._use_history()  # mem = "auto", and mem far from the last runs (issue 19.2)
            now = time.time()
            for name, rec in self._book.records.live().items():  # back-offs under way
                if rec.waiting and rec.retry_at is not None and rec.retry_at > now:
                    self._arm_retry(name, rec.retry_at - now)
            if self._control_wanted:
                self._control = await serve(self, self._bus)
            if self.taking_over:
                crash_point("handover_adopted")
        except BaseException:
            self._release()
            raise
        return snapshot

    def _open_ray(
        self, address: str, backend: GpuBackend | None, store: Store, fake: str | None
    ) -> GpuBackend:
        """Jobs on a Ray cluster (issue 23): Ray is imported here and only here. ``store``
        keeps the nodes' names and GPU numbers for the next scheduler."""
        from gtui.core.exec.ray import open_cluster

        executor, gpus = open_cluster(address, store)
        if not self._executor_given:
            self._executor = executor
        nodes = len(executor.cluster.live())
        self._bus.notice("info", f"Ray cluster at {address}: {nodes} node(s)")
        if fake and backend is None:
            self._bus.notice(
                "warning",
                f"simulated GPUs {fake!r} (fake_gpus, --fake-gpus) are for this machine only "
                "and not used on a Ray cluster: a node's GPUs are simulated by the "
                "GTUI_FAKE_GPUS of its own `ray start` (README: Several servers)",
            )
        return backend or gpus

    async def run(self, *, exit_when_idle: bool = False, stay_s: float = 0.0) -> int:
        """The scheduling loop. Returns 0 if every job is done, else 1 (DESIGN.md 2).
        ``exit_when_idle``: it ends ``stay_s`` after the queue last had nothing to do (``inf``:
        only when stopped), so a `gtui add` meanwhile still finds a scheduler."""
        await self.start()
        assert self._wake is not None
        idle_since: float | None = None
        log_task = asyncio.create_task(self._watch_logs())
        file_task = asyncio.create_task(self._watch_file())
        try:
            while not self._stopping:
                fresh, self._fresh_pass = self._fresh_pass, False
                interval = self._poll_interval()
                if not fresh or time.monotonic() - self._last_poll >= interval:
                    await self._poll()
                    self._last_poll = time.monotonic()
                    self._schedule()
                    if self._book.deferred and self._deferring is None:
                        self._deferring = asyncio.create_task(self._save_deferred())
                # else: woken by a job's end, which has just read the GPUs and run a pass;
                # another pass now would find the same and take the CPU from the job it started
                # (end to start: 2 ms of 10 on 2 busy cores, benchmarks/end_to_start.py).
                self._publish_gpus()
                wait = self._poll_interval()
                if exit_when_idle and self._idle():
                    self._check_queue_done(lambda: True)  # [notify]'s queue_done, before exit
                    now = time.monotonic()
                    if idle_since is None:
                        idle_since = now
                        if stay_s > 0:
                            self._say_staying(stay_s)
                    left = idle_since + stay_s - now
                    if left <= 0:
                        break
                    wait = min(wait, left)
                else:
                    idle_since = None
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=wait)
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

    def _say_staying(self, stay_s: float) -> None:
        q = self.queue_path.name
        span = f"{stay_s / 60:g} min" if stay_s >= 60 else f"{stay_s:g} s"
        until = (
            f"until `gtui stop {q}`"
            if math.isinf(stay_s)
            else f"until {time.strftime('%H:%M:%S', time.localtime(time.time() + stay_s))}, "
            f"{span} after its last job ended (`gtui stop {q}` ends it sooner)"
        )
        self._bus.notice(
            "info", f"nothing more to run: this scheduler stays for `gtui add {q}` {until}"
        )

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

    async def _save_deferred(self) -> None:
        """The records of jobs that never ran, saved once the first jobs have started, a chunk
        at a time with the loop free in between: at 100,000 jobs one transaction held the loop
        (and the dashboard's first screens) for ~2 s. Shutdown saves whatever is left."""
        try:
            while not self._stopping and self._book.save_deferred(limit=DEFERRED_CHUNK):
                await asyncio.sleep(0)
        finally:
            self._deferring = None

    def _poll_interval(self) -> float:
        poll = self._settings.poll_s
        return min(poll, FAST_POLL_S) if time.monotonic() < self._fast_until else poll

    async def stop(self, *, kill: bool = False) -> None:
        """End the scheduler for a client (``gtui stop``, the control socket's ``stop``): ``run``'s
        loop ends and the engine shuts down, so a headless ``gtui run`` exits and a dashboard's
        engine worker ends. Running jobs go on and the next scheduler re-adopts them; with
        ``kill`` they are killed first (and recorded as killed). Returns before the shutdown:
        the caller (a socket request) gets its answer while the socket still serves."""
        self._dispatch = False  # nothing new starts from here on
        killed: list[str] = []
        if kill and self._started:
            killed = [n for n in self._book.active_names() if self._book.records[n].active]
            if killed:
                with contextlib.suppress(GtuiError):  # told already; what still runs is said
                    await self.kill(killed)
        running = [v.spec.name for v in self.jobs() if v.record.active]
        left = (
            f"{plural(len(running), 'running job')} keep{'s' if len(running) == 1 else ''} "
            f"running ({', '.join(running[:5])}{' ...' if len(running) > 5 else ''}) and "
            f"{'is' if len(running) == 1 else 'are'} re-adopted by the next scheduler"
            if running
            else f"{plural(len(killed), 'running job')} killed"
            if killed
            else "no job was running"
        )
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
            with contextlib.suppress(asyncio.CancelledError):
                await self._deferring
        if self._bg:  # finish what was under way (a timeout's kill, a leftover check)
            await asyncio.wait(list(self._bg), timeout=15.0)
        for handle in self._timeouts.values():
            handle.cancel()
        self._timeouts.clear()
        for task in list(self._watchers.values()):
            task.cancel()
        for task in list(self._watchers.values()):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._watchers.clear()
        # Deliveries under way: `gtui run` waits their deadline out ("queue done" goes out
        # before it exits); a dashboard that quits, a few seconds at most.
        wait = self._settings.notify.timeout_s + 1.0 if self.exits_with_run else QUIT_NOTIFY_S
        await self._notifier.drain(wait)
        self._source.close()
        if self._control is not None:
            with contextlib.suppress(Exception):
                await self._control.close()
            self._control = None
        self._user_rules.close()
        book = self._book
        if book is not None:
            book.save_unsaved()
            book.save_deferred()
            if self._planner is not None:
                self._planner.flush()  # the reasons a pending walk would give are the last
            book.save_reasons()
            if self._scheduler:
                with contextlib.suppress(StoreError):
                    book.store.set_meta("scheduler_stopped", f"{time.time():.3f}")
                if self._backups is not None:
                    self._backups.write()
            if book.unsaved:
                self._bus.notice(
                    "error",
                    f"{len(book.unsaved)} job change(s) could not be saved; the next start "
                    "takes the jobs' ends from their exit-status files",
                )
        with contextlib.suppress(Exception):
            self._publish_claims()  # jobs left running stay claimed; ended ones are dropped
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
        """Nothing runs and nothing more can start without a person (``gtui run`` exits).
        A paused queue keeps its scheduler: `gtui resume` must find someone to resume (issue
        14.16); the user stops it (SIGTERM / Ctrl-C), or resumes it."""
        return not self._paused and self._book.idle(gpus_known=len(self._snapshot.gpus))

    # ------------------------------------------------------------------ queue file
    def _pool(self) -> list[int | None] | None:
        return pool_totals(self._settings, self._snapshot)

    def _take_queue(self, queue: QueueFile, *, initial: bool = False) -> None:
        self._settings = queue.settings
        self._rules = Rules(
            queue.settings,
            off=self._user_rules.off,
            matcher=self._user_rules.search,
            on_overrun=self._user_rules.overran,
        )
        removed, back = self._book.apply(queue, initial=initial)
        for name in removed:
            self._bus.publish(JobRemoved(name))
        if back:
            names = ", ".join(r.name for r in back[:5]) + (" ..." if len(back) > 5 else "")
            self._bus.notice(
                "info",
                f"{names}: back in the queue file, and ended before ({back[0].state.value}"
                f"{', ...' if len(back) > 1 else ''}): not run again; "
                f"`gtui retry {self.queue_path.name} NAME` runs one again",
            )

    async def reload(self) -> None:
        """Read the queue file again now (the control socket's ``reload``, after ``gtui add``)."""
        async with self._file_edits:
            self._reload_if_changed(force=True, edit=True)
        self._schedule()

    def _reload_if_changed(self, *, force: bool = False, edit: bool = False) -> bool:
        """Take a new version of the queue file, if there is one that is complete and valid.

        While an edit of ours is between its write and its take-in (``_file_edits`` held), the
        file holds a job the book has not taken yet: a reload now would take it, and the edit's
        own take-in would take it again. So only the edit itself (``edit``) reads the file
        then; the watcher and the poll look again after it."""
        if self._file_edits.locked() and not edit:
            return False
        took = self._source.check(force=force, on_settled=self._settled, quick=self._one_job)
        if took is None:
            return False
        if isinstance(took, QueueFile):
            self._take_queue(took)
            if self._bus.wants(QueueChanged):
                self._bus.publish(QueueChanged(tuple(self.jobs())))
        self._bus.notice("info", f"reloaded {self.queue_path.name}")
        return True

    def _one_job(self, old: str, new: str) -> str | None:
        """An edit of one job's table taken in alone (``gtui.core.queue.incremental``): at
        100,000 jobs a whole reload took 2.3 s for it. Returns the job's name, or None."""
        from gtui.core.queue.incremental import edited_job

        edited = edited_job(
            self.queue_path, old, new, self._settings, self._book.specs, self._pool()
        )
        if edited is None:
            return None
        spec, warnings = edited
        self._book.replace_spec(spec)
        self._changed(spec.name)
        for warning in warnings:
            self._bus.notice("warning", warning)
        return spec.name

    async def _watch_file(self) -> None:
        """Look at the queue file's stat often (one syscall), so an edit is taken within
        FILE_WATCH_S plus its settle time, not at the next poll (2 s). Only a changed stat
        reads the file; the poll keeps the slower checks (same-second writes)."""
        while not self._stopping:
            await asyncio.sleep(FILE_WATCH_S)
            if not self._stopping and self._source.moved() and self._reload_if_changed():
                self._kick()

    def _settled(self) -> None:
        if not self._stopping:
            self._reload_if_changed()
            self._kick()

    # ------------------------------------------------------------------ recovery
    def _open_store(self) -> Store:
        """The store, checked whole before anything starts: a damaged file is set aside and
        replaced by its backup (gtui.core.state.backup), said in the event log."""
        opened = open_checked(self.paths.db)
        self._backups = Backups(opened.store)
        if opened.rebuilt:
            rest = "the jobs' logs, exit-status files and processes make up the rest"
            self._bus.notice("warning", f"{opened.rebuilt}; {rest}")
        return opened.store

    def _recover(self, ray: bool = False) -> None:
        """Re-adopt jobs still running, record those that ended while gtui was down, and never
        start a job twice (DESIGN.md 5). On this machine the records are first checked against
        the jobs' own traces (a lost or damaged database: gtui.core.sched.recovery)."""
        local = not ray and isinstance(self._executor, LocalExecutor)
        found = recover(
            self._book,
            self._executor,
            self.paths.log_dir(self._settings.log_dir),
            run_dir=self.paths.run_dir if local else None,
        )
        for name, handle in found.adopt:
            self._adopt(name, handle)
        for name, status in found.ended:
            self._finish(name, status, recovered=True)
        words = rebuilt_words(self._book, found.rebuilt)
        if words:
            self._bus.notice("warning", words)
            if self._backups is not None:
                self._backups.write()  # what was rebuilt is not lost again

    # ------------------------------------------------------------------ GPUs and logs
    async def _poll(self) -> None:
        self._book.save_unsaved()
        if time.monotonic() - self._book.reasons_saved >= REASON_SAVE_S:
            self._book.save_reasons()
        self._reload_if_changed()
        backups = self._backups
        if self._scheduler and backups is not None and backups.due():

            async def back_up() -> None:  # a copy of the whole file: not on the loop
                await off_loop(backups.write)

            self._spawn(back_up())
        assert self._reader is not None
        if await self._reader.read(self._usage()):
            self._match_processes()
        self._read_claims()  # other users' gtui claims (occupancy; DESIGN.md 4.1)

    # ------------------------------------------------------------------ scheduling
    def _schedule(self) -> None:
        """One placement pass: block what can never run, start what can, explain the rest."""
        if not self._started or self._stopping or self._planner is None:
            return
        self._planner.block_dependents()
        decision = self._decide()  # counts neighbours' claims (occupancy)
        starts = decision.starts if self._dispatch and not self._book.unsaved else ()
        with self._claiming(starts) as claims_changed:  # the claims board locked, read again
            if claims_changed:
                decision = self._decide()
                starts = decision.starts
            for start in starts:
                self._start_job(start.name, start.gpus)
        self._planner.explain(decision)

    def _kick(self) -> None:
        self._schedule()
        if self._wake is not None:
            self._wake.set()

    def _arm_retry(self, name: str, delay: float) -> None:
        """At the end of a back-off, make the job a candidate again and run a pass."""

        def due() -> None:
            if self._planner is not None:
                self._planner.forget(name)
            self._kick()

        asyncio.get_running_loop().call_later(max(0.0, delay), due)

    def _after_failure(self, rec: Any) -> None:
        if self._settings.on_failure == "pause" and not self._paused:
            self._set_paused(True)
            self._bus.notice("warning", f"{rec.name} failed: queue paused (on_failure)")
