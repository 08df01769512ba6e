"""One client API for every command: a request of the protocol (gtui.core.control.protocol),
done by whoever owns the queue now.

- :class:`SocketClient` sends it to a scheduler that runs the queue (a headless ``gtui run``,
  a dashboard in another tmux session), over the control socket;
- with none running, :class:`gtui.core.control.offline.StoreClient` does it on the saved state,
  through the same handler a scheduler's socket uses (gtui.core.control.handle).

:func:`perform` picks the socket when a scheduler answers, else the store. Events (what
changed) come from ``subscribe`` on the in-process engine, or, for a command, from
:func:`watch_jobs`: the scheduler's events while one runs, the saved state while none does.
:func:`stop` ends the scheduler and returns once it has exited.

An edit of the queue file (``gtui add / move / rm / edit``) is written under the file's lock by
whoever makes it (gtui.core.queue.writeback); ``reload`` then has a running scheduler take it
at once (with none, the next one reads the file).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from gtui.core.api import Event, JobChanged, JobRemoved, QueueChanged, QueuePaused
from gtui.core.control.protocol import (
    TIMEOUT_S,
    Ping,
    Reply,
    Request,
    Status,
    StatusReply,
    Stop,
    Stopped,
)
from gtui.core.control.rpc import NoAnswer, ask
from gtui.core.control.starting import POLL_S as START_POLL_S
from gtui.core.control.starting import starting_pid, waiting_line
from gtui.core.errors import EXIT_LOCKED, GtuiError, LockedError
from gtui.core.paths import QueuePaths, queue_paths

log = logging.getLogger("gtui")
# How long a scheduler that holds the lock may take to answer on its socket.
ANSWER_WAIT_S = 5.0
STOP_WAIT_S = 120.0  # a scheduler asked to stop finishes what was under way, then exits
OFFLINE_POLL_S = 1.0  # watch_jobs reads the saved state this often while no scheduler runs
SOCKET_POLL_S = 0.1  # and looks for a scheduler's socket this often

R = TypeVar("R", bound=Reply)

__all__ = ["TIMEOUT_S", "JobsNow", "SocketClient", "Stopped", "perform", "stop", "watch_jobs"]


class NotAnswering(GtuiError):
    """No scheduler listens on the queue's socket (any more)."""


class SocketClient:
    """Requests sent to the scheduler that runs the queue (JSON lines over its private Unix
    socket: gtui.core.control.server)."""

    live = True

    def __init__(self, queue: Path | QueuePaths) -> None:
        self.paths = queue if isinstance(queue, QueuePaths) else queue_paths(queue)
        self.queue_path = self.paths.queue

    def answers(self) -> bool:
        try:
            return ask(self.paths, Ping(), timeout=ANSWER_WAIT_S) is not None
        except GtuiError:
            return False

    async def do(self, req: Request[R]) -> R:
        """The scheduler's reply; GtuiError with its message when it says no, NotAnswering
        when none listens."""
        reply = await asyncio.to_thread(ask, self.paths, req)
        if reply is None:
            raise NotAnswering(f"no scheduler answers for {self.queue_path.name}")
        return reply


async def perform(paths: QueuePaths, req: Request[R]) -> tuple[R, bool]:
    """Do ``req`` through whoever owns the queue now: the running scheduler, else the store.
    Returns its reply and whether a scheduler did it.

    A scheduler that holds the lock but does not answer (still starting, or its socket
    failed) is waited for ANSWER_WAIT_S, then reported (exit 3); an add, which needs no lock,
    is then written into the file, which the scheduler takes in when it reads it again. One
    that listens but gives no answer (stopped, or too busy to take the request) is reported at
    once by the request (rpc.NoAnswer: not done, or not known), except to ``status``, which is
    then answered from the saved state, saying why in its scheduler's ``not_answering``. A
    request only a running scheduler can answer (``req.live_only``) is refused when none runs."""
    from gtui.core.control.handle import handle
    from gtui.core.control.offline import StoreClient
    from gtui.core.state.lock import QueueLock

    deadline = time.monotonic() + ANSWER_WAIT_S
    told = False
    while True:
        try:
            return await SocketClient(paths).do(req), True
        except NotAnswering:
            pass
        except NoAnswer as e:
            if not isinstance(req, Status):
                raise
            doc = await StoreClient(paths).status()
            doc["scheduler"]["not_answering"] = e.why
            return cast(R, StatusReply(doc)), False
        if isinstance(req, Status):  # reading needs no lock
            return cast(R, StatusReply(await StoreClient(paths).status())), False
        if req.live_only:
            raise NotAnswering(f"no scheduler runs {paths.queue.name}")
        pid = starting_pid(paths)
        if pid is not None and time.monotonic() < deadline:
            # A gtui is starting on the queue: the request is its to take once it answers
            # (an add written into the file now would reach it only a file-watch later).
            if not told:
                log.info(waiting_line(paths, pid))
                told = True
            await asyncio.sleep(START_POLL_S)
            continue
        try:
            reply = await handle(StoreClient(paths), req)
            assert isinstance(reply, req.reply)
            return cast(R, reply), False
        except LockedError:
            if time.monotonic() < deadline:
                await asyncio.sleep(0.2)
                continue
            pid = QueueLock(paths).holder()
            if pid is None:
                continue  # it just stopped: the store is ours now
            who = f"a gtui (pid {pid})" if pid else "a gtui"
            raise GtuiError(
                f"{who} runs {paths.queue.name} but does not answer on "
                f"{paths.socket}; try again in a moment",
                EXIT_LOCKED,
            ) from None


async def stop(paths: QueuePaths, *, kill: bool = False) -> Stopped | None:
    """Stop the scheduler that runs the queue, a headless ``gtui run`` or a dashboard's, and
    return once it has ended (the queue's lock is free); None when none ran.
    Its running jobs go on (the next scheduler re-adopts them), or with ``kill`` are killed
    first. A holder that does not answer on its socket: GtuiError, exit 3."""
    from gtui.core.state.lock import QueueLock

    lock = QueueLock(paths)
    deadline = time.monotonic() + ANSWER_WAIT_S
    while True:
        try:
            stopped = await SocketClient(paths).do(Stop(kill))
            break
        except NotAnswering:
            pass
        holder = await asyncio.to_thread(lock.holder)
        if holder is None:
            return None
        if time.monotonic() >= deadline:
            who = f"a gtui (pid {holder})" if holder else "a gtui"
            stop_it = f"; stop it with `kill {holder}`" if holder else ""
            raise GtuiError(
                f"{who} runs {paths.queue.name} but does not answer on {paths.socket}{stop_it}",
                EXIT_LOCKED,
            )
        await asyncio.sleep(0.2)  # still starting: its socket comes with its lock
    deadline = time.monotonic() + STOP_WAIT_S
    while await asyncio.to_thread(_still_runs, lock, stopped.pid):
        if time.monotonic() >= deadline:
            raise GtuiError(
                f"the scheduler (pid {stopped.pid}) of {paths.queue.name} was asked to stop, "
                f"and still runs the queue after {STOP_WAIT_S:g}s",
                EXIT_LOCKED,
            )
        await asyncio.sleep(0.05)
    return stopped


def _still_runs(lock: Any, pid: int | None) -> bool:
    """Whether the scheduler asked to stop still holds the queue; by its pid when the lock
    file cannot be read (a state directory made unreadable: the stop was still done)."""
    from gtui.core.state.lock import process_lives

    try:
        return lock.holder() is not None
    except OSError:
        if pid is None:
            raise
    return process_lives(pid)


@dataclass(frozen=True)
class JobsNow:
    """What :func:`watch_jobs` gives each time something changed."""

    # name -> the job as `gtui status --json` has it, in queue order; read it before the next
    # one comes (it is not a copy)
    jobs: dict[str, dict[str, Any]]
    changed: frozenset[str] | None  # the names that changed (gone ones too); None: all
    live: bool  # a scheduler runs the queue (else: its saved state, read every OFFLINE_POLL_S)
    pid: int | None  # that scheduler's
    paused: bool
    # events of the scheduler were lost before this (a watcher that fell far behind): a job's
    # change in it may have skipped states
    lost: bool = False


async def watch_jobs(
    paths: QueuePaths, *, offline_poll_s: float = OFFLINE_POLL_S, batch: bool = True
) -> AsyncGenerator[JobsNow, None]:
    """The queue's jobs now, then again each time they change, for as long as the caller
    reads: from the running scheduler's events (its ``watch`` stream), and while none runs from
    the saved state (each job as it really stands: gtui.core.state.status.settled), switching
    as schedulers come and go. A scheduler reached after the first view replays its events
    since that view (since the last one of its events seen, or since the saved state was last
    read), so a job that started and ended before it was reached still shows each state.
    Events that came together are given as one change, unless ``batch`` is False (a job's
    every state then shows, however fast it went on). Close it with ``contextlib.aclosing``."""
    from gtui.core.control.offline import status_from_store
    from gtui.core.control.remote import NotAnswering as NoWatch
    from gtui.core.control.remote import RemoteEngine, Since
    from gtui.core.state.status import job_dict

    jobs: dict[str, dict[str, Any]] = {}
    paused = False
    first = True
    was_live = False  # a scheduler's view was the last given: going offline is news
    since = Since()
    while True:
        remote = RemoteEngine(paths, reconnect_for=0.0, since=None if first else since)
        try:
            await remote.start()
        except NoWatch:
            began = time.monotonic()
            read_at = time.time()
            try:
                status = await asyncio.to_thread(status_from_store, paths.queue)
            except GtuiError:
                if first:
                    raise
                status = None  # a file being saved, or broken for a moment: read it again
            if status is not None:
                new = {j["name"]: j for j in status["jobs"]}
                changed = {n for n, j in new.items() if jobs.get(n) != j} | (set(jobs) - set(new))
                jobs, paused = new, bool(status["paused"])
                if first or changed or was_live:
                    yield JobsNow(jobs, None if first else frozenset(changed), False, None, paused)
                first = was_live = False
                since = Since(after=read_at)
            # A big queue's saved state takes a while to read: never more than a fifth of the
            # time. A scheduler's socket is looked for more often: the sooner it is reached,
            # the fewer of its events it has to replay.
            await _socket_or_sleep(paths, max(offline_poll_s, 4 * (time.monotonic() - began)))
            continue
        inbox: asyncio.Queue[Event] = asyncio.Queue()
        unsubscribe = remote.subscribe(inbox.put_nowait)
        runner = asyncio.create_task(remote.run())
        try:
            if not first:
                for group in [remote.replayed] if batch else [[e] for e in remote.replayed]:
                    jobs, paused, update = _apply(jobs, paused, group)
                    if update is not None:
                        yield JobsNow(jobs, update, True, remote.pid, paused, remote.lost)
            new = {v.spec.name: job_dict(v) for v in remote.jobs()}
            changed = {n for n, j in new.items() if jobs.get(n) != j} | (set(jobs) - set(new))
            jobs, paused = new, remote.paused
            yield JobsNow(
                jobs,
                None if first else frozenset(changed),
                True,
                remote.pid,
                paused,
                remote.lost and not first,
            )
            first, was_live = False, True
            while True:
                getter = asyncio.create_task(inbox.get())
                await asyncio.wait({getter, runner}, return_when=asyncio.FIRST_COMPLETED)
                events = [getter.result()] if getter.done() else []
                getter.cancel()
                while not inbox.empty():
                    events.append(inbox.get_nowait())
                if not events:  # the scheduler went away, all it sent is taken, none answered
                    break
                for group in [events] if batch else [[e] for e in events]:
                    jobs, paused, update = _apply(jobs, paused, group)
                    if update is not None:
                        yield JobsNow(jobs, update, True, remote.pid, paused)
        finally:
            # Every event it sent was taken: a watcher dropped for falling behind is replayed
            # the rest by the same scheduler, and another replays all it kept (it started
            # after this one ended).
            since = Since(remote.pid, remote.seq) if remote.seq is not None else Since()
            unsubscribe()
            await remote.shutdown()
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner


async def _socket_or_sleep(paths: QueuePaths, seconds: float) -> None:
    """Sleep ``seconds``, or less once a new control socket of the queue is there (not the one
    a killed scheduler left)."""

    def socket_now() -> tuple[int, int] | None:
        try:
            st = paths.socket.stat()
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns

    was = await asyncio.to_thread(socket_now)
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(SOCKET_POLL_S, left))
        now = await asyncio.to_thread(socket_now)
        if now is not None and now != was:
            return


def _apply(
    jobs: dict[str, dict[str, Any]], paused: bool, events: list[Event]
) -> tuple[dict[str, dict[str, Any]], bool, frozenset[str] | None]:
    """``events`` applied to the jobs: the jobs, paused, and what changed (None: nothing)."""
    from gtui.core.state.status import job_dict

    changed: set[str] = set()
    was_paused = paused
    for event in events:
        if isinstance(event, JobChanged):
            name = event.job.spec.name
            jobs[name] = job_dict(event.job)
            changed.add(name)
        elif isinstance(event, JobRemoved):
            jobs.pop(event.name, None)
            changed.add(event.name)
        elif isinstance(event, QueueChanged):
            new = {v.spec.name: job_dict(v) for v in event.jobs}
            changed |= {n for n, j in new.items() if jobs.get(n) != j}
            changed |= set(jobs) - set(new)
            jobs = new
        elif isinstance(event, QueuePaused):
            paused = event.paused
    if changed or paused != was_paused:
        return jobs, paused, frozenset(changed)
    return jobs, paused, None
