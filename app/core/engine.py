"""The scheduler engine: an asyncio loop that owns the jobs and their states.

It runs a placement pass (``gtui.core.policy.place``) whenever a job ends, the queue changes, or
``poll`` elapses; starts jobs through ``gtui.core.runner``; commits every transition to the state
store before publishing it as an event (``gtui.core.api``) to whoever subscribed: the headless
event log, the control socket, the dashboard. It never imports a UI.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import psutil

from gtui.core import runner
from gtui.core.api import (
    Event,
    EventSink,
    GpusRead,
    JobChanged,
    JobRemoved,
    JobView,
    LogGrew,
    Notice,
    QueueChanged,
    QueuePaused,
    WaitingSummary,
    freeze,
)
from gtui.core.diagnose import diagnose, full_disk, oom_peak_mib, oom_retry_mem, read_log_tail
from gtui.core.errors import GtuiError, LockedError
from gtui.core.gpus.backend import open_backend
from gtui.core.gpus.snapshot import GpuBackend, GpuSnapshot, JobUsage
from gtui.core.model import (
    FINAL_STATES,
    Diagnosis,
    DiagnosisRule,
    JobRecord,
    JobSpec,
    JobState,
    Settings,
)
from gtui.core.paths import QueuePaths, ensure_private_dir, queue_paths, register_queue
from gtui.core.placeholders import placeholders_used, substitute
from gtui.core.policy import Allocation, Candidate, format_wait, place
from gtui.core.queuefile import (
    QueueFile,
    check_trusted,
    derive_name,
    isolated,
    load_queue,
    read_queue_text,
)
from gtui.core.queuewatch import (
    SETTLE_S,
    Empty,
    Missing,
    QueueWatch,
    Settling,
    Unchanged,
    Unreadable,
)
from gtui.core.rulematch import PatternWorker, WorkerFailed
from gtui.core.status import ended_at, status_dict, unknown_diagnosis
from gtui.core.store import Store, StoreError

# On a job that runs with isolate = false: the incident of seed 004 starts this way.
UNISOLATED_WARNING = "runs unisolated (isolate = false): no CUDA_VISIBLE_DEVICES, it sees every GPU"
QUICK_RUN_S = 60.0  # a failed run shorter than this counts toward the retry back-off
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 300.0
REASON_SAVE_S = 30.0  # waiting reasons are saved at most this often (and at shutdown)
LEFTOVER_BATCH_S = 0.1  # job ends this close together share one scan for leftovers
LOG_WATCH_S = 0.5  # how often running jobs' logs are checked for growth
FAST_POLL_S = 0.2  # after a job ends on real GPUs, poll this often ...
FAST_POLL_FOR_S = 1.0  # ... for this long, while the driver releases its memory
NVML_WAIT_S = 2.0  # a GPU read that takes longer: schedule on the last one meanwhile
BAD_STATES_FOR_AFTER = frozenset(
    {JobState.FAILED, JobState.KILLED, JobState.BLOCKED, JobState.UNKNOWN}
)

# Fault injection for the crash tests: GTUI_CRASH_AT="point:n" makes the scheduler SIGKILL itself
# the n-th time it reaches ``point`` (after_intent, after_launch, after_exit, after_finish).
_CRASH_AT = os.environ.get("GTUI_CRASH_AT", "")
_crash_counts: dict[str, int] = {}


def _crash_point(point: str) -> None:
    if not _CRASH_AT:
        return
    where, _, nth = _CRASH_AT.partition(":")
    if where != point:
        return
    _crash_counts[point] = _crash_counts.get(point, 0) + 1
    if _crash_counts[point] == int(nth or 1):
        os.kill(os.getpid(), 9)


def pool_totals(settings: Settings, snapshot: GpuSnapshot) -> list[int | None] | None:
    """Total memory of each GPU in the pool, for the queue file's pool checks (None: unknown)."""
    if not snapshot.gpus:
        return None
    by_index = snapshot.by_index()
    indices = sorted(by_index) if settings.gpus == "all" else list(settings.gpus)
    return [
        by_index[i].mem_total_mib if i in by_index else None
        for i in indices
        if i not in settings.exclude
    ]


class Engine:
    """Owns one queue: its jobs, their processes, the store, the lock and the control socket."""

    def __init__(
        self,
        queue_path: Path | str,
        *,
        fake_gpus: str | None = None,
        backend: GpuBackend | None = None,
        control: bool = True,
        dispatch: bool = True,
    ) -> None:
        self.paths: QueuePaths = queue_paths(queue_path)
        self.queue_path: Path = self.paths.queue
        self._fake_opt = fake_gpus
        self._backend: GpuBackend | None = backend
        self._control_wanted = control
        # dispatch=False: an engine that only applies commands (gtui kill/pause/... when no
        # scheduler runs): it starts nothing.
        self._dispatch = dispatch
        self._scheduler = dispatch  # a scheduler (not the no-scheduler CLI's engine)
        self._queue: QueueFile | None = None
        self._settings = Settings()
        self._specs: dict[str, JobSpec] = {}
        self._order: list[str] = []
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._records: dict[str, JobRecord] = {}
        self._launched: dict[str, runner.Launched] = {}
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._timeouts: dict[str, asyncio.TimerHandle] = {}
        self._killing: set[str] = set()
        self._timed_out: set[str] = set()
        # Users' [[diagnose]] patterns run in a worker killed at a deadline; a rule that ran
        # over is off until this scheduler ends (issue 14.17).
        self._pattern_worker = PatternWorker()
        self._rules_off: set[DiagnosisRule] = set()
        self._pattern_worker_failed = False
        self._sinks: list[EventSink] = []
        self._store: Store | None = None
        self._lock: Any = None
        self._control: Any = None
        self._paused = False
        self._snapshot = GpuSnapshot(gpus=(), taken_at=0.0, source="none")
        self._gpus: GpusRead | None = None
        self._started = False
        self._stopping = False
        self._wake: asyncio.Event | None = None
        self._queue_watch = QueueWatch(self.queue_path)
        self._queue_error: str | None = None  # what is wrong with the file now, said once
        self._queue_problem: str | None = None  # ... and how it was said
        self._recheck: asyncio.TimerHandle | None = None  # a settling file's next look
        # Records of ended jobs the file no longer names: kept as history, so a job put back
        # (or a file that was empty for a moment) never runs a finished job again.
        self._retired: dict[str, JobRecord] = {}
        self._edits: dict[str, str] = {}  # running job -> the held job that is its edit
        self._started_at: float | None = None
        # Waiting reasons change at every pass and are not worth a commit each; they are saved
        # at most every REASON_SAVE_S and at shutdown, so `gtui status` with no scheduler
        # shows each waiting job's last reason and its age.
        self._reasons_dirty: set[str] = set()
        self._reasons_saved = 0.0
        self._log_sizes: dict[str, int] = {}
        self._summary = ""
        self._observed: dict[str, dict[int, int]] = {}
        self._bg: set[asyncio.Task[Any]] = set()
        self._last_gpu_meta = ""
        self._last_decision: Any = None
        self._pending_specs: dict[str, JobSpec] = {}
        self._unsaved: dict[str, JobRecord] = {}  # changes the store refused (locked, full)
        self._store_error: str | None = None
        self._lost_gpus: dict[int, str] = {}  # GPU index -> why it is lost, as last told
        self._nvml_read: asyncio.Future[GpuSnapshot] | None = None  # a read in flight
        self._nvml_slow = False
        self._fresh_pass = False  # a job's end just read the GPUs and ran a pass (see run)
        self._leftover_pending: dict[str, str] = {}  # job -> token: see _check_leftovers_soon
        self._leftover_checking = False
        self._version = 0  # bumped by every commit and queue change: see _active_names
        self._active_at = -1
        self._active: list[str] = []
        self._cands_at = -1
        self._cands_list: list[Candidate] = []
        self._cands_names: set[str] = set()
        self._blocked_at = -1
        self._said: tuple[int, Mapping[str, str]] = (-1, {})  # (version, reasons) last published
        self._last_poll = 0.0  # monotonic time of the loop's last GPU read and pass
        # name -> (spec, mem, queued_since, state, Candidate): see _decide
        self._candidates: dict[
            str, tuple[JobSpec, int | None, float, JobState, Candidate, float | None]
        ] = {}
        self._fast_until = 0.0

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
        return self._snapshot.source == "fake" or (
            self._backend is not None and self._backend.source == "fake"
        )

    @property
    def started(self) -> bool:
        return self._started

    def jobs(self) -> list[JobView]:
        return [self._view(n, i) for i, n in enumerate(self._all_names())]

    def view(self, name: str) -> JobView:
        self._require(name)
        return self._view(name, self._index_of(name))

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in JobState}
        for name in self._all_names():
            out[self._records[name].state.value] += 1
        return out

    def log_path(self, name: str) -> Path | None:
        self._require(name)
        log = self._records[name].log
        return Path(log) if log else None

    def status_json(self) -> dict[str, Any]:
        gpus = [g.to_json() for g in self._snapshot.gpus]
        scheduler = {"running": self._scheduler, "pid": os.getpid(), "since": self._started_at}
        doc = status_dict(self.queue_path, self._paused, gpus, self.jobs(), scheduler)
        # What is wrong right now, in words: a full disk, a broken queue file.
        problems = []
        if self._unsaved and self._store_error:
            problems.append(
                f"cannot save the job states ({len(self._unsaved)} change(s) waiting): "
                f"{self._store_error}; no job starts until they are saved"
            )
        if self._queue_error and self._queue_problem:
            problems.append(self._queue_problem)
        doc["problems"] = problems
        return doc

    # ------------------------------------------------------------------ subscription
    def subscribe(self, sink: EventSink) -> Callable[[], None]:
        self._sinks.append(sink)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self._sinks.remove(sink)

        return unsubscribe

    def _publish(self, event: Event) -> None:
        for sink in list(self._sinks):
            try:
                sink(event)
            except Exception as e:  # a broken front end must not stop the scheduler
                if not isinstance(event, Notice):
                    self._publish(Notice("error", f"an event subscriber failed: {e!r}"))

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Load the queue, take the lock, open the store, re-adopt running jobs."""
        if self._started:
            return
        self._wake = asyncio.Event()
        check_trusted(self.queue_path)  # no one else may make gtui run a command
        text = read_queue_text(self.queue_path)
        queue = load_queue(self.queue_path, text=text)
        from gtui.core.lock import QueueLock

        ensure_private_dir(self.paths.state_dir)
        # The queue's identity, not its file name, keys the lock: after `mv q.toml q2.toml`,
        # `gtui run q2.toml` meets the scheduler that runs q.toml.
        self.paths = register_queue(self.paths)
        lock = QueueLock(self.paths)
        lock.acquire()
        self._lock = lock
        try:
            self._refuse_if_socket_owned()
            if self._backend is None:
                spec = self._fake_opt or queue.settings.fake_gpus
                self._backend = open_backend(spec, self.queue_path.parent)
            snapshot = self._backend.read(())
            queue = load_queue(
                self.queue_path, pool=pool_totals(queue.settings, snapshot), text=text
            )
            self._store = Store(self.paths.db)
            self._paused = self._store.get_meta("paused") == "1"
            self._store.set_meta("scheduler_pid", str(os.getpid()))
            self._apply_queue(queue, initial=True)
            self._queue_watch.taken(self._queue_watch.digest_of(text))
            self._snapshot = snapshot
            self._recover()
            now = time.time()
            for name, rec in self._records.items():  # back-offs under way when it stopped
                if rec.waiting and rec.retry_at is not None and rec.retry_at > now:
                    self._arm_retry(name, rec.retry_at - now)
            if self._control_wanted:
                await self._start_control()
        except BaseException:
            self._release()
            raise
        self._started = True
        self._started_at = time.time()
        if self._scheduler and self._store is not None:
            self._store.set_meta("scheduler_since", f"{self._started_at:.3f}")
        self._publish(QueueChanged(tuple(self.jobs())))
        self._publish(QueuePaused(self._paused))
        if self._snapshot.error:
            self._publish(Notice("warning", self._snapshot.error))

    def _refuse_if_socket_owned(self) -> None:
        """Another live gtui may serve this queue without holding the lock we just took (its
        ``.gtui/`` was deleted under it): then this one must not run the queue a second time."""
        if not self._control_wanted:
            return
        try:
            from gtui.core.control import answering_pid
        except ImportError:
            return
        pid = answering_pid(self.paths.socket)
        if pid is not None and pid != os.getpid():
            raise LockedError(
                f"another gtui (pid {pid}) already runs this queue: {self.queue_path}\n"
                f"its state directory was replaced under it; stop it first (`kill {pid}`)"
            )

    async def _start_control(self) -> None:
        try:
            from gtui.core.control import ControlServer
        except ImportError:
            return
        server = ControlServer()
        try:
            await server.start(self)
        except GtuiError as e:
            self._publish(Notice("warning", f"control socket unavailable: {e}"))
            return
        self._control = server

    async def run(self, *, exit_when_idle: bool = False) -> int:
        """The scheduling loop. Returns 0 if every job is done, else 1 (DESIGN.md 2)."""
        await self.start()
        assert self._wake is not None
        log_task = asyncio.create_task(self._watch_logs())
        try:
            while not self._stopping:
                fresh, self._fresh_pass = self._fresh_pass, False
                interval = self._settings.poll_s
                if time.monotonic() < self._fast_until:
                    interval = min(interval, FAST_POLL_S)
                if not fresh or time.monotonic() - self._last_poll >= interval:
                    await self._poll()
                    self._last_poll = time.monotonic()
                    self._schedule()
                # else: woken by a job's end, which has just read the GPUs and run a pass;
                # another pass now would find the same and take the CPU from the job it started
                # (end to start: 2 ms of 10 on 2 busy cores, benchmarks/end_to_start.py).
                self._publish_gpus()
                if exit_when_idle and self._idle():
                    break
                poll = self._settings.poll_s
                if time.monotonic() < self._fast_until:
                    poll = min(poll, FAST_POLL_S)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=poll)
                self._wake.clear()
        finally:
            log_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await log_task
        if exit_when_idle:
            await self.shutdown()
        return 0 if all(self._records[n].state == JobState.DONE for n in self._order) else 1

    async def shutdown(self, *, kill_jobs: bool = False) -> None:
        """Stop scheduling and release the queue; running jobs go on unless ``kill_jobs``."""
        self._dispatch = False  # nothing new starts from here on
        if kill_jobs and self._started:
            # Kill while the watchers still record the ends: the jobs are stored as killed.
            active = [n for n in self._all_names() if self._records[n].active]
            if active:
                await self.kill(active)
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
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
        if self._control is not None:
            with contextlib.suppress(Exception):
                await self._control.close()
            self._control = None
        self._pattern_worker.close()
        self._save_unsaved()
        self._save_reasons()
        if self._scheduler and self._store is not None:
            with contextlib.suppress(StoreError):
                self._store.set_meta("scheduler_stopped", f"{time.time():.3f}")
        if self._unsaved:
            self._publish(
                Notice(
                    "error",
                    f"{len(self._unsaved)} job change(s) could not be saved; the next start "
                    "takes the jobs' ends from their exit-status files",
                )
            )
        self._release()

    def _release(self) -> None:
        if self._store is not None:
            with contextlib.suppress(Exception):
                self._store.close()
            self._store = None
        if self._lock is not None:
            with contextlib.suppress(Exception):
                self._lock.release()
            self._lock = None
        if self._backend is not None and (self._nvml_read is None or self._nvml_read.done()):
            with contextlib.suppress(Exception):
                self._backend.close()  # (not while a read hangs in NVML: it holds the backend)

    def _idle(self) -> bool:
        """Nothing runs and nothing more can start without a person (``gtui run`` exits)."""
        if self._unsaved:
            return False  # exit only once every end is saved (a full disk: until space frees)
        if self._active_names():
            return False
        if self._paused:
            # A paused queue keeps its scheduler: `gtui resume` must find someone to resume
            # (issue 14.16). The user stops it (SIGTERM / Ctrl-C), or resumes it.
            return False
        gpus_known = len(self._snapshot.gpus)  # lost GPUs count: they may come back
        for name in self._order:
            rec = self._records[name]
            if rec.state != JobState.QUEUED or self._waits_on_held(name, set()):
                continue
            if self._specs[name].gpus > gpus_known:
                continue  # can never run here (e.g. GPU jobs on a machine without GPUs)
            return False
        return True

    def _waits_on_held(self, name: str, seen: set[str]) -> bool:
        """True if ``name`` can never start without a person: it waits on a held job."""
        if name in seen:
            return False
        seen.add(name)
        for dep in self._specs[name].after:
            rec = self._records.get(dep)
            if rec is None:
                continue
            if rec.state == JobState.HELD or self._waits_on_held(dep, seen):
                return True
        return False

    # ------------------------------------------------------------------ queue file
    def _apply_queue(self, queue: QueueFile, *, initial: bool = False) -> None:
        """Take a newly loaded queue: new jobs join, changed waiting jobs change, removed
        waiting jobs leave; running jobs are never touched."""
        assert self._store is not None
        self._queue = queue
        self._settings = queue.settings
        new_specs = {j.name: j for j in queue.jobs}
        stored = self._store.load() if initial else self._records
        records: dict[str, JobRecord] = {}
        changed: list[JobRecord] = []
        back: list[JobRecord] = []  # ended jobs the file names again
        for spec in queue.jobs:
            rec = stored.get(spec.name)
            if rec is None and not initial:
                rec = self._retired.pop(spec.name, None)
                if rec is not None and rec.final:
                    back.append(rec)
            if rec is None:
                rec = JobRecord(name=spec.name, mem_mib=spec.mem_mib)
                changed.append(rec)
            elif rec.waiting and not initial:
                old = self._specs.get(spec.name)
                if old is not None and old.mem_mib != spec.mem_mib:
                    rec.mem_mib = spec.mem_mib
                    changed.append(rec)
            records[spec.name] = rec
        removed: list[str] = []
        for name, rec in stored.items():
            if name in new_specs:
                continue
            if rec.active:
                # Still running: keep following it until it ends, then it leaves.
                records[name] = rec
                new_specs[name] = self._specs.get(name) or JobSpec(
                    name=name,
                    cmd="(removed from the queue file)",
                    gpus=len(rec.gpus),
                    mem_mib=rec.mem_mib,
                )
            else:
                # Retired, never deleted: its history stays in the store (issue 14.2).
                self._retired[name] = rec
                if not initial:
                    removed.append(name)
        # A running job keeps the spec it was started with; an edit applies to its next attempt.
        self._pending_specs = {}
        for name, rec in records.items():
            old = self._specs.get(name)
            if rec.active and old is not None and new_specs.get(name) != old:
                self._pending_specs[name] = new_specs[name]
                new_specs[name] = old
        self._specs = new_specs
        self._order = [j.name for j in queue.jobs]
        self._records = records
        in_file = set(self._order)
        self._names = self._order + [n for n in records if n not in in_file]
        self._index = {n: i for i, n in enumerate(self._order)}
        self._version += 1
        if initial:  # links made by an earlier scheduler (after_edit_of is saved)
            self._edits = {r.after_edit_of: n for n, r in records.items() if r.after_edit_of}
        else:
            self._link_edits_of_running_jobs(changed)
        if changed:
            self._store.save_many(changed)
        for name in removed:
            self._publish(JobRemoved(name))
        if back:
            names = ", ".join(r.name for r in back[:5]) + (" ..." if len(back) > 5 else "")
            self._publish(
                Notice(
                    "info",
                    f"{names}: back in the queue file, and ended before ({back[0].state.value}"
                    f"{', ...' if len(back) > 1 else ''}): not run again; "
                    f"`gtui retry {self.queue_path.name} NAME` runs one again",
                )
            )

    def _link_edits_of_running_jobs(self, new: list[JobRecord]) -> None:
        """A job with no ``name`` is named after its command, so editing a running one's command
        looks like a new job beside it. Find those (same ``[[jobs]]`` entry, both names derived)
        and hold the new one until the old run ends: never a second copy (issue 14.5)."""
        running_gone = {
            self._specs[n].entry: n
            for n, r in self._records.items()
            if r.active and n not in self._index and _derived(self._specs[n])
        }
        if not running_gone:
            return
        for rec in new:
            spec = self._specs.get(rec.name)
            if spec is None or not _derived(spec) or rec.state != JobState.QUEUED:
                continue
            old = running_gone.pop(spec.entry, None)
            if old is None:
                continue
            rec.state = JobState.HELD
            rec.after_edit_of = old
            self._edits[old] = rec.name
            rec.reason = (
                f"edit of {old}, which is still running: applies from its next attempt "
                "(runs if that one fails; done if it succeeds)"
            )
            rec.reason_at = time.time()

    def _take_over_from_edit(self, old: JobRecord) -> None:
        """``old`` ended: the job that is its edit goes on from there (a dict lookup: this is
        on every job's end)."""
        name = self._edits.pop(old.name, None)
        rec = self._records.get(name) if name is not None else None
        if rec is not None and rec.after_edit_of == old.name and rec.state == JobState.HELD:
            rec.after_edit_of = None
            if old.state in (JobState.QUEUED, JobState.HELD):
                old.state = JobState.FAILED  # its retry is the edit's first run
                self._commit(old)
            if old.state == JobState.DONE:
                rec.state = JobState.DONE
                rec.ended_at = old.ended_at
                rec.warnings = [f"done as {old.name}, before its command was edited"]
            else:
                rec.state = JobState.QUEUED
                rec.queued_since = time.time()
            rec.reason = ""
            self._commit(rec)
            self._publish(JobChanged(self._view(rec.name)))

    async def reload(self) -> None:
        """Read the queue file again now (the control socket's ``reload``, after ``gtui add``)."""
        self._reload_if_changed(force=True)
        self._schedule()

    def _reload_if_changed(self, *, force: bool = False) -> None:
        """Take a new version of the queue file, if there is one that is complete and valid.

        Nothing the file does can delete a record or stop the scheduler: a missing, empty,
        unreadable or broken file is said once and ignored, and the last good queue runs on.
        """
        change = self._queue_watch.check(force=force)
        if isinstance(change, Unchanged):
            return
        if isinstance(change, Settling):
            self._recheck_soon()
            return
        if isinstance(change, Missing):
            self._say_once(
                "missing",
                f"{self.queue_path} is gone; gtui keeps running the last good version of the "
                "queue (save the file again to change it)",
            )
            return
        if isinstance(change, Empty):
            self._say_once(
                "empty",
                f"{self.queue_path.name} is empty: ignored, the last good version of the queue "
                "runs on and no job's record is touched (a program writing the file may not be "
                "done; save it again to change the queue)",
            )
            return
        if isinstance(change, Unreadable):
            self._say_once(str(change.error), f"queue file ignored: {change.error}")
            return
        try:
            check_trusted(self.queue_path)
            queue = load_queue(
                self.queue_path,
                pool=pool_totals(self._settings, self._snapshot),
                text=change.text,
            )
        except GtuiError as e:
            self._queue_watch.taken(change.digest)  # judged: not read again until it changes
            self._say_once(str(e), f"queue file not reloaded, last good version kept: {e}")
            return
        self._queue_watch.taken(change.digest)
        self._queue_error = None
        self._apply_queue(queue)
        self._publish(QueueChanged(tuple(self.jobs())))
        self._publish(Notice("info", f"reloaded {self.queue_path.name}"))

    def _say_once(self, key: str, text: str) -> None:
        """Tell the user what is wrong with the queue file, once per distinct problem."""
        self._queue_problem = text
        if self._queue_error != key:
            self._queue_error = key
            self._publish(Notice("error", text))

    def _recheck_soon(self) -> None:
        """Look at a file that is still being written again once it had time to settle."""
        if self._recheck is not None or self._stopping:
            return

        def again() -> None:
            self._recheck = None
            if not self._stopping:
                self._reload_if_changed()
                self._kick()

        self._recheck = asyncio.get_running_loop().call_later(SETTLE_S, again)

    # ------------------------------------------------------------------ recovery
    def _recover(self) -> None:
        """Re-adopt jobs still running, record those that ended while gtui was down, and never
        start a job twice (DESIGN.md 5)."""
        for name in self._all_names():
            rec = self._records[name]
            if not rec.active:
                continue
            if rec.pid is None:
                self._recover_unlaunched(rec)
                continue
            launched = self._launched_from(rec)
            if rec.create_time is not None and runner.is_alive(rec.pid, rec.create_time):
                self._adopt(name, launched)
                continue
            status = runner.read_status_file(Path(rec.status_file)) if rec.status_file else None
            self._finish(name, status or runner.ExitStatus(None, None), recovered=True)

    def _recover_unlaunched(self, rec: JobRecord) -> None:
        """The scheduler died between committing a start and recording the pid."""
        proc = self._find_by_token(rec.token) if rec.token else None
        if proc is not None:
            rec.pid = proc.pid
            rec.create_time = proc.create_time()
            rec.log = self._find_log(rec)
            self._commit(rec)
            self._adopt(rec.name, self._launched_from(rec))
            return
        status_file = Path(rec.status_file) if rec.status_file else None
        status = runner.read_status_file(status_file) if status_file else None
        if status is not None:
            # It ran and ended while gtui was down.
            rec.log = self._find_log(rec)
            self._finish(rec.name, status, recovered=True)
            return
        # It never started (a crash between the intent and the exec, even after its empty log
        # was created): back to the queue, the attempt not counted.
        rec.state = JobState.QUEUED
        rec.attempt = max(0, rec.attempt - 1)
        rec.token = None
        self._commit(rec)

    def _find_log(self, rec: JobRecord) -> str | None:
        """The newest log of the record's attempt (its path was not committed before a crash)."""
        log_dir = self.paths.log_dir(self._settings.log_dir)
        base = f"{runner.safe_name(rec.name)}.{rec.attempt}"
        logs = [p for p in log_dir.glob(f"{base}*.log") if p.name.startswith(base + ".")]
        return str(max(logs, key=lambda p: p.stat().st_mtime)) if logs else None

    @staticmethod
    def _find_by_token(token: str | None) -> psutil.Process | None:
        if not token:
            return None
        me = os.getuid()
        for proc in psutil.process_iter(["uids"]):
            try:
                if proc.info["uids"] is None or proc.info["uids"].real != me:
                    continue
                if proc.environ().get("GTUI_TOKEN") != token:
                    continue
            except (psutil.Error, OSError):
                continue
            # Its children inherit the token too: walk up to the wrapper, the outermost one. A
            # parent we may not read (pid 1 after the reparenting, in some sandboxes) is not it:
            # that error once made a crashed start look never-started, and it ran twice.
            while True:
                try:
                    parent = proc.parent()
                    if parent is None or parent.environ().get("GTUI_TOKEN") != token:
                        return proc
                except (psutil.Error, OSError):
                    return proc
                proc = parent
        return None

    def _launched_from(self, rec: JobRecord) -> runner.Launched:
        return runner.Launched(
            pid=int(rec.pid or 0),
            create_time=float(rec.create_time or 0.0),
            log_path=Path(rec.log or os.devnull),
            status_path=Path(rec.status_file or os.devnull),
        )

    def _adopt(self, name: str, launched: runner.Launched) -> None:
        self._launched[name] = launched
        self._watchers[name] = asyncio.create_task(self._watch(name, launched))
        self._arm_timeout(name)

    # ------------------------------------------------------------------ polling
    async def _poll(self) -> None:
        self._save_unsaved()
        if time.monotonic() - self._reasons_saved >= REASON_SAVE_S:
            self._save_reasons()
        self._reload_if_changed()
        await self._read_gpus()

    async def _read_gpus(self) -> None:
        assert self._backend is not None
        usage = self._usage()
        if self._backend.source == "nvml":
            read = await self._read_nvml(usage)
            if read is None:
                return  # NVML is slow to answer: keep the last reading meanwhile
            snapshot = read
        else:
            snapshot = self._backend.read(usage)
        self._take_snapshot(snapshot)
        self._match_processes()

    def _take_snapshot(self, snapshot: GpuSnapshot) -> None:
        """Keep a new GPU reading and tell what is new in it. Every reading comes through here
        (a poll's, a job end's): one kept silently would make the next, with the same error,
        look old, and the error would never be told."""
        previous_error = self._snapshot.error
        self._snapshot = snapshot
        if snapshot.error and snapshot.error != previous_error:
            self._publish(Notice("warning", snapshot.error))
        # Tell once when a GPU is lost (or why changes) and once when it is back, not every poll;
        # NVML down as a whole was told just above.
        lost = {g.index: g.error or "" for g in snapshot.gpus if g.lost}
        for index, why in lost.items():
            if self._lost_gpus.get(index) != why and why != snapshot.error:
                self._publish(Notice("error", f"GPU {index} is lost: {why}"))
        for index in sorted(self._lost_gpus.keys() - lost.keys()):
            self._publish(Notice("info", f"GPU {index} answers again"))
        self._lost_gpus = lost

    async def _read_nvml(self, usage: list[JobUsage]) -> GpuSnapshot | None:
        """Read NVML in a thread, waiting at most NVML_WAIT_S (nothing, once it is known to be
        slow): a driver call can hang for tens of seconds (a GPU falling off the bus), and jobs
        must keep starting meanwhile. The last reading stays safe to schedule on: jobs started
        since count by their declared memory, and a job that ended still counts as using its.
        None: no new reading yet. A daemon thread, so a wedged driver cannot hold up exit."""
        assert self._backend is not None
        if self._nvml_read is None:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[GpuSnapshot] = loop.create_future()
            backend = self._backend

            def work() -> None:
                snapshot = backend.read(usage)

                def deliver() -> None:
                    if not future.done():
                        future.set_result(snapshot)

                with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
                    loop.call_soon_threadsafe(deliver)

            threading.Thread(target=work, name="gtui-nvml", daemon=True).start()
            self._nvml_read = future
        read = self._nvml_read
        await asyncio.wait({read}, timeout=0 if self._nvml_slow else NVML_WAIT_S)
        if not read.done():
            if not self._nvml_slow:
                self._nvml_slow = True
                self._publish(
                    Notice(
                        "warning",
                        f"NVML has not answered for {NVML_WAIT_S:g}s (a GPU or the driver may be "
                        "failing); jobs keep starting on the last GPU reading until it does",
                    )
                )
            return None
        self._nvml_read = None
        if self._nvml_slow:
            self._nvml_slow = False
            self._publish(Notice("info", "NVML answers again"))
        return read.result()

    def _usage(self) -> list[JobUsage]:
        out = []
        for name in self._active_names():
            rec = self._records[name]
            if rec.active and rec.pid and rec.gpus:
                out.append(
                    JobUsage(
                        pid=rec.pid,
                        gpus=rec.gpus,
                        mem_mib=rec.mem_mib,
                        suspended=rec.state == JobState.SUSPENDED,
                    )
                )
        return out

    def _match_processes(self) -> None:
        """Match GPU processes to our jobs through their process trees (DESIGN.md 8): memory
        observed per job and GPU, peaks, and the isolation check of 4.4."""
        self._observed = {}
        on_gpu: dict[int, list[tuple[int, int | None]]] = {}
        for gpu in self._snapshot.gpus:
            for p in gpu.processes:
                on_gpu.setdefault(p.pid, []).append((gpu.index, p.mem_mib))
        if not on_gpu:
            return
        active = [self._records[n] for n in self._active_names() if self._records[n].active]
        roots = {rec.pid for rec in active if rec.pid}
        # Walk process trees (psutil, costly) only when some GPU process is not a job's root.
        need_trees = any(pid not in roots for pid in on_gpu)
        for rec in active:
            name = rec.name
            if not rec.pid:
                continue
            tree = runner.process_tree(rec.pid) if need_trees else {rec.pid}
            observed: dict[int, int] = {}
            for pid in tree:
                for index, mem in on_gpu.get(pid, ()):
                    observed[index] = observed.get(index, 0) + (mem or 0)
                    if index not in rec.gpus:
                        warning = (
                            f"process {pid} runs on GPU {index}, which is not assigned to it "
                            f"(assigned: {','.join(map(str, rec.gpus)) or 'none'})"
                        )
                        if warning not in rec.warnings:
                            rec.warnings.append(warning)
                            self._commit(rec)
                            self._publish(JobChanged(self._view(name)))
            self._observed[name] = observed
            peak = max(observed.values(), default=0)
            if peak and (rec.peak_mib or 0) < peak:
                rec.peak_mib = peak

    def _publish_gpus(self) -> None:
        ours: dict[int, list[str]] = {}
        ours_mib: dict[int, int] = {}
        for name in self._active_names():
            rec = self._records[name]
            if not rec.active:
                continue
            for index in rec.gpus:
                ours.setdefault(index, []).append(name)
                seen = self._observed.get(name, {}).get(index, 0)
                declared = rec.mem_mib if rec.mem_mib is not None else seen
                ours_mib[index] = ours_mib.get(index, 0) + max(seen, declared or 0)
        decision = self._last_decision
        if decision is None:
            return
        self._gpus = GpusRead(
            snapshot=self._snapshot,
            ours={k: tuple(v) for k, v in ours.items()},
            ours_mib=ours_mib,
            available_mib=dict(decision.available_mib),
            reserved=tuple(getattr(decision, "reserved", ())),
        )
        self._publish(self._gpus)
        if self._store is not None:
            import json

            text = json.dumps([g.to_json() for g in self._snapshot.gpus])
            if text != self._last_gpu_meta:
                self._last_gpu_meta = text
                with contextlib.suppress(Exception):
                    self._store.set_meta("gpus", text)

    async def _watch_logs(self) -> None:
        while True:
            await asyncio.sleep(LOG_WATCH_S)
            for name in self._active_names():
                rec = self._records[name]
                if not rec.active or not rec.log:
                    continue
                try:
                    size = os.stat(rec.log).st_size
                except OSError:
                    continue
                if self._log_sizes.get(name) != size:
                    self._log_sizes[name] = size
                    self._publish(LogGrew(name, rec.log, size))

    # ------------------------------------------------------------------ scheduling
    def _decide(self, now: float) -> Any:
        """The policy's inputs from the jobs, then one pass. It runs at every job end, so it
        reuses each waiting job's Candidate while nothing it holds changed (building 2,000 of
        them was half of a pass: benchmarks/throughput.py), and hands the policy a view of the
        states instead of a copy."""
        allocations = []
        running = 0
        records, specs = self._records, self._specs
        candidates = self._waiting_candidates(records, specs)
        for name in self._active_names():
            rec = records[name]
            if rec.active:
                running += 1
                if rec.gpus:
                    allocations.append(
                        Allocation(
                            name=name,
                            gpus=rec.gpus,
                            mem_mib=rec.mem_mib,
                            observed_mib=self._observed.get(name, {}),
                        )
                    )
        return place(
            self._snapshot,
            candidates,
            allocations,
            self._settings,
            dep_states=_StateView(records),
            running_count=running,
            now=now,
            queue_paused=self._paused,
        )

    def _waiting_candidates(
        self, records: dict[str, JobRecord], specs: dict[str, JobSpec]
    ) -> list[Candidate]:
        """The waiting jobs as the policy takes them, in queue order. The list is kept until
        the next commit or queue change (nothing a Candidate holds changes without one); each
        Candidate is kept while its job's spec, memory, state and place are the same."""
        if self._cands_at == self._version:
            return self._cands_list
        candidates = []
        cache = self._candidates
        queued, held = JobState.QUEUED, JobState.HELD
        now = time.time()
        for index, name in enumerate(self._order):
            rec = records[name]
            state = rec.state
            if state is not queued and state is not held:
                continue
            spec = specs[name]
            hit = cache.get(name)
            if (
                hit is not None
                and hit[0] is spec
                and hit[1] == rec.mem_mib
                and hit[2] == rec.queued_since
                and hit[3] is state
                and hit[4].order == index
                and hit[5] == rec.retry_at
            ):
                candidates.append(hit[4])
                continue
            cand = Candidate(
                name=name,
                gpus=spec.gpus,
                mem_mib=rec.mem_mib,
                priority=spec.priority,
                order=index,
                after=spec.after,
                waiting_since=rec.queued_since,
                # Backing off after quick failures: out of placement until its time comes.
                held=state is held or (rec.retry_at is not None and rec.retry_at > now),
            )
            cache[name] = (spec, rec.mem_mib, rec.queued_since, state, cand, rec.retry_at)
            candidates.append(cand)
        if len(cache) > 2 * len(candidates) + 64:  # jobs that left the queue, or stopped waiting
            waiting = {c.name for c in candidates}
            for name in [n for n in cache if n not in waiting]:
                del cache[name]
        self._cands_list = candidates
        self._cands_names = {c.name for c in candidates}
        self._cands_at = self._version
        return candidates

    def _schedule(self) -> None:
        """One placement pass: block what can never run, start what can, explain the rest."""
        if not self._started or self._stopping or self._store is None:
            return
        self._block_dependents()
        decision = self._decide(now=time.time())
        self._last_decision = decision
        for start in decision.starts if self._dispatch and not self._unsaved else ():
            self._start_job(start.name, start.gpus)
        if self._said == (self._version, decision.reasons):
            return  # the same jobs wait for the same reasons: nothing to tell (a poll at rest)
        changed = []
        now = time.time()
        for name, reason in decision.reasons.items():
            rec = self._records.get(name)
            if rec is not None and rec.waiting and rec.reason != reason:
                if rec.after_edit_of is not None:
                    continue  # held as the edit of a running job: its own reason says so
                if rec.retry_at is not None and rec.retry_at > now:
                    reason = _backoff_reason(rec, now)
                    if rec.reason == reason:
                        continue
                rec.reason = reason
                rec.reason_at = now
                changed.append(rec)
                self._reasons_dirty.add(name)
        for rec in changed:
            self._publish(JobChanged(self._view(rec.name)))
        self._summarize(decision.reasons)
        self._said = (self._version, decision.reasons)

    def _summarize(self, reasons: Mapping[str, str]) -> None:
        """ "12 waiting: 8 needs 1 GPU with 40G ...; 4 after prep (queued)": the three most
        common reasons among the queued jobs (held ones are shown as held). It walks the
        reasons once instead of looking each waiting job up by name (100k lookups at 100k
        jobs), so ties go to the reason met first in rank order."""
        records = self._records
        queued = JobState.QUEUED
        waiting = sum(1 for n in self._order if records[n].state == queued)
        if not waiting:
            text = ""
        else:
            groups: dict[str, int] = {}
            explained = 0
            for name, reason in reasons.items():
                rec = records.get(name)
                if rec is not None and rec.state == queued:
                    groups[reason] = groups.get(reason, 0) + 1  # a reason is never empty
                    explained += 1
            if waiting > explained:  # queued but without a reason: it starts in this pass
                groups["starting"] = groups.get("starting", 0) + waiting - explained
            top = sorted(groups.items(), key=lambda kv: -kv[1])[:3]
            parts = [f"{count} {reason}" if count > 1 else reason for reason, count in top]
            text = f"{waiting} waiting: " + "; ".join(parts)
        if text != self._summary:
            self._summary = text
            self._publish(WaitingSummary(text))  # "" once nothing waits: the old one is stale

    def _block_dependents(self) -> None:
        """A waiting job whose ``after`` failed or was killed can never run: blocked."""
        if self._blocked_at == self._version:
            return  # no commit since the last check: no job failed, none started waiting
        changed = True
        specs = self._specs
        while changed:
            changed = False
            for name in self._order:
                if not specs[name].after:  # most jobs: skip them cheaply (runs every pass)
                    continue
                rec = self._records[name]
                if not rec.waiting:
                    continue
                bad = [
                    d
                    for d in self._specs[name].after
                    if d in self._records and self._records[d].state in BAD_STATES_FOR_AFTER
                ]
                if bad:
                    rec.state = JobState.BLOCKED
                    rec.reason = f"after {bad[0]} ({self._records[bad[0]].state.value})"
                    rec.ended_at = time.time()
                    self._commit(rec)
                    self._publish(JobChanged(self._view(name)))
                    changed = True
        self._blocked_at = self._version

    def _job_env(self, spec: JobSpec, rec: JobRecord, gpus: tuple[int, ...]) -> dict[str, str]:
        env = dict(self._settings.env)
        env.update(spec.env)
        env["PYTHONUNBUFFERED"] = "1"
        env["GTUI_JOB"] = spec.name
        env["GTUI_ATTEMPT"] = str(rec.attempt)
        env["GTUI_QUEUE"] = str(self.queue_path)
        env["GTUI_TOKEN"] = str(rec.token)
        # Always: CUDA then numbers GPUs as NVML and nvidia-smi do, so `--gpu 1` in an
        # unisolated job names the GPU gtui gave it (seed 004).
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        if isolated(spec, self._settings):
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in gpus)
        if rec.port is not None:
            env["GTUI_PORT"] = str(rec.port)
        return env

    def _start_job(self, name: str, gpus: tuple[int, ...]) -> None:
        assert self._store is not None
        spec = self._specs[name]
        rec = self._records[name]
        before = dataclasses.replace(rec)
        rec.attempt += 1
        rec.state = JobState.RUNNING
        rec.gpus = tuple(gpus)
        rec.pid = None
        rec.create_time = None
        rec.exit_code = None
        rec.signal = None
        rec.diagnosis = None
        rec.warnings = [] if isolated(spec, self._settings) else [UNISOLATED_WARNING]
        rec.peak_mib = None
        rec.started_at = time.time()
        rec.ended_at = None
        rec.reason = ""
        rec.token = uuid.uuid4().hex
        rec.port = runner.free_port() if "port" in placeholders_used(spec.cmd) else None
        log_dir = self.paths.log_dir(self._settings.log_dir)
        try:
            cmd = substitute(
                spec.cmd,
                gpus=gpus,
                name=name,
                attempt=rec.attempt,
                port=rec.port,
                matrix=spec.matrix,
            )
            # Commit the intent first: a crash from here on can never start it twice.
            rec.status_file = str(runner.status_path_for(self.paths.run_dir, name, rec.attempt))
            rec.log = None
            if not self._commit(rec):
                vars(rec).update(vars(before))  # not saved, so not started
                # The commit brought the caches _version guards up to a start now undone (the
                # job among the running, out of the candidates): they must be worked out again.
                self._version += 1
                return
            _crash_point("after_intent")
            launched = runner.launch(
                runner.LaunchRequest(
                    name=name,
                    attempt=rec.attempt,
                    cmd=cmd,
                    cwd=(self.queue_path.parent / os.path.expanduser(spec.cwd)).resolve(),
                    env=self._job_env(spec, rec, gpus),
                    log_dir=log_dir,
                    run_dir=self.paths.run_dir,
                )
            )
        except GtuiError as e:
            rec.state = JobState.FAILED
            rec.ended_at = time.time()
            rec.diagnosis = Diagnosis(kind="launch", line=str(e), hint=_launch_hint(str(e)))
            self._commit(rec)
            self._publish(JobChanged(self._view(name)))
            self._after_failure(rec)
            return
        _crash_point("after_launch")
        rec.pid = launched.pid
        rec.create_time = launched.create_time
        rec.log = str(launched.log_path)
        rec.status_file = str(launched.status_path)
        self._commit(rec)
        self._publish(JobChanged(self._view(name)))
        self._adopt(name, launched)

    def _arm_timeout(self, name: str) -> None:
        spec = self._specs.get(name)
        rec = self._records[name]
        if spec is None or spec.timeout_s is None or rec.started_at is None:
            return
        delay = max(0.0, rec.started_at + spec.timeout_s - time.time())
        loop = asyncio.get_running_loop()
        self._timeouts[name] = loop.call_later(delay, self._on_timeout, name)

    def _on_timeout(self, name: str) -> None:
        self._timeouts.pop(name, None)
        rec = self._records.get(name)
        if rec is None or not rec.active or not rec.pid:
            return
        self._timed_out.add(name)
        self._spawn(self._kill_process(name))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    async def _watch(self, name: str, launched: runner.Launched) -> None:
        try:
            status = await runner.wait_exit(launched)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # never lose a job to a watcher bug: record it as unknown
            self._publish(Notice("error", f"lost track of {name}: {e!r}"))
            status = runner.ExitStatus(None, None)
        if self._stopping:
            return
        _crash_point("after_exit")
        self._finish(name, status)
        _crash_point("after_finish")
        token = self._records[name].token if name in self._records else None
        if token and self._records[name].final:
            self._check_leftovers_soon(name, token)
        if self._backend is not None and self._backend.source != "nvml":
            self._backend_read_sync()
        else:
            # Real GPUs: read them now, so the freed memory is seen without waiting a poll;
            # the driver may take a moment to release it, so poll fast for a second.
            await self._read_gpus()
            self._fast_until = time.monotonic() + FAST_POLL_FOR_S
        self._schedule()
        self._fresh_pass = True
        if self._wake is not None:
            self._wake.set()

    def _check_leftovers_soon(self, name: str, token: str) -> None:
        """Check for what the job left running, together with the other jobs that end in the
        next moment: one /proc scan for all of them. A scan per job end (2 ms, in a thread that
        holds the GIL) halved the throughput of short jobs (benchmarks/throughput.py)."""
        self._leftover_pending[name] = token
        if not self._leftover_checking:
            self._leftover_checking = True
            self._spawn(self._leftover_batches())

    async def _leftover_batches(self) -> None:
        try:
            while self._leftover_pending:
                await asyncio.sleep(LEFTOVER_BATCH_S)
                batch, self._leftover_pending = self._leftover_pending, {}
                found = await asyncio.to_thread(
                    runner.processes_with_env_values, "GTUI_TOKEN", set(batch.values())
                )
                for name, token in batch.items():
                    self._note_leftovers(name, token, found.get(token, []))
        finally:
            self._leftover_checking = False

    async def _warn_leftovers(self, name: str, token: str) -> None:
        """A job that ended but left processes running (a daemon, a server): say so on the job.
        They are not killed (a job may start a server on purpose); `gtui kill` would."""
        pids = await asyncio.to_thread(runner.processes_with_env, "GTUI_TOKEN", token)
        self._note_leftovers(name, token, pids)

    def _note_leftovers(self, name: str, token: str, pids: list[int]) -> None:
        rec = self._records.get(name)
        if not pids or rec is None or rec.token != token or self._store is None:
            return
        shown = ", ".join(map(str, pids[:5])) + (" ..." if len(pids) > 5 else "")
        rec.warnings.append(
            f"ended but left {len(pids)} process(es) running: pid {shown} (kill them yourself "
            "if they are not meant to outlive it; their GPU memory counts as another user's)"
        )
        self._commit(rec)
        self._publish(JobChanged(self._view(name)))

    def _backend_read_sync(self) -> None:
        """After a job ends, read the (cheap, fake) GPUs again so the freed GPU is seen at once."""
        assert self._backend is not None
        self._take_snapshot(self._backend.read(self._usage()))
        # The memory seen per job must come from the same read: jobs started since the last
        # match would otherwise count twice (in ``used`` and again as declared - 0 observed),
        # and a packed GPU would take fewer jobs (benchmarks/extreme.py: 5 rounds, not 4).
        self._match_processes()

    def _finish(self, name: str, status: runner.ExitStatus, *, recovered: bool = False) -> None:
        """A job's process ended: decide its state, diagnose, maybe retry; commit; publish."""
        rec = self._records[name]
        if name in self._pending_specs:
            self._specs[name] = self._pending_specs.pop(name)
        spec = self._specs[name]
        self._watchers.pop(name, None)
        self._launched.pop(name, None)
        handle = self._timeouts.pop(name, None)
        if handle is not None:
            handle.cancel()
        self._log_sizes.pop(name, None)
        rec.exit_code = status.exit_code
        rec.signal = status.signal
        # Ended while no scheduler ran: when it really ended, not when we noticed.
        rec.ended_at = ended_at(rec) if recovered else time.time()
        killed = name in self._killing
        timed_out = name in self._timed_out
        self._killing.discard(name)
        self._timed_out.discard(name)
        if killed:
            rec.state = JobState.KILLED
            tail = read_log_tail(Path(rec.log)) if rec.log else ""
            rec.diagnosis = diagnose(
                status.exit_code, status.signal, tail, killed_by_user=True
            ) or Diagnosis("killed_by_user", "killed by you", "retry it with r / gtui retry")
        elif status.exit_code == 0 and status.signal is None:
            rec.state = JobState.DONE
            rec.diagnosis = None
            rec.quick_fails, rec.retry_at = 0, None
        elif status.exit_code is None and status.signal is None:
            # No readable exit status: "unknown", never "failed", never a silent re-run.
            rec.state = JobState.UNKNOWN
            rec.diagnosis = unknown_diagnosis(rec)
            if recovered:
                rec.warnings.append("ended while gtui was not running")
        else:
            tail = read_log_tail(Path(rec.log)) if rec.log else ""
            diagnosis = diagnose(
                status.exit_code,
                status.signal,
                tail,
                rules=[r for r in self._settings.diagnose if r not in self._rules_off],
                timed_out=timed_out,
                matcher=self._user_pattern_search,
                on_overrun=self._rule_overran,
            )
            if diagnosis is not None and diagnosis.kind == "error" and rec.log:
                diagnosis = full_disk(Path(rec.log)) or diagnosis  # its error was not written
            rec.diagnosis = diagnosis
            rec.state = JobState.FAILED
            if recovered:
                rec.warnings.append("ended while gtui was not running")
            if self._retry_left(spec, rec) and not timed_out:
                if diagnosis is not None and diagnosis.kind == "cuda_oom":
                    self._grow_after_oom(rec, diagnosis)
                rec.state = JobState.QUEUED
                rec.queued_since = time.time()
                self._back_off(rec)
        self._commit(rec)
        self._publish(JobChanged(self._view(name)))
        if rec.final or name not in self._index:
            # Ended, or would be retried under a name the file no longer has: its edit (if
            # any) takes over, as the next attempt.
            self._take_over_from_edit(rec)
        if rec.state == JobState.FAILED:
            self._after_failure(rec)

    def _back_off(self, rec: JobRecord) -> None:
        """A job retried after a failure that came quickly waits before its next try: at once
        the first time, then 1 s doubling to BACKOFF_MAX_S; a run over QUICK_RUN_S resets it.
        `retries = -1` on a job that fails at once restarted it ~266 times a second."""
        ran = (rec.ended_at or 0.0) - (rec.started_at or 0.0)
        rec.quick_fails = rec.quick_fails + 1 if ran < QUICK_RUN_S else 0
        if rec.quick_fails < 2:
            rec.retry_at = None
            return
        delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (rec.quick_fails - 2))
        rec.retry_at = time.time() + delay
        self._arm_retry(rec.name, delay)

    def _arm_retry(self, name: str, delay: float) -> None:
        """At the end of a back-off, make the job a candidate again and run a pass."""

        def due() -> None:
            self._version += 1  # the candidate list holds the job back: build it anew
            self._candidates.pop(name, None)
            self._kick()

        asyncio.get_running_loop().call_later(max(0.0, delay), due)

    def _user_pattern_search(self, pattern: str, lines: Sequence[str]) -> tuple[int, int] | None:
        """A user's [[diagnose]] pattern, run in the worker under its deadline. If no worker
        runs (the system refuses a process), the user rules are skipped, said once."""
        try:
            return self._pattern_worker.search(pattern, lines)
        except WorkerFailed as e:
            if not self._pattern_worker_failed:
                self._pattern_worker_failed = True
                self._publish(Notice("warning", f"[[diagnose]] rules skipped: {e}"))
            return None

    def _rule_overran(self, rule: DiagnosisRule) -> None:
        """A user's rule ran past the deadline: off for this scheduler, and the user told."""
        self._rules_off.add(rule)
        self._publish(
            Notice(
                "warning",
                f"[[diagnose]] rule `{rule.kind}` (pattern {rule.pattern!r}) took longer than "
                f"{self._pattern_worker.deadline:g} s on a log and is switched off until gtui "
                "restarts: a nested quantifier such as (a+)+ backtracks without end; simplify "
                "the pattern",
            )
        )

    def _retry_left(self, spec: JobSpec, rec: JobRecord) -> bool:
        return spec.retries < 0 or rec.attempt - rec.first_attempt < spec.retries

    def _grow_after_oom(self, rec: JobRecord, diagnosis: Diagnosis) -> None:
        totals = [
            g.mem_total_mib for g in self._snapshot.gpus if g.index in rec.gpus and g.mem_total_mib
        ]
        peak = max(filter(None, [rec.peak_mib, oom_peak_mib(diagnosis.line)]), default=None)
        grown = oom_retry_mem(rec.mem_mib, self._settings.oom_grow, peak, min(totals, default=None))
        if grown is not None and grown != rec.mem_mib:
            rec.warnings.append(
                f"CUDA OOM: the retry asks {grown} MiB instead of {rec.mem_mib or 'the whole GPU'}"
            )
            rec.mem_mib = grown

    def _after_failure(self, rec: JobRecord) -> None:
        if self._settings.on_failure == "pause" and not self._paused:
            self._set_paused(True)
            self._publish(Notice("warning", f"{rec.name} failed: queue paused (on_failure)"))

    # ------------------------------------------------------------------ helpers
    def _all_names(self) -> list[str]:
        """The queue's jobs in order, then jobs still running that left the queue file."""
        return self._names

    def _index_of(self, name: str) -> int:
        return self._index.get(name, len(self._order))

    def _follow_commit(self, rec: JobRecord) -> None:
        """Keep what ``_version`` guards current through a commit of ``rec`` alone, where that
        is cheap, instead of redoing it over every job: a job's start, pid and end are three
        commits, and at 2,000 jobs each redo cost ~0.3 ms (benchmarks/throughput.py)."""
        version, name = self._version, rec.name
        if self._active_at == version - 1:
            active = self._active
            if rec.active and name not in active:
                at = self._index_of(name)
                pos = next((i for i, n in enumerate(active) if self._index_of(n) > at), len(active))
                self._active = [*active[:pos], name, *active[pos:]]
            elif not rec.active and name in active:
                self._active = [n for n in active if n != name]
            self._active_at = version
        if self._cands_at == version - 1 and not rec.waiting:
            if name in self._cands_names:  # it stopped waiting (started, killed, blocked)
                cands = self._cands_list  # jobs start from the front: found early
                del cands[next(i for i, c in enumerate(cands) if c.name == name)]
                self._cands_names.discard(name)
            self._cands_at = version
        if (
            self._blocked_at == version - 1
            and not rec.waiting
            and rec.state not in BAD_STATES_FOR_AFTER
        ):
            self._blocked_at = version  # nothing new for a waiting job's `after` to fail on

    def _active_names(self) -> list[str]:
        """The running and suspended jobs, in queue order; worked out again only after a
        commit or a queue change (every state change is committed first). With 10,000 jobs,
        the per-poll walks over every job for the few running ones were a third of an idle
        dashboard's CPU (benchmarks/dashboard.py). Callers still check ``rec.active``."""
        if self._active_at != self._version:
            records = self._records
            self._active = [n for n in self._names if records[n].active]
            self._active_at = self._version
        return self._active

    def _view(self, name: str, order: int | None = None) -> JobView:
        return freeze(
            self._specs[name], self._records[name], self._index_of(name) if order is None else order
        )

    def _commit(self, rec: JobRecord) -> bool:
        """Save a change before it is shown. When the store refuses (locked by another process,
        disk full) the change is kept, the user told, no job started, and it is saved again at
        every poll; the jobs' exit-status files cover a crash meanwhile. False: not saved."""
        assert self._store is not None
        self._version += 1  # every transition passes here: see _active_names
        self._follow_commit(rec)
        if not self._unsaved:
            try:
                self._store.save(rec)
                return True
            except StoreError as e:
                self._store_failed(e)
        self._unsaved[rec.name] = rec
        return False

    def _store_failed(self, e: StoreError) -> None:
        if str(e) != self._store_error:
            self._store_error = str(e)
            self._publish(
                Notice(
                    "error",
                    f"cannot save the job states: {e}\nno job starts until they are saved; "
                    "gtui tries again at every poll (running jobs go on)",
                )
            )

    def _save_reasons(self) -> None:
        """Save the waiting reasons that changed since the last save (one transaction)."""
        self._reasons_saved = time.monotonic()
        if not self._reasons_dirty or self._store is None:
            return
        recs = [self._records[n] for n in self._reasons_dirty if n in self._records]
        self._reasons_dirty = set()
        with contextlib.suppress(StoreError):  # only words: the next save has them again
            self._store.save_many(r for r in recs if r.waiting)

    def _save_unsaved(self) -> None:
        if not self._unsaved or self._store is None:
            return
        try:
            self._store.save_many(list(self._unsaved.values()))
        except StoreError as e:
            self._store_failed(e)
            return
        self._unsaved.clear()
        self._store_error = None
        self._publish(Notice("info", "job states saved again; jobs start again"))

    def _require(self, name: str) -> JobRecord:
        rec = self._records.get(name)
        if rec is None:
            known = ", ".join(self._order[:8]) + (", ..." if len(self._order) > 8 else "")
            raise GtuiError(
                f"no job named {name!r} in {self.queue_path.name}"
                + (f" (jobs: {known})" if known else " (the queue is empty)")
            )
        return rec

    def _set_paused(self, paused: bool) -> None:
        self._paused = paused
        if self._store is not None:
            self._store.set_meta("paused", "1" if paused else "0")
        self._publish(QueuePaused(paused))

    def _kick(self) -> None:
        self._schedule()
        if self._wake is not None:
            self._wake.set()

    # ------------------------------------------------------------------ commands
    async def kill(self, names: Sequence[str], *, wait: bool = True) -> None:
        """Kill running jobs (SIGTERM, SIGKILL after kill_grace); waiting jobs become killed.

        ``wait=False`` returns once SIGTERM is sent (``gtui kill``): the grace and the SIGKILL
        go on in the background, and the job's end is recorded as killed when it comes."""
        for name in names:
            self._require(name)
        tasks: list[Awaitable[object]] = []
        for name in names:
            rec = self._records[name]
            if rec.active:
                self._killing.add(name)
                if wait:
                    tasks.append(self._kill_process(name))
                else:
                    signalled = asyncio.Event()
                    self._spawn(self._kill_process(name, signalled))
                    tasks.append(signalled.wait())
            elif rec.waiting:
                rec.state = JobState.KILLED
                rec.ended_at = time.time()
                rec.reason = ""
                rec.diagnosis = Diagnosis("killed_by_user", "removed from the run by you", "retry")
                self._commit(rec)
                self._publish(JobChanged(self._view(name)))
            else:
                raise GtuiError(f"{name} is {rec.state.value}: there is nothing to kill")
        await asyncio.gather(*tasks)
        self._kick()

    async def _kill_process(self, name: str, signalled: asyncio.Event | None = None) -> None:
        """Kill the job's processes; ``signalled`` is set once SIGTERM is sent (or it is
        certain none will be: a failure must not leave the caller waiting)."""
        try:
            rec = self._records[name]
            if rec.pid is None:
                return
            watcher = self._watchers.get(name)
            # kill_tree sends SIGCONT with SIGTERM, so a suspended job can act on it too.
            await runner.kill_tree(
                rec.pid,
                self._settings.kill_grace_s,
                create_time=rec.create_time,
                log_path=Path(rec.log) if rec.log else None,
                on_signalled=signalled.set if signalled is not None else None,
            )
            if watcher is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(asyncio.shield(watcher), timeout=5.0)
        finally:
            if signalled is not None:
                signalled.set()

    async def pause(self, names: Sequence[str]) -> None:
        """Hold waiting jobs; suspend running ones (SIGSTOP; their GPU memory stays counted)."""
        self._switch(
            names,
            JobState.QUEUED,
            JobState.HELD,
            JobState.RUNNING,
            JobState.SUSPENDED,
            runner.suspend,
            "only queued or running jobs pause",
        )

    async def resume(self, names: Sequence[str]) -> None:
        """Release held jobs; continue suspended ones (SIGCONT)."""
        self._switch(
            names,
            JobState.HELD,
            JobState.QUEUED,
            JobState.SUSPENDED,
            JobState.RUNNING,
            runner.resume,
            "only held or suspended jobs resume",
        )

    def _switch(
        self,
        names: Sequence[str],
        waiting_from: JobState,
        waiting_to: JobState,
        active_from: JobState,
        active_to: JobState,
        signal_group: Callable[..., None],
        refusal: str,
    ) -> None:
        """Pause and resume: one state flip for waiting jobs, a signal for running ones. Every
        name is checked before anything changes."""
        for name in names:
            rec = self._require(name)
            if rec.state not in (waiting_from, active_from):
                raise GtuiError(f"{name} is {rec.state.value}: {refusal}")
        for name in names:
            rec = self._records[name]
            if rec.state == waiting_from:
                rec.state = waiting_to
                rec.reason = "held by you" if waiting_to == JobState.HELD else ""
            else:
                assert rec.pid is not None
                signal_group(rec.pid, create_time=rec.create_time)
                rec.state = active_to
            self._commit(rec)
            self._publish(JobChanged(self._view(name)))
        self._kick()

    async def retry(self, names: Sequence[str]) -> None:
        """Queue finished jobs again (failed, killed, blocked, or done to run it once more)."""
        for name in names:
            rec = self._require(name)
            if rec.state not in FINAL_STATES:
                raise GtuiError(f"{name} is {rec.state.value}: only finished jobs can be retried")
        for name in names:
            rec = self._records[name]
            rec.state = JobState.QUEUED
            rec.queued_since = time.time()
            rec.reason = ""
            rec.diagnosis = None
            rec.quick_fails, rec.retry_at = 0, None  # the user asked: now, not after a wait
            # A manual retry gets a fresh retry budget; attempt numbers go on (log names).
            rec.first_attempt = rec.attempt + 1
            self._commit(rec)
            self._publish(JobChanged(self._view(name)))
            for dependent in self._order:
                drec = self._records[dependent]
                if drec.state == JobState.BLOCKED and name in self._specs[dependent].after:
                    drec.state = JobState.QUEUED
                    drec.reason = ""
                    drec.queued_since = time.time()
                    self._commit(drec)
                    self._publish(JobChanged(self._view(dependent)))
        self._kick()

    async def pause_queue(self) -> None:
        self._set_paused(True)
        self._kick()

    async def resume_queue(self) -> None:
        self._set_paused(False)
        self._kick()

    async def add(self, fields: dict[str, object]) -> str:
        """Append a job to the queue file (validated like the file) and take it in at once."""
        from gtui.core.writeback import append_job

        before = set(self._specs)
        # Checked against the GPUs too: a job none can take would make the file unrunnable.
        pool = pool_totals(self._settings, self._snapshot)
        await asyncio.to_thread(append_job, self.queue_path, dict(fields), pool=pool)
        self._reload_if_changed(force=True)
        added = [n for n in self._order if n not in before]
        self._kick()
        return added[-1] if added else str(fields.get("name", ""))

    async def edit(self, name: str, fields: dict[str, object]) -> None:
        from gtui.core.writeback import update_job

        rec = self._require(name)
        if not rec.waiting:
            raise GtuiError(f"{name} is {rec.state.value}: only waiting jobs can be edited")
        pool = pool_totals(self._settings, self._snapshot)
        await asyncio.to_thread(update_job, self.queue_path, name, dict(fields), pool=pool)
        self._reload_if_changed(force=True)
        self._kick()

    async def remove(self, name: str) -> None:
        from gtui.core.writeback import remove_job

        rec = self._require(name)
        if rec.active:
            raise GtuiError(f"{name} is {rec.state.value}: kill it first")
        await asyncio.to_thread(remove_job, self.queue_path, name)
        self._reload_if_changed(force=True)
        self._kick()

    async def move(self, name: str, where: Literal["up", "down", "top"]) -> None:
        from gtui.core.writeback import move_job

        rec = self._require(name)
        if not rec.waiting:
            raise GtuiError(f"{name} is {rec.state.value}: only waiting jobs can be moved")
        await asyncio.to_thread(move_job, self.queue_path, name, where)
        self._reload_if_changed(force=True)
        self._kick()


class _StateView(Mapping[str, str]):
    """Job name -> state value, read through to the records: what ``place`` needs of the jobs
    a waiting job is ``after``, without copying every job's state at every pass."""

    __slots__ = ("_records",)

    def __init__(self, records: dict[str, JobRecord]) -> None:
        self._records = records

    def __getitem__(self, name: str) -> str:
        return self._records[name].state.value

    def get(self, name: str, default: Any = None) -> Any:
        rec = self._records.get(name)
        return default if rec is None else rec.state.value

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)


def _backoff_reason(rec: JobRecord, now: float) -> str:
    left = format_wait((rec.retry_at or now) - now)
    at = time.strftime("%H:%M:%S", time.localtime(rec.retry_at or now))
    return (
        f"retry at {at} (in {left}): failed {rec.quick_fails} times in a row within a minute; "
        "kill or pause it to stop"
    )


def _derived(spec: JobSpec) -> bool:
    """Whether the job's name was made from its command (no ``name``, no matrix)."""
    return not spec.matrix and spec.name == derive_name(spec.cmd)


def _launch_hint(message: str) -> str:
    lowered = message.lower()
    if "no space" in lowered:
        return "the disk holding the log directory is full: free space, then retry (r)"
    if "permission" in lowered:
        return "gtui cannot write there: fix the permissions of log_dir or cwd, then retry (r)"
    if "cwd" in lowered or "directory" in lowered:
        return "fix the job's cwd in the queue file, then retry (r)"
    return "fix the cause above, then retry (r)"
