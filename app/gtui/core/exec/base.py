"""The executor seam: everything that touches a job's processes, behind one small interface.

The scheduler decides *what* runs *where* and records it; an executor makes it so. Placement,
retries and state transitions never see a pid: they hold a :class:`Handle` the executor gave
them (saved in the job's record so that a restarted scheduler can hand it back) and ask the
executor to wait for it, kill it, suspend it, or say what it left behind.

Two executors exist: :class:`gtui.core.exec.local.LocalExecutor` (real processes on this
machine, the product) and :class:`gtui.core.exec.memory.MemoryExecutor` (jobs that live in the
event loop, for the tests and the simulator). A cluster executor (Ray) plugs in here.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from gtui.core.errors import GtuiError
from gtui.core.joblog import read_range
from gtui.core.model import JobRecord

__all__ = [
    "UNKNOWN",
    "Executor",
    "ExitStatus",
    "Found",
    "Handle",
    "LaunchDeferred",
    "LaunchError",
    "LaunchRequest",
    "handle_of",
]


class LaunchError(GtuiError):
    """A job could not be started: missing cwd, unwritable log dir, full disk, no bash."""


class LaunchDeferred(LaunchError):
    """A job could not be started *now*: no process could be made (EAGAIN: the user's process
    limit, ENOMEM). Nothing ran; the scheduler tries again later, spending no retry."""


# A fork or a thread's start that fails with these is a passing shortage, not the job's fault.
TEMPORARY_ERRNOS = frozenset({errno.EAGAIN, errno.ENOMEM})


@dataclass(frozen=True)
class LaunchRequest:
    """What the scheduler asks an executor to start: one attempt of one job."""

    name: str
    attempt: int
    cmd: str  # placeholders already substituted
    cwd: Path
    env: Mapping[str, str]  # added on top of os.environ
    log_dir: Path
    run_dir: Path  # where the exit-status file goes (QueuePaths.run_dir)
    # The placement's GPUs (pool indices) and the cluster node they are on: a cluster executor
    # launches there; the local executor needs neither.
    gpus: tuple[int, ...] = ()
    node: str | None = None
    # enforce = true: limit the job to these host cores and memory (exec/limits.py), where
    # the machine allows it; None: no limit of that kind.
    limit_cpus: int | None = None
    limit_ram_mib: int | None = None


@dataclass(frozen=True)
class Handle:
    """What an executor hands back at launch. The job's record keeps each field (pid, create
    time, log, status file, node) so that a restarted scheduler can rebuild it (handle_of):
    renaming one breaks the re-adoption of jobs saved by an earlier version."""

    pid: int
    create_time: float
    log_path: Path
    status_path: Path
    node: str | None = None  # a cluster executor's node ("" / None: this machine)


@dataclass(frozen=True)
class ExitStatus:
    """How a job ended. Both None: unknown (the process is gone and left no status file).
    ``lost``: why nobody can know (its cluster node was declared dead): failed, retried.
    ``not_started``: why the job never ran though its wrapper did (it could not fork it, at
    the user's process limit): no retry spent, tried again later.
    ``ended_at``: when it ended by its own record (the wrapper's status file), None where
    nothing says: a scheduler that noticed late (stopped, swapped out) must not take the moment
    it noticed for the end. Not part of equality: it says when, not how."""

    exit_code: int | None
    signal: int | None
    lost: str | None = None
    not_started: str | None = None
    ended_at: float | None = field(default=None, compare=False)

    @property
    def unknown(self) -> bool:
        return (
            self.exit_code is None
            and self.signal is None
            and self.lost is None
            and self.not_started is None
        )

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


UNKNOWN = ExitStatus(None, None)


@dataclass(frozen=True)
class Found:
    """A job's process found again by its launch token after a crash (its pid was not saved)."""

    pid: int
    create_time: float
    node: str | None = None  # the node that runs it (a cluster), None on one server


class Executor(Protocol):
    """What the scheduler needs of a place that runs jobs."""

    name: str  # "local", "memory", ...

    def launch(self, req: LaunchRequest) -> Handle:
        """Start a job (fast: called on the event loop). Raises LaunchError with a message for
        a person (a missing cwd, a full disk)."""
        ...

    async def wait(self, handle: Handle) -> ExitStatus:
        """Return when the job has ended, with how it ended (unknown when nothing says)."""
        ...

    async def kill(
        self,
        handle: Handle,
        grace_s: float,
        on_signalled: Callable[[], None] | None = None,
    ) -> None:
        """Stop the job and everything it started: TERM, then KILL after ``grace_s``.
        ``on_signalled`` is called once TERM is sent."""
        ...

    def suspend(self, handle: Handle) -> None:
        """Freeze the job (its GPU memory stays held)."""
        ...

    def signal(self, handle: Handle, signum: int) -> None:
        """Send ``signum`` to the job's processes (a warning it may trap: save and exit)."""
        ...

    def resume(self, handle: Handle) -> None:
        """Continue a job that :meth:`suspend` froze."""
        ...

    def alive(self, handle: Handle) -> bool:
        """Whether the very job of ``handle`` still runs (a reused id does not count)."""
        ...

    def exit_status(self, handle: Handle) -> ExitStatus | None:
        """How a job that ended while nobody watched ended, if it left word; else None."""
        ...

    def find(self, token: str) -> Found | None:
        """The job launched with ``token`` (GTUI_TOKEN), if it still runs. Raises GtuiError
        where a place that may run it cannot be asked (a cluster node that does not answer):
        the job must then not be taken for never started."""
        ...

    def leftovers(self, tokens: Collection[str]) -> dict[str, list[int]]:
        """Processes that ended jobs left running, by token (blocking: run it in a thread)."""
        ...

    def gpu_processes(
        self,
        handles: Mapping[str, Handle],
        on_gpu: Mapping[int, list[tuple[int, int | None]]],
    ) -> dict[str, list[tuple[int, int, int]]]:
        """Which of the processes the GPUs report (pid -> [(GPU, MiB)]) belong to which job:
        job name -> [(pid, GPU, MiB)]. Gives each job's real memory and the isolation check."""
        ...

    def host_memory_mib(self, handles: Mapping[str, Handle]) -> dict[str, int]:
        """Resident host memory of each job's processes now, MiB (its host peak): job name ->
        MiB. An executor that cannot measure it returns {} (no host peak is recorded)."""
        ...

    def log_size(self, path: str) -> int | None:
        """The size of a job's log in bytes (None: not there)."""
        ...

    def read_log(self, path: str, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes of a job's log from byte ``offset``."""
        ...

    def status_path(self, run_dir: Path, name: str, attempt: int) -> Path:
        """Where the attempt's exit status will be kept (saved before the launch)."""
        ...

    def free_port(self) -> int:
        """A TCP port for the job's {port} placeholder, free where the job will run."""
        ...


def handle_of(rec: JobRecord) -> Handle:
    """The handle a record keeps, for the executor that launched it (after a restart too)."""
    return Handle(
        pid=int(rec.pid or 0),
        create_time=float(rec.create_time or 0.0),
        log_path=Path(rec.log or os.devnull),
        status_path=Path(rec.status_file or os.devnull),
        node=rec.node,
    )


def file_size(path: str) -> int | None:
    """The size of a log kept in a file on this machine (None: not there)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return None


T = TypeVar("T")


def start_thread(target: Callable[[], object], name: str) -> bool:
    """Start ``target`` in a daemon thread; False where no thread can be made now (the user's
    process limit counts threads: a job forking up to it leaves the scheduler none). The
    caller goes on without one, never with the RuntimeError."""
    try:
        threading.Thread(target=target, name=name, daemon=True).start()
    except RuntimeError:  # "can't start new thread": pthread_create's EAGAIN
        return False
    return True


def off_loop(fn: Callable[[], T]) -> asyncio.Future[T]:
    """``fn()`` (a log read that a hung disk may block for ever) in a daemon thread of its own,
    its result a future of the running loop. Not ``asyncio.to_thread``: the default executor
    has a few threads (CPU count + 4) that stuck reads would fill, leaving every other
    ``to_thread`` waiting, and its threads are joined at exit, so gtui could not quit. Where no
    thread can be started (see :func:`start_thread`), ``fn`` runs here, on the loop: a read
    that may block beats a scheduler that dies."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()

    def settle(value: T | None, error: BaseException | None) -> None:
        if fut.done():  # cancelled: whoever waited has gone on
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(value)  # type: ignore[arg-type]

    def run() -> None:
        value: T | None = None
        error: BaseException | None = None
        try:
            value = fn()
        except BaseException as e:  # handed to the awaiting side, as to_thread does
            error = e
        with contextlib.suppress(RuntimeError):  # the loop closed while the read was stuck
            loop.call_soon_threadsafe(settle, value, error)

    if not start_thread(run, "gtui-read"):
        value: T | None = None
        error: BaseException | None = None
        try:
            value = fn()
        except Exception as e:
            error = e
        settle(value, error)
    return fut


async def in_thread(fn: Callable[[], T]) -> T:
    """``await asyncio.to_thread(fn)`` for a short, read-only ``fn`` (a /proc walk), run here
    where no thread can be started. Only for what may run twice: the default executor keeps a
    call whose thread failed to start, and a later thread may still run it."""
    try:
        fut = asyncio.get_running_loop().run_in_executor(None, fn)
    except RuntimeError:  # "can't start new thread"
        return fn()
    return await fut


# Up to ``limit`` bytes of a log on this machine from byte ``offset`` (b"": unreadable): what
# an executor's ``read_log`` answers, read by gtui.core.joblog, the one reader of a job's log.
read_file_range = read_range
