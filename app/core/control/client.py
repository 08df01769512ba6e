"""One client API for every screen: the typed operations a dashboard or a command uses.

Three implementations, one shape:

- the Engine itself, in-process (the dashboard that runs the scheduler as a worker);
- :class:`SocketClient`, over the control socket, to a scheduler that runs elsewhere (a
  headless ``gtui run``, a dashboard in another tmux session);
- :class:`gtui.core.control.offline.StoreClient`, on the saved state when no scheduler runs.

:func:`connect` picks the socket when a scheduler answers, else the store. Events (what
changed) come from ``subscribe`` on the in-process engine; a remote screen reads ``status``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from gtui.core.control.server import call
from gtui.core.errors import EXIT_LOCKED, GtuiError, LockedError
from gtui.core.paths import QueuePaths, queue_paths

# How long a scheduler that holds the lock may take to answer on its socket.
ANSWER_WAIT_S = 5.0
TIMEOUT_S = 60.0
KILL_TIMEOUT_S = 3600.0  # kill --wait waits for TERM, then kill_grace, then KILL


class Client(Protocol):
    """The operations every front end uses; each raises GtuiError with a message for a person
    (an unknown job, a job in the wrong state) and then has changed nothing."""

    queue_path: Path

    async def status(self) -> dict[str, Any]: ...
    async def kill(self, names: Sequence[str], *, wait: bool = True) -> None: ...
    async def pause(self, names: Sequence[str]) -> None: ...
    async def resume(self, names: Sequence[str]) -> None: ...
    async def retry(self, names: Sequence[str]) -> None: ...
    async def pause_queue(self) -> None: ...
    async def resume_queue(self) -> None: ...
    async def add(self, fields: dict[str, object]) -> str: ...


class NotAnswering(GtuiError):
    """No scheduler listens on the queue's socket (any more)."""


class SocketClient:
    """The operations, sent to the scheduler that runs the queue (JSON lines over its
    private Unix socket: gtui.core.control.server)."""

    live = True

    def __init__(self, queue: Path | QueuePaths) -> None:
        self.paths = queue if isinstance(queue, QueuePaths) else queue_paths(queue)
        self.queue_path = self.paths.queue

    def answers(self) -> bool:
        try:
            return call(self.paths, "ping", timeout=ANSWER_WAIT_S) is not None
        except GtuiError:
            return False

    async def _call(self, op: str, timeout: float = TIMEOUT_S, **kw: Any) -> dict[str, Any]:
        reply = await asyncio.to_thread(call, self.paths, op, timeout=timeout, **kw)
        if reply is None:
            raise NotAnswering(f"no scheduler answers for {self.queue_path.name}")
        return reply

    async def status(self) -> dict[str, Any]:
        reply = await self._call("status")
        status = reply.get("status")
        if not isinstance(status, dict):
            raise GtuiError("the scheduler sent a status gtui cannot read")
        return status

    async def kill(self, names: Sequence[str], *, wait: bool = True) -> None:
        kw: dict[str, Any] = {"names": list(names)}
        if not wait:
            kw["wait"] = False
        await self._call("kill", KILL_TIMEOUT_S if wait else TIMEOUT_S, **kw)

    async def pause(self, names: Sequence[str]) -> None:
        await self._call("pause", names=list(names))

    async def resume(self, names: Sequence[str]) -> None:
        await self._call("resume", names=list(names))

    async def retry(self, names: Sequence[str]) -> None:
        await self._call("retry", names=list(names))

    async def pause_queue(self) -> None:
        await self._call("pause_queue")

    async def resume_queue(self) -> None:
        await self._call("resume_queue")

    async def add(self, fields: dict[str, object]) -> str:
        return str((await self._call("add", fields=fields)).get("name", ""))


Op = Literal["kill", "pause", "resume", "retry", "pause_queue", "resume_queue", "status"]


async def perform(paths: QueuePaths, op: Op, *args: Any, **kw: Any) -> tuple[Any, bool]:
    """Do ``op`` through whoever owns the queue now: the running scheduler, else the store.
    Returns the result and whether a scheduler did it.

    A scheduler that holds the lock but does not answer (still starting, or its socket
    failed) is waited for ANSWER_WAIT_S, then reported (exit 3)."""
    from gtui.core.control.offline import StoreClient
    from gtui.core.state.lock import QueueLock

    deadline = time.monotonic() + ANSWER_WAIT_S
    while True:
        client: Client = SocketClient(paths)
        try:
            return await getattr(client, op)(*args, **kw), True
        except NotAnswering:
            pass
        if op == "status":  # reading needs no lock
            client = StoreClient(paths)
            return await client.status(), False
        try:
            client = StoreClient(paths)
            return await getattr(client, op)(*args, **kw), False
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
