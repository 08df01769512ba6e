"""gtui from Python: a script or a notebook adds jobs to a queue, reads how they stand, waits for
them, reads their logs, and kills, pauses, resumes or retries them.

    import gtui

    name = gtui.add("q.toml", "python train.py --lr 3e-4", gpus=1, mem="20G")
    gtui.wait("q.toml", name)          # {"train": "done"}
    print(gtui.log("q.toml", name))

Each function takes the queue file's path and does what the command of the same name does
(``gtui add / status / wait / log / kill ...``), through the same client: a request of the
control protocol (gtui.core.control.protocol) to the scheduler that runs the queue (``gtui
run``, or a dashboard), or, with none running, on the queue's saved state, as the commands do.
Job names are exact (no globs). A refusal (an unknown job, a job in the wrong state) raises
:class:`GtuiError` with the message the command would print, and then nothing was done.

The functions block; inside a running event loop (a notebook's) they run on a thread of their
own, so a cell calls them as they are.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from gtui.core.control.client import perform, watch_jobs
from gtui.core.control.client import stop as stop_scheduler
from gtui.core.control.protocol import (
    Add,
    Kill,
    Pause,
    PauseQueue,
    Request,
    Resume,
    ResumeQueue,
    Retry,
    Status,
)
from gtui.core.errors import GtuiError
from gtui.core.model import FINAL_STATES
from gtui.core.paths import QueuePaths, queue_paths

T = TypeVar("T")
ENDED = frozenset(s.value for s in FINAL_STATES)

__all__ = [
    "GtuiError",
    "add",
    "kill",
    "log",
    "pause",
    "resume",
    "retry",
    "status",
    "stop",
    "wait",
]


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """``coro`` run to its end: here, or on a thread when this one already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _paths(queue: str | Path) -> QueuePaths:
    paths = queue_paths(queue)
    if not paths.queue.exists():
        raise GtuiError(f"{queue}: no such queue file")
    return paths


def _do(queue: str | Path, req: Request[Any]) -> Any:
    reply, _live = _run(perform(_paths(queue), req))
    return reply


def add(
    queue: str | Path,
    cmd: str,
    *,
    name: str | None = None,
    gpus: int | None = None,
    mem: str | None = None,
    after: list[str] | None = None,
    cwd: str | Path | None = None,
    **keys: object,
) -> str:
    """Append a job to the queue file and return its name (given, or made from ``cmd``).
    ``cmd`` is a shell command line; ``keys`` are any other keys of a ``[[jobs]]`` table
    (``priority``, ``retries``, ``timeout``, ``env``, ...). Without ``cwd`` the job runs in
    this process's working directory, as with ``gtui add``. A running scheduler checks and
    appends it (and may start it at once); with none, the file is written here."""
    from gtui.commands.add_job import job_cwd

    paths = _paths(queue)
    fields: dict[str, object] = {"cmd": cmd, **keys}
    given = {"name": name, "gpus": gpus, "mem": mem, "after": after}
    fields.update({k: v for k, v in given.items() if v is not None})
    where = job_cwd(paths, str(cwd) if cwd is not None else None)
    if where is not None:
        fields["cwd"] = where
    reply, _live = _run(perform(paths, Add(fields)))
    return reply.name or str(fields.get("name", ""))


def status(queue: str | Path) -> dict[str, Any]:
    """The queue now, as ``gtui status --json`` prints it: ``jobs`` (each with its ``name``,
    ``state``, ``reason``, ``gpus``, ``log``, ...), ``paused``, ``scheduler``, ``gpus``."""
    doc: dict[str, Any] = _do(queue, Status()).status
    return doc


def kill(queue: str | Path, *names: str, wait: bool = True) -> list[str]:
    """Kill the jobs (a waiting one is only taken out of the queue). ``wait=False`` returns
    once SIGTERM is sent, the SIGKILL after the grace following there. Returns the names."""
    return list(_do(queue, Kill(names, wait)).names)


def pause(queue: str | Path, *names: str) -> list[str]:
    """Hold the waiting jobs and suspend the running ones; with no names, pause the queue
    (nothing new starts). Returns the names."""
    if not names:
        _do(queue, PauseQueue())
        return []
    return list(_do(queue, Pause(names)).names)


def resume(queue: str | Path, *names: str) -> list[str]:
    """Undo ``pause``: of the jobs, or with no names of the queue. Returns the names."""
    if not names:
        _do(queue, ResumeQueue())
        return []
    return list(_do(queue, Resume(names)).names)


def retry(queue: str | Path, *names: str) -> list[str]:
    """Queue jobs that ended (failed, killed, blocked, unknown) again. Returns the names."""
    return list(_do(queue, Retry(names)).names)


def wait(queue: str | Path, *names: str, timeout: float | None = None) -> dict[str, str]:
    """Block until the jobs (no names: every job of the queue) have ended, and return the state
    each ended in (``done``, ``failed``, ``killed``, ``blocked``, ``unknown``; ``removed`` for
    one taken out of the queue meanwhile). With no scheduler running it waits for one to start.
    TimeoutError after ``timeout`` seconds."""
    return _run(_wait(_paths(queue), names, timeout))


async def _wait(paths: QueuePaths, names: tuple[str, ...], timeout: float | None) -> dict[str, str]:
    deadline = None if timeout is None else time.monotonic() + timeout
    seen: set[str] = set()
    async with contextlib.aclosing(watch_jobs(paths)) as updates:
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                now = await asyncio.wait_for(anext(updates), left)
            except TimeoutError:
                raise TimeoutError(
                    f"jobs of {paths.queue.name} not ended after {timeout}s"
                ) from None
            if not seen:
                unknown = [n for n in names if n not in now.jobs]
                if unknown:
                    raise GtuiError(f"no job named {unknown[0]!r} in {paths.queue.name}")
            targets = names or tuple(now.jobs)
            seen.update(targets)
            states = {n: str(now.jobs[n]["state"]) if n in now.jobs else "removed" for n in targets}
            if all(s in ENDED or s == "removed" for s in states.values()):
                return states


def log(queue: str | Path, name: str, *, attempt: int | None = None) -> str:
    """The job's log (its latest attempt's, or ``attempt``'s) as text, the job's own bytes
    decoded as UTF-8; "" before its first start."""
    from gtui.commands._logs import attempt_log

    paths = _paths(queue)
    doc = status(queue)
    job = next((j for j in doc["jobs"] if j["name"] == name), None)
    if job is None:
        raise GtuiError(f"no job named {name!r} in {paths.queue.name}")
    path = attempt_log(paths, job, attempt)
    if path is None:
        return ""
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise GtuiError(f"the log {path} is gone (deleted or moved)") from None


def stop(queue: str | Path, *, kill: bool = False) -> bool:
    """Stop the scheduler that runs the queue (its jobs go on, or with ``kill`` are killed
    first) and return once it has ended; False when none ran."""
    return _run(stop_scheduler(_paths(queue), kill=kill)) is not None
