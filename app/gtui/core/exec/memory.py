"""The memory executor: jobs that live in the event loop, with no OS process.

It exists to prove that :class:`gtui.core.exec.base.Executor` is all the scheduler needs, and to
let the tests and the simulator run thousands of jobs in a blink. A job is a :class:`Script` (how
long it takes, how it ends, what it prints), made from the launch request by a *program*; the
default program reads the command as a tiny shell (``echo hi; sleep 0.2 && exit 3``).

Time is kept with the monotonic clock, so the executor also works without a running loop (a
launch from plain code) and across loops: an instance outlives an engine, and a second engine
given it re-adopts the jobs that still run, which is how the tests simulate a restart. Pids come
from a counter that starts at 2**30, above any real pid, so nothing here can signal a process.
The output is written to a real log file at launch, so the log readers see what they would see.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING

from gtui.core.exec import runner
from gtui.core.exec.base import (
    ExitStatus,
    Found,
    Handle,
    LaunchError,
    LaunchRequest,
    file_size,
    read_file_range,
)

if TYPE_CHECKING:
    from gtui.core.exec.base import Executor

__all__ = ["MemoryExecutor", "Script", "default_program"]

_FIRST_PID = 2**30  # above pid_max (at most 2**22): never a real process
_FIRST_PORT = 20000
_UNKNOWN = ExitStatus(None, None)


@dataclass(frozen=True)
class Script:
    """What a memory job does: runs ``duration_s`` seconds, prints ``output``, then ends with
    ``signal`` if set, else ``exit_code`` (None for both: an end nothing can explain)."""

    duration_s: float
    exit_code: int | None = 0
    signal: int | None = None
    output: str = ""

    @property
    def status(self) -> ExitStatus:
        if self.signal is not None:
            return ExitStatus(None, self.signal)
        return ExitStatus(self.exit_code, None)


def default_program(req: LaunchRequest) -> Script:
    """Read ``req.cmd`` as statements split by ``;`` or ``&&``: ``sleep X`` (seconds),
    ``echo TEXT`` (a line of output) and ``exit N`` (ends the script); the rest is ignored, so
    any real command also "runs", instantly and successfully."""
    duration, code = 0.0, 0
    output: list[str] = []
    for stmt in re.split(r";|&&", req.cmd):
        word, _, rest = stmt.strip().partition(" ")
        rest = rest.strip()
        if word == "sleep":
            try:
                duration += max(0.0, float(rest))
            except ValueError:
                pass
        elif word == "echo":
            if len(rest) >= 2 and rest[0] == rest[-1] and rest[0] in "'\"":
                rest = rest[1:-1]
            output.append(rest + "\n")
        elif word == "exit":
            code = int(rest) if rest.lstrip("-").isdigit() else 0
            break
    return Script(duration, code, None, "".join(output))


@dataclass(eq=False)
class _Job:
    """One launched attempt. ``deadline`` (monotonic) while it runs; ``left`` while suspended."""

    req: LaunchRequest
    handle: Handle
    script: Script
    deadline: float
    left: float | None = None  # not None: suspended, with this many seconds to go
    status: ExitStatus | None = None  # not None: ended
    timer: asyncio.TimerHandle | None = None
    timer_loop: asyncio.AbstractEventLoop | None = None
    waiters: list[asyncio.Future[None]] = field(default_factory=list)


class MemoryExecutor:
    """An :class:`~gtui.core.exec.base.Executor` whose jobs are timers in the event loop."""

    name = "memory"

    def __init__(self, program: Callable[[LaunchRequest], Script] | None = None) -> None:
        self._program = program or default_program
        self._jobs: dict[int, _Job] = {}
        self._pids = count(_FIRST_PID)
        self._ports = count(_FIRST_PORT)
        self._left_behind: dict[str, list[int]] = {}
        self.launched: list[LaunchRequest] = []  # every request, in order, for the tests

    # -- the Executor interface -------------------------------------------------------------

    def launch(self, req: LaunchRequest) -> Handle:
        """Start a job; fails as the local executor does on a bad cwd or an unwritable log."""
        if not req.cwd.is_dir():
            what = "is not a directory" if req.cwd.exists() else "does not exist"
            raise LaunchError(
                f"job {req.name}: cwd {req.cwd} {what}; fix its cwd in the queue file"
            )
        script = self._program(req)
        try:
            log_path = _write_new_log(req, script.output)
        except OSError as e:
            raise LaunchError(
                f"job {req.name}: cannot create its log in {req.log_dir}: {e.strerror or e}"
            ) from e
        handle = Handle(
            next(self._pids),
            time.time(),
            log_path,
            self.status_path(req.run_dir, req.name, req.attempt),
        )
        job = _Job(req, handle, script, time.monotonic() + script.duration_s)
        self._jobs[handle.pid] = job
        self.launched.append(req)
        self._arm(job)
        return handle

    async def wait(self, handle: Handle) -> ExitStatus:
        """The job's end; unknown at once for a pid this executor never gave out."""
        job = self._jobs.get(handle.pid)
        if job is None:
            return _UNKNOWN
        while job.status is None:
            self._settle(job)
            if job.status is not None:
                break
            loop = asyncio.get_running_loop()
            if job.left is None and job.timer_loop is not loop:
                self._arm(job)  # launched with no loop, or under an engine's loop now gone
            done: asyncio.Future[None] = loop.create_future()
            job.waiters.append(done)
            await done
        return job.status

    async def kill(
        self,
        handle: Handle,
        grace_s: float,
        on_signalled: Callable[[], None] | None = None,
    ) -> None:
        """A memory job dies of the TERM at once (suspended or not); the grace is not needed."""
        job = self._jobs.get(handle.pid)
        if job is not None:
            self._settle(job)
            if job.status is None:
                self._end(job, ExitStatus(None, 15))
        if on_signalled is not None:
            on_signalled()

    def suspend(self, handle: Handle) -> None:
        """Stop the clock: remember the time left and drop the timer."""
        job = self._running(handle.pid)
        if job is not None and job.left is None:
            job.left = max(0.0, job.deadline - time.monotonic())
            self._cancel_timer(job)

    def signal(self, handle: Handle, signum: int) -> None:
        """A job in memory traps nothing: a warning changes nothing (its stop is a kill)."""

    def resume(self, handle: Handle) -> None:
        """Restart the clock with the time left at :meth:`suspend`."""
        job = self._running(handle.pid)
        if job is not None and job.left is not None:
            job.deadline = time.monotonic() + job.left
            job.left = None
            self._arm(job)

    def alive(self, handle: Handle) -> bool:
        job = self._running(handle.pid)
        return (
            job is not None
            and abs(job.handle.create_time - handle.create_time) <= runner.CREATE_TIME_TOLERANCE_S
        )

    def exit_status(self, handle: Handle) -> ExitStatus | None:
        job = self._jobs.get(handle.pid)
        if job is None:
            return None
        self._settle(job)
        return job.status

    def find(self, token: str) -> Found | None:
        if not token:
            return None
        for job in self._live():
            if job.req.env.get("GTUI_TOKEN") == token:
                return Found(job.handle.pid, job.handle.create_time)
        return None

    def leftovers(self, tokens: Collection[str]) -> dict[str, list[int]]:
        return {t: list(p) for t, p in self._left_behind.items() if t in tokens and p}

    def gpu_processes(
        self,
        handles: Mapping[str, Handle],
        on_gpu: Mapping[int, list[tuple[int, int | None]]],
    ) -> dict[str, list[tuple[int, int, int]]]:
        """A memory job has no process tree: its only process is its own pid."""
        if not on_gpu:
            return {}
        return {
            name: [(h.pid, gpu, mib or 0) for gpu, mib in on_gpu.get(h.pid, [])]
            for name, h in handles.items()
        }

    def host_memory_mib(self, handles: Mapping[str, Handle]) -> dict[str, int]:
        """A memory job holds no host memory to measure: no host peak is recorded."""
        return {}

    def log_size(self, path: str) -> int | None:
        return file_size(path)

    def read_log(self, path: str, offset: int, limit: int) -> bytes:
        return read_file_range(path, offset, limit)

    def status_path(self, run_dir: Path, name: str, attempt: int) -> Path:
        """Where the local executor would keep it (statuses here stay in memory)."""
        return runner.status_path_for(run_dir, name, attempt)

    def free_port(self) -> int:
        return next(self._ports)

    # -- for the tests ------------------------------------------------------------------------

    def running(self) -> list[str]:
        """Names of the jobs that have not ended (suspended ones included), in launch order."""
        return [job.req.name for job in self._live()]

    def finish(self, pid_or_name: int | str, exit_code: int = 0) -> None:
        """End a running job now, by pid or by name (the latest such); KeyError if none."""
        for job in reversed(list(self._live())):
            if pid_or_name in (job.handle.pid, job.req.name):
                self._end(job, ExitStatus(exit_code, None))
                return
        raise KeyError(f"no running memory job {pid_or_name!r}")

    def leave_behind(self, token: str, pids: Iterable[int]) -> None:
        """Make :meth:`leftovers` report ``pids`` for ``token`` (the "left processes" warning)."""
        self._left_behind[token] = list(pids)

    # -- the clock -----------------------------------------------------------------------------

    def _live(self) -> Iterable[_Job]:
        for job in list(self._jobs.values()):
            self._settle(job)
            if job.status is None:
                yield job

    def _running(self, pid: int) -> _Job | None:
        job = self._jobs.get(pid)
        if job is None:
            return None
        self._settle(job)
        return job if job.status is None else None

    def _settle(self, job: _Job) -> None:
        """End a job whose time is up though no timer fired (no loop ran, or it went away)."""
        if job.status is None and job.left is None and time.monotonic() >= job.deadline:
            self._end(job, job.script.status)

    def _arm(self, job: _Job) -> None:
        self._cancel_timer(job)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: _settle and wait go by the deadline
        delay = max(0.0, job.deadline - time.monotonic())
        job.timer = loop.call_later(delay, self._time_up, job)
        job.timer_loop = loop

    def _time_up(self, job: _Job) -> None:
        # The timer is the word: the loop may fire it a clock tick before the deadline.
        job.timer = None
        if job.status is None and job.left is None:
            self._end(job, job.script.status)

    def _cancel_timer(self, job: _Job) -> None:
        if job.timer is not None:
            job.timer.cancel()
        job.timer, job.timer_loop = None, None

    def _end(self, job: _Job, status: ExitStatus) -> None:
        job.status, job.left = status, None
        self._cancel_timer(job)
        waiters, job.waiters = job.waiters, []
        for done in waiters:
            if not done.done() and not done.get_loop().is_closed():
                done.set_result(None)


def _write_new_log(req: LaunchRequest, output: str) -> Path:
    """Create the attempt's log, never overwriting one (``<name>.<attempt>[.N].log``)."""
    req.log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    base = f"{runner.safe_name(req.name)}.{req.attempt}"
    names = [f"{base}.log"] + [f"{base}.{i}.log" for i in range(1, 10_000)]
    for name in names:
        path = req.log_dir / name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
            f.write(output)
        return path
    raise LaunchError(f"{req.log_dir}: too many logs for job {req.name!r} attempt {req.attempt}")


if TYPE_CHECKING:
    _check: Executor = MemoryExecutor()
