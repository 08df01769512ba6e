"""Each request of the protocol (gtui.core.control.protocol), done: one ``match``, one case per
request, on whoever owns the queue now.

The owner is the Engine (a scheduler's control socket, gtui.core.control.server) or, with no
scheduler running, the store client (gtui.core.control.offline, through
gtui.core.control.client.perform): both have the methods of :class:`Operations`, the engine's
command names, which a dashboard calls as they are (gtui.ui.port).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from gtui.core.control.protocol import (
    STATUS_HEAD,
    Acted,
    Add,
    AddMany,
    Cleared,
    ClearQuarantine,
    Done,
    Edit,
    Kill,
    Move,
    Named,
    Pause,
    PauseQueue,
    Ping,
    Pong,
    Preempt,
    Reload,
    Remove,
    Reply,
    Request,
    Resume,
    ResumeQueue,
    Retry,
    Status,
    Stop,
    Stopped,
    Watch,
    Where,
)
from gtui.core.errors import GtuiError


class Operations(Protocol):
    """The commands a request is done by; each raises GtuiError with a message for a person
    (an unknown job, a job in the wrong state) and then has changed nothing."""

    queue_path: Path

    async def status(self) -> dict[str, Any]: ...
    async def kill(self, names: Sequence[str], *, wait: bool = True) -> None: ...
    async def pause(self, names: Sequence[str]) -> None: ...
    async def resume(self, names: Sequence[str]) -> None: ...
    async def retry(self, names: Sequence[str]) -> None: ...
    async def preempt(self, name: str, *, dry_run: bool = False) -> list[str]: ...
    async def pause_queue(self) -> None: ...
    async def resume_queue(self) -> None: ...
    async def reload(self) -> None: ...
    async def add(self, fields: dict[str, object]) -> str: ...
    async def add_many(self, many: Sequence[dict[str, object]]) -> list[str]: ...
    async def edit(self, name: str, fields: dict[str, object]) -> None: ...
    async def remove(self, name: str) -> None: ...
    async def move(self, name: str, where: Where) -> None: ...
    async def clear_quarantine(self, gpus: Sequence[int] | None = None) -> list[int]: ...
    async def stop(self, *, kill: bool = False) -> None: ...


class Owner(Operations, Protocol):
    """An owner that also writes its status as JSON text in pieces (a scheduler: a status of
    100,000 jobs is sent as it is made, never built as one dict first)."""

    def status_chunks(self) -> Iterator[str]: ...


class RawReply:
    """A reply already written as JSON text, in pieces sent one at a time as they are made
    (a status of 100,000 jobs: see sched/statustext.py)."""

    def __init__(self, pieces: Iterable[str]) -> None:
        self.pieces = pieces


def _status_pieces(owner: Owner) -> Iterator[str]:
    yield STATUS_HEAD
    yield from owner.status_chunks()
    yield "}"


async def handle(owner: Owner, req: Request[Any]) -> Reply | RawReply:
    """Do ``req`` on ``owner``; its reply (a status: as text, see RawReply)."""
    match req:
        case Kill(names, wait):
            await owner.kill(names, wait=wait)
            return Acted(names)
        case Pause(names):
            await owner.pause(names)
            return Acted(names)
        case Resume(names):
            await owner.resume(names)
            return Acted(names)
        case Retry(names):
            await owner.retry(names)
            return Acted(names)
        case Preempt(name, dry_run):
            return Acted(tuple(await owner.preempt(name, dry_run=dry_run)))
        case PauseQueue():
            await owner.pause_queue()
            return Done()
        case ResumeQueue():
            await owner.resume_queue()
            return Done()
        case Reload():
            await owner.reload()
            return Done()
        case Add(fields):
            return Named(await owner.add(fields))
        case AddMany(jobs):
            return Acted(tuple(await owner.add_many(list(jobs))))
        case Edit(name, fields):
            await owner.edit(name, fields)
            return Named(name)
        case Remove(name):
            await owner.remove(name)
            return Named(name)
        case Move(name, where):
            await owner.move(name, where)
            return Named(name)
        case Status():
            return RawReply(_status_pieces(owner))
        case ClearQuarantine(gpus):
            return Cleared(tuple(await owner.clear_quarantine(gpus)))
        case Stop(kill):
            await owner.stop(kill=kill)
            exits = getattr(owner, "exits_with_run", False) is True  # a headless `gtui run`
            return Stopped(os.getpid(), exits)
        case Ping():
            return Pong(os.getpid())
        case Watch():
            raise GtuiError("bad request: watch takes over a connection of the socket server")
    raise GtuiError(f"unknown request {req.op!r}")
