"""A job's run, from start to end, through the executor: the part of the scheduler that acts.

``JobRunner.start_job`` commits the intent, has the executor launch, records the handle;
the watcher waits for the end and hands it to ``finish``, with what ended it (a kill asked
for, a time limit passed) as arguments; ``finish`` asks ``outcome.conclude`` what it means,
commits, tells the front ends (the bus) and the parts that follow runs (``RunEnded``, on the
scheduler's own bus). Kills and the check for processes a job left behind live here too;
the time limits' timers are the runner's own part (sched.timelimits). No pid is touched:
only handles, through the executor.

Size: about 550 lines (the class under 460), as a start, its watch and its end share one
attempt's state (the handle, the log, the timers); split, each half would reach into the
other's. The check for what a job left running is its own part (sched.leftovers), as is
a stop that is not the job's fault (sched.stops), what such an end means (sched.requeue),
the watch of the running jobs' logs (sched.logwatch) and what the jobs' last runs say of
their memory at a start (sched.memhistory).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gtui.core.api import JobChanged, Notice
from gtui.core.bus import EventBus, Topic
from gtui.core.deadline import detached
from gtui.core.errors import GtuiError
from gtui.core.exec.base import (
    Executor,
    ExitStatus,
    Handle,
    LaunchDeferred,
    LaunchRequest,
    handle_of,
    off_loop,
)
from gtui.core.gpus.reader import GpuReader
from gtui.core.gpus.snapshot import GpuInfo
from gtui.core.model import NO_ITEMS, RECORD_FIELDS, JobRecord, JobSpec, JobState, copy_record
from gtui.core.paths import QueuePaths
from gtui.core.procstat import boot_id
from gtui.core.queue.placeholders import placeholders_used, substitute
from gtui.core.queue.queuefile import isolated
from gtui.core.sched import outcome
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.energymeter import EnergyMeter
from gtui.core.sched.faults import crash_point
from gtui.core.sched.jobenv import job_env, launch_limits, on_node
from gtui.core.sched.jobsetup import file_env, setup_of, with_setup
from gtui.core.sched.leftovers import LeftoverCheck
from gtui.core.sched.memhistory import use_history
from gtui.core.sched.planner import Planner
from gtui.core.sched.quarantine import Quarantine, faulty_gpus
from gtui.core.sched.recovery import Recovered
from gtui.core.sched.requeue import Cause, after_end, resume_of
from gtui.core.sched.requeue import requeue as requeue_job
from gtui.core.sched.stops import Stops
from gtui.core.sched.timelimits import TimeLimits
from gtui.core.state.book import JobBook
from gtui.core.state.history import attempt_of, attempts, record_attempt
from gtui.core.state.usage import auto_mem, mem_note

# On a job that runs with isolate = false: it sees, and may fill, every GPU of the machine.
UNISOLATED_WARNING = "runs unisolated (isolate = false): no CUDA_VISIBLE_DEVICES, it sees every GPU"
KILL_RETRY_S = 5.0  # a time limit's kill that signalled nothing is tried again after this
TAIL_WAIT_S = 10.0  # a failed job's end waits this long for its log's tail, then goes without


@dataclass(frozen=True)
class RunEnded:
    """A job's run ended and its end is committed (or its start was put off: still queued).
    Told on the scheduler's own bus to the parts that follow runs (forecasts, notifications);
    never sent to a front end. ``exited_ok``: exit code 0 and no signal."""

    record: JobRecord
    exited_ok: bool


@dataclass
class _Run:
    """One watched attempt: its watcher, its time limit's timer, and what ended it (a kill
    asked for, the limit passed) as the watcher hands it to ``finish``."""

    task: asyncio.Task[None] | None = None
    timer: asyncio.TimerHandle | None = None
    killed: bool = False
    deadline_hit: float | None = None  # the deadline its timer fired for
    requeue: str | None = None  # stopped because its GPU failed: why (queued again, not killed)
    warning: asyncio.TimerHandle | None = None  # its signal before the time limit


class JobRunner:
    """Starts jobs, watches them to their end, enforces their time limits and kills them."""

    def __init__(
        self,
        *,
        book: JobBook,
        bus: EventBus,
        run_ends: Topic[RunEnded],
        executor: Executor,
        reader: GpuReader,
        paths: QueuePaths,
        queue_path: Path,
        config: QueueConfig,
        quarantine: Quarantine,
        planner: Planner,
        kick: Callable[[], None],
        after_end: Callable[[str], Awaitable[None]],
        stopping: Callable[[], bool],
        last_look: Callable[[str], Awaitable[None]] | None = None,
        energy: EnergyMeter | None = None,
    ) -> None:
        self.paths = paths
        self.queue_path = queue_path
        self._book = book
        self._bus = bus
        self._run_ends = run_ends  # the parts that follow runs (forecasts, notifications)
        self._executor = executor
        self._reader = reader
        self._config = config
        self._quarantine = quarantine
        self._after_end = after_end  # the engine reads the GPUs and runs a pass
        self._stopping = stopping
        self._last_look = last_look  # the link watch's read of a log's last bytes at an end
        self._runs: dict[str, _Run] = {}
        self._bg: set[asyncio.Task[Any]] = set()
        self._leftovers = LeftoverCheck(executor, book, bus, self.spawn)
        self._kill_failures: dict[str, str] = {}  # job -> why its kill signalled nothing
        self._start_tries: dict[str, int] = {}  # job -> starts put off in a row (_defer_start)
        self._stops = Stops(book, bus, executor, config, self)
        self._energy = energy  # each attempt's GPU energy, from its start to its end
        self._limits = TimeLimits(
            book=book,
            executor=executor,
            config=config,
            planner=planner,
            kick=kick,
            runs=self._runs,
            warn=self._stops.warn,
            kill=self._kill_process,
            spawn=self.spawn,
        )
        self.arm_retry = self._limits.arm_retry  # a back-off's end: the job a candidate again

    # ------------------------------------------------------------------ start
    def _infos(self) -> tuple[GpuInfo, ...]:
        reader = self._reader
        return reader.snapshot.gpus if reader is not None else ()

    def job_env(
        self,
        spec: JobSpec,
        rec: JobRecord,
        gpus: tuple[int, ...],
        from_file: dict[str, str] | None = None,
    ) -> dict[str, str]:
        """The environment on top of the user's: gtui.core.sched.jobenv, the rule the job
        detail view shows too."""
        settings = self._config.settings
        return job_env(spec, rec, settings, self.queue_path, gpus, self._infos(), from_file)

    def _on_node(self, gpus: tuple[int, ...]) -> tuple[str | None, tuple[int, ...]]:
        """The node of a placement and the GPUs' indices there: a cluster's pool
        numbers GPUs across nodes, a job sees its node's numbers. One server: (None, gpus)."""
        return on_node(gpus, self._infos())

    def start_job(self, name: str, gpus: tuple[int, ...]) -> None:
        book = self._book
        spec = book.specs[name]
        rec = book.records[name]
        before = copy_record(rec)
        rec.attempt += 1
        rec.state = JobState.RUNNING
        rec.gpus = tuple(gpus)
        rec.pid = None
        rec.create_time = None
        rec.exit_code = None
        rec.signal = None
        rec.diagnosis = None
        rec.warnings = [] if isolated(spec, self._config.settings) else [UNISOLATED_WARNING]
        rec.peak_mib = None
        rec.peak_gpu_mib = []
        rec.host_peak_mib = None
        rec.links = NO_ITEMS  # the new attempt's own, as its log prints them
        rec.started_at = time.time()
        rec.ended_at = None
        rec.reason = ""
        rec.token = uuid.uuid4().hex
        rec.node = None
        rec.preempt_for = None
        rec.preempt_signalled = False
        rec.boot_id = boot_id()
        ex = self._executor
        rec.port = ex.free_port() if "port" in placeholders_used(spec.cmd) else None
        try:
            node, node_gpus = self._on_node(gpus)
            cmd = substitute(
                spec.cmd,
                gpus=node_gpus,
                name=name,
                attempt=rec.attempt,
                port=rec.port,
                matrix=spec.matrix,
            )
            settings = self._config.settings
            cmd = with_setup(cmd, setup_of(spec, settings))
            # read at each start: an edit of the file applies to the next attempt
            from_file = file_env(spec, settings, self.queue_path)
            # Commit the intent first: a crash from here on can never start it twice.
            rec.status_file = str(ex.status_path(self.paths.run_dir, name, rec.attempt))
            rec.log = None
            if not book.commit(rec):
                for field in RECORD_FIELDS:  # not saved, so not started
                    setattr(rec, field, getattr(before, field))
                # The commit brought the caches the version guards up to a start now undone
                # (the job among the running, out of the candidates): work them out again.
                book.invalidate()
                return
            crash_point("after_intent")
            limit = launch_limits(spec, self._config.settings)
            handle = ex.launch(
                LaunchRequest(
                    name=name,
                    attempt=rec.attempt,
                    cmd=cmd,
                    cwd=(self.queue_path.parent / os.path.expanduser(spec.cwd)).resolve(),
                    env=self.job_env(spec, rec, gpus, from_file),
                    log_dir=self.paths.log_dir(self._config.settings.log_dir),
                    run_dir=self.paths.run_dir,
                    gpus=tuple(gpus),
                    node=node,
                    limit_cpus=limit[0],
                    limit_ram_mib=limit[1],
                )
            )
        except LaunchDeferred as e:
            for field in RECORD_FIELDS:  # nothing ran: the attempt is not spent
                setattr(rec, field, getattr(before, field))
            self._defer_start(name, str(e), ran_wrapper=False)
            return
        except GtuiError as e:
            outcome.launch_failed(rec, str(e))
            book.commit(rec)
            self._bus.publish(JobChanged(book.view(name)))
            self._config.after_failure(rec, book.store)
            return
        crash_point("after_launch")
        rec.pid = handle.pid
        rec.create_time = handle.create_time
        rec.log = str(handle.log_path)
        rec.status_file = str(handle.status_path)
        rec.node = handle.node
        book.commit(rec)
        self._bus.publish(JobChanged(book.view(name)))
        if self._energy is not None:
            self._energy.begin(name)  # its GPUs' energy counters as it starts
        self.adopt(name, handle)

    def _defer_start(self, name: str, why: str, *, ran_wrapper: bool) -> None:
        """No process could be made for the job now: it waits for a back-off, then is a
        candidate again (outcome.defer_start)."""
        rec = self._book.records[name]
        tries = self._start_tries.get(name, 0)
        self._start_tries[name] = tries + 1
        outcome.defer_start(rec, why, tries, ran_wrapper=ran_wrapper)
        self._book.commit(rec)
        self._bus.publish(JobChanged(self._book.view(name)))
        if rec.retry_at is not None:
            self.arm_retry(name, rec.retry_at - time.time())

    def adopt(self, name: str, handle: Handle) -> None:
        """Watch a job's run to its end (one just launched, or one a restart found running)."""
        run = self._runs[name] = _Run()
        run.task = asyncio.create_task(self._watch(name, handle, run))
        self._limits.arm(name, run)

    # ------------------------------------------------------------------ background
    def spawn(self, coro: Any) -> None:
        """Run ``coro`` in the background; ``close`` waits for what is still under way."""
        # A job's run outlives the request that may have started it: not under its deadline.
        task = asyncio.create_task(coro, context=detached())
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)

    # ------------------------------------------------------------------ the end
    async def _watch(self, name: str, handle: Handle, run: _Run) -> None:
        try:
            status = await self._executor.wait(handle)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # never lose a job to a watcher bug: record it as unknown
            self._bus.publish(Notice("error", f"lost track of {name}: {e!r}"))
            status = ExitStatus(None, None)
        if self._stopping():
            return
        crash_point("after_exit")
        if self._last_look is not None:  # links printed after the last look: on its record
            await self._last_look(name)
            if self._stopping():
                return
        tail = None
        if run.killed or not (status.exit_code == 0 and status.signal is None):
            tail = await self._end_tail(name)
            if self._stopping():
                return
        # What ended it, as it stands now: a kill asked for while the tail was read counts.
        self.finish(name, status, tail=tail, killed=run.killed, deadline=run.deadline_hit)
        crash_point("after_finish")
        rec = self._book.records.get(name)
        if rec is not None and rec.token and rec.final:
            self._leftovers.soon(name, rec.token)
        await self._after_end(name)

    async def _end_tail(self, name: str) -> str:
        """The tail of a job's log that the diagnosis reads, read in a thread: a log on a
        stalled disk must not freeze the scheduler. Given up after :data:`TAIL_WAIT_S` (the
        end is recorded without a diagnosis; the stuck read stays in its own thread)."""
        executor, log = self._executor, self._book.records[name].log
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(
                off_loop(lambda: outcome.log_tail(executor, log)), TAIL_WAIT_S
            )
        return ""

    def finish(
        self,
        name: str,
        status: ExitStatus,
        *,
        killed: bool = False,
        deadline: float | None = None,
        recovered: bool = False,
        tail: str | None = None,
    ) -> None:
        """A job's run ended: decide its state, diagnose, maybe retry; commit; publish.
        ``killed``: a kill was asked for; ``deadline``: the time limit its timer fired for
        (an end after it is a timeout). ``tail``: its log's tail, read already (else read
        here, when it is needed)."""
        book = self._book
        rec = book.records[name]
        if name in book.pending_specs:
            book.specs[name] = book.pending_specs.pop(name)
        run = self._runs.pop(name, None)
        requeue = run.requeue if run is not None else None
        if run is not None and run.timer is not None:
            run.timer.cancel()
        if run is not None and run.warning is not None:
            run.warning.cancel()
        exited_ok = status.exit_code == 0 and status.signal is None
        timed_out = deadline is not None and not outcome.ended_in_time(status, deadline)
        energy = self._energy.end(name) if self._energy is not None else None
        if status.not_started is not None and not killed:
            self._run_ends.publish(RunEnded(rec, exited_ok))
            self._defer_start(name, status.not_started, ran_wrapper=True)
            return
        self._start_tries.pop(name, None)
        failed = not killed and not (status.exit_code == 0 and status.signal is None)
        if not (killed or failed):
            tail = ""
        elif tail is None:  # at a restart (recovered): before the loop serves anyone
            tail = outcome.log_tail(self._executor, rec.log)
        snapshot = self._reader.snapshot if self._reader is not None else None
        before_mem = rec.mem_mib
        outcome.conclude(
            rec,
            book.specs[name],
            status,
            tail,
            self._config.rules,
            snapshot or _NO_GPUS,
            killed=killed,
            timed_out=timed_out,
            recovered=recovered,
        )
        spec = book.specs[name]
        if requeue is not None:  # its GPU failed under it: waiting again, not killed
            requeue_job(rec, Cause.GPU_FAULT, why=requeue)
        else:
            after_end(
                rec,
                resume_of(spec, self._config.settings),
                status,
                self._config.settings,
                killed=killed,
                timed_out=timed_out,
                recovered=recovered,
            )
        if spec.mem_auto and rec.peak_mib and rec.mem_mib == before_mem:  # not grown after OOM
            peaks = [a.peak_mib for a in attempts(self.paths.db, name)] + [rec.peak_mib]
            rec.mem_mib = auto_mem(peaks, self._largest_gpu())
        fault = rec.diagnosis is not None and rec.diagnosis.kind == "gpu_fault"
        if fault and rec.gpus and requeue is None:  # the health watch quarantined it already
            self._quarantine_gpus(rec)  # before the retry's pass: it must go elsewhere
        if rec.retry_at is not None and rec.state == JobState.QUEUED:
            self.arm_retry(name, rec.retry_at - time.time())
        book.commit(rec)
        record_attempt(book.store, rec, energy)  # the attempts history (the job detail view)
        self._bus.publish(JobChanged(book.view(name)))
        # Forecasts forget its progress; [notify] queues a message, never waited on.
        self._run_ends.publish(RunEnded(rec, exited_ok))
        if rec.peak_mib and mem_note(spec, [attempt_of(rec)]):  # cheap first: this run alone
            note = mem_note(spec, attempts(self.paths.db, name))
            if note:
                self._bus.notice("warning", note)
        if rec.final or name not in book.index:
            # Ended, or would be retried under a name the file no longer has: its edit (if
            # any) takes over, as the next attempt.
            edit = book.take_over_from_edit(rec)
            if edit is not None:
                self._bus.publish(JobChanged(book.view(edit.name)))
        if rec.state == JobState.FAILED:
            self._config.after_failure(rec, book.store)

    def _largest_gpu(self) -> int | None:
        snapshot = self._reader.snapshot if self._reader is not None else None
        totals = [g.mem_total_mib for g in snapshot.gpus if g.mem_total_mib] if snapshot else []
        return max(totals, default=None)

    def use_history(self) -> None:
        """At start: what the jobs' last runs used sets ``mem = "auto"`` (sched.memhistory)."""
        use_history(self._book, self._bus, self.paths.db, self._largest_gpu())

    def _quarantine_gpus(self, rec: JobRecord) -> None:
        """A hardware fault (ECC, Xid, off the bus): its GPU gets no new job until cleared."""
        assert rec.diagnosis is not None
        spec = self._book.specs[rec.name]
        gpus = faulty_gpus(rec, rec.diagnosis, isolated(spec, self._config.settings))
        new = self._quarantine.add(gpus, rec.diagnosis.line, rec.name)
        if new:
            listed = ",".join(map(str, new))
            self._bus.notice(
                "error",
                f"GPU {listed} quarantined: {rec.name} hit a hardware fault there "
                f"({rec.diagnosis.line[:120]}); no new job starts on it until you clear it "
                f"(`gtui quarantine {self.queue_path.name} --clear {listed}`)",
            )

    # ------------------------------------------------------------------ kill
    def kill(self, name: str, signalled: asyncio.Event | None = None) -> Coroutine[Any, Any, None]:
        """Mark the running job's attempt as killed now, before anything is awaited (its end,
        whenever it comes, is recorded as killed), and return its kill, to await or spawn."""
        self._kill_failures.pop(name, None)  # an earlier kill's (a time limit's)
        run = self._runs.get(name)
        if run is not None:
            run.killed = True
        return self._kill_process(name, signalled)

    def requeue(self, name: str, why: str) -> Coroutine[Any, Any, None]:
        """Stop the running job because its GPU failed (``why``): its end is recorded as
        queued again with no retry spent (sched.requeue), not as killed."""
        run = self._runs.get(name)
        if run is not None:
            run.requeue = why
        return self.kill(name)

    def preempt(self, name: str, by: str) -> None:
        """Stop a running job to make room for ``by`` (sched/stops.py)."""
        self._stops.preempt(name, by)

    def watcher(self, name: str) -> asyncio.Task[None] | None:
        """The task watching ``name``'s run to its end, if one does."""
        run = self._runs.get(name)
        return run.task if run is not None else None

    def kill_process(self, name: str) -> Coroutine[Any, Any, None]:
        """The kill (TERM, then KILL after ``kill_grace``) with the run not marked killed:
        the end of a stop that was not the job's fault."""
        return self._kill_process(name)

    def kill_failure(self, name: str) -> str | None:
        """Why the last kill of ``name`` signalled nothing (taken: told once), or None."""
        return self._kill_failures.pop(name, None)

    async def _kill_process(self, name: str, signalled: asyncio.Event | None = None) -> None:
        """Kill the job's processes; ``signalled`` is set once TERM is sent (or it is certain
        none will be: a failure must not leave the caller waiting). A kill that signalled
        nothing is no kill: the job is not recorded killed, the error is kept for the caller
        (``_kill_failures``) and told."""
        sent = False

        def on_signalled() -> None:
            nonlocal sent
            sent = True
            if signalled is not None:
                signalled.set()

        try:
            rec = self._book.records[name]
            if rec.pid is None:
                return
            run = self._runs.get(name)
            watcher = run.task if run is not None else None
            await self._executor.kill(
                handle_of(rec), self._config.settings.kill_grace_s, on_signalled=on_signalled
            )
            if watcher is not None:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asyncio.wait_for(asyncio.shield(watcher), timeout=5.0)
        except Exception as e:  # the scheduler outlives a kill that failed, and says so
            why = str(e) or type(e).__name__
            if sent:
                self._bus.notice("error", f"killing {name}: SIGTERM sent, then: {why}")
            else:
                self._kill_failures[name] = why
                self._bus.notice("error", f"could not kill {name}: {why}; it still runs")
                run = self._runs.get(name)
                if run is not None:
                    run.killed = False
                    if run.deadline_hit is not None:  # past its limit: try again
                        run.deadline_hit = None
                        loop = asyncio.get_running_loop()
                        run.timer = loop.call_later(KILL_RETRY_S, self._limits.on_timeout, name)
        finally:
            if signalled is not None:
                signalled.set()

    # ------------------------------------------------------------------ restart, shutdown
    def recover(self, found: Recovered) -> None:
        """Re-adopt the jobs a restart found running; record those that ended meanwhile."""
        for name, handle in found.adopt:
            self.adopt(name, handle)
            if self._energy is not None:
                self._energy.resume(name)
            if self._book.records[name].preempt_for is not None:  # a stop under way
                self.spawn(self._stops.stop(name))
        for name, status in found.ended:
            self.finish(name, status, recovered=True)

    async def close(self) -> None:
        """Finish what runs in the background (a timeout's kill, a leftover check), then stop
        the timers and the watchers: the jobs go on, and the next scheduler re-adopts them."""
        if self._bg:
            await asyncio.wait(list(self._bg), timeout=15.0)
        runs = list(self._runs.values())
        for run in runs:
            if run.timer is not None:
                run.timer.cancel()
                run.timer = None
        tasks = [run.task for run in runs if run.task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._runs.clear()


def _no_gpus() -> Any:
    from gtui.core.gpus.snapshot import GpuSnapshot

    return GpuSnapshot(gpus=(), taken_at=0.0, source="none")


_NO_GPUS = _no_gpus()
