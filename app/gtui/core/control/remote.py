"""A dashboard engine for a scheduler that runs elsewhere: the EnginePort, over the control socket.

``gtui QUEUE.toml`` when a headless ``gtui run QUEUE.toml`` (or a ``--no-tmux`` dashboard in a
plain terminal) already runs the queue opens the dashboard on a :class:`RemoteEngine`:

- ``start()`` opens a ``watch`` connection (gtui.core.control.server) and takes its hello: the
  jobs, paused, the last GPU read, the settings, fake or not, the scheduler's pid;
- ``run()`` reads the events that follow, keeps its own copy of the state (``jobs()``,
  ``view()``, ``paused``, ``gpus``, ``settings``) and publishes each event to its own
  subscribers, exactly as the in-process Engine does;
- the commands (kill, pause, ..., add, edit, remove, move) are each one request of the
  protocol (gtui.core.control.protocol) on its own connection (``do``), and return once this
  copy shows their effect (a ``sync`` on the watch connection), so a screen that reads
  ``view()`` right after sees what it did;
- if the scheduler goes away, a Notice says so, and the engine tries again every
  RECONNECT_EVERY_S for RECONNECT_FOR_S; a scheduler that comes back (the same, or a new one
  for the same queue) sends a fresh hello, published as QueueChanged.

It owns nothing: ``shutdown()`` closes the connection and nothing else. ``shutdown(kill_jobs=
True)`` does not kill either: the jobs belong to the scheduler that runs them, whose life this
screen does not decide; it says so in a Notice instead of raising (a raise would break the
app's quit). ``gtui kill QUEUE NAME`` (or the ``x`` key) kills a job there.

Size: the engine's whole port, mirrored over the socket (the cache of views, the watch
connection and its reconnection, the engine's command names); split, each part is half a class.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gtui.core.api import (
    Event,
    GpusRead,
    JobChanged,
    JobRemoved,
    JobView,
    QueueChanged,
    QueuePaused,
)
from gtui.core.bus import EventBus
from gtui.core.control.protocol import (
    Add,
    AddMany,
    ClearQuarantine,
    Edit,
    Kill,
    Move,
    Pause,
    PauseQueue,
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
    Sync,
    Watch,
    Where,
    to_wire,
)
from gtui.core.control.rpc import (
    CONNECT_TIMEOUT_S,
    MAX_REPLY,
    _check_owner,
    _encode,
    ask,
    peer_of,
    stopped_words,
)
from gtui.core.control.wire import REPLAYED, Hello, WireError, decode_event, from_json
from gtui.core.errors import EXIT_LOCKED, GtuiError
from gtui.core.model import JobState, Settings
from gtui.core.paths import QueuePaths, queue_paths
from gtui.core.procstat import stopped_state

if TYPE_CHECKING:
    from gtui.core.sched.handover import Successor

log = logging.getLogger("gtui.remote")

RECONNECT_EVERY_S = 1.0
RECONNECT_FOR_S = 600.0  # how long a scheduler that went away is waited for
HELLO_TIMEOUT_S = 30.0  # a hello of 10,000 jobs is a few MiB
SYNC_WAIT_S = 10.0  # how long a command waits for its effect to show here

R = TypeVar("R", bound=Reply)


class NotAnswering(GtuiError):
    """No scheduler accepts a watch on the queue's socket."""

    exit_code = EXIT_LOCKED


@dataclass(frozen=True)
class Since:
    """Where a watcher's view of the queue stands: scheduler ``pid``'s events up to number
    ``seq`` seen (None: no scheduler's), or the saved state as read at ``after`` (Unix time;
    0: nothing). A scheduler replays what came after it."""

    pid: int | None = None
    seq: int = 0
    after: float = 0.0


class RemoteEngine:
    """The EnginePort of a scheduler that runs in another process (see the module docstring)."""

    remote = True  # a front end may ask: nothing of the queue runs in this process

    def __init__(
        self,
        queue_path: Path | str | QueuePaths,
        *,
        reconnect_every: float = RECONNECT_EVERY_S,
        reconnect_for: float = RECONNECT_FOR_S,
        since: Since | None = None,
    ) -> None:
        """``since``: where the caller's view stands, to be replayed the job events after it
        (gtui.core.control.server), which ``replayed`` then holds; ``lost`` says some of them
        were no longer kept."""
        self.paths = queue_path if isinstance(queue_path, QueuePaths) else queue_paths(queue_path)
        self.queue_path: Path = self.paths.queue
        self.reconnect_every = reconnect_every
        self.reconnect_for = reconnect_for
        self._bus = EventBus()
        self._jobs: dict[str, JobView] = {}
        self._paused = False
        self._gpus: GpusRead | None = None
        self._settings = Settings()
        self._fake = False
        self.pid: int | None = None  # the scheduler's, from its hello
        self.started = False
        self.connected = False
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._stopping = False
        self._stop = asyncio.Event()
        self._syncs: dict[int, asyncio.Future[None]] = {}
        self._next_sync = 0
        self._since = since
        self.replayed: list[Event] = []
        self.lost = False
        self.seq: int | None = None  # the scheduler's number of the last job event seen here

    # ------------------------------------------------------------------ the state, read here
    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def gpus(self) -> GpusRead | None:
        return self._gpus

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def fake(self) -> bool:
        return self._fake

    def jobs(self) -> list[JobView]:
        """The jobs in queue order, as the scheduler last said."""
        return sorted(self._jobs.values(), key=lambda v: v.order)

    def names_in(self, *states: JobState) -> list[tuple[str, JobState]]:
        """The jobs in one of ``states``, by name and state in queue order, as the scheduler
        last said."""
        return [(v.spec.name, v.record.state) for v in self.jobs() if v.record.state in states]

    def view(self, name: str) -> JobView:
        try:
            return self._jobs[name]
        except KeyError:
            raise GtuiError(f"no job named {name!r} in {self.queue_path.name}") from None

    def log_path(self, name: str) -> Path | None:
        log_file = self.view(name).record.log
        return Path(log_file) if log_file else None

    def subscribe(self, sink: Callable[[Event], None]) -> Callable[[], None]:
        def deliver(event: Event) -> None:
            sink(event)

        return self._bus.subscribe(deliver)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Attach: the watch connection and its hello. NotAnswering when no scheduler listens."""
        if self.started:
            return
        self._take_hello(await self._connect())
        self.started = True

    async def run(self, *, exit_when_idle: bool = False) -> int:
        """Follow the scheduler until ``shutdown``: 0; 1 when it went away and did not come
        back. ``exit_when_idle`` is ignored: whether the queue is idle is the scheduler's
        business, and this screen stays until the user quits it."""
        await self.start()
        while not self._stopping:
            await self._follow()
            self._lost()
            if self._stopping:
                break
            if not await self._reconnect():
                return 1
        return 0

    async def shutdown(self, *, kill_jobs: bool = False) -> None:
        """Detach: close the connection. The scheduler and its jobs go on (module docstring)."""
        if kill_jobs and not self._stopping:
            active = [v.spec.name for v in self._jobs.values() if v.record.active]
            if active:
                self._bus.notice(
                    "warning",
                    f"not killed: {', '.join(active[:5])}{' ...' if len(active) > 5 else ''} "
                    f"run under the scheduler (pid {self.pid}) of {self.queue_path.name}, "
                    f"not this screen; `gtui kill {self.queue_path.name} NAME` kills one",
                )
        self._stopping = True
        self._stop.set()
        self._close()

    async def hand_over(self) -> Successor:
        """Nothing to hand over: the queue is the scheduler's this screen is attached to."""
        raise GtuiError(
            f"the scheduler (pid {self.pid}) of {self.queue_path.name} runs elsewhere and goes "
            "on: nothing to hand over"
        )

    # ------------------------------------------------------------------ commands
    # The engine's command names (gtui.core.control.handle.Operations), as the dashboard calls
    # them: each is its request of the protocol, sent by ``do``.
    async def kill(self, names: Sequence[str], *, wait: bool = True) -> None:
        await self.do(Kill(tuple(names), wait))

    async def pause(self, names: Sequence[str]) -> None:
        await self.do(Pause(tuple(names)))

    async def resume(self, names: Sequence[str]) -> None:
        await self.do(Resume(tuple(names)))

    async def retry(self, names: Sequence[str]) -> None:
        await self.do(Retry(tuple(names)))

    async def preempt(self, name: str, *, dry_run: bool = False) -> list[str]:
        return list((await self.do(Preempt(name, dry_run))).names)

    async def pause_queue(self) -> None:
        await self.do(PauseQueue())

    async def resume_queue(self) -> None:
        await self.do(ResumeQueue())

    async def clear_quarantine(self, gpus: Sequence[int] | None = None) -> list[int]:
        reply = await self.do(ClearQuarantine(None if gpus is None else tuple(gpus)))
        return list(reply.cleared)

    async def reload(self) -> None:
        await self.do(Reload())

    async def add(self, fields: dict[str, object]) -> str:
        return (await self.do(Add(fields))).name

    async def add_many(self, many: Sequence[dict[str, object]]) -> list[str]:
        return list((await self.do(AddMany(tuple(many)))).names)

    async def edit(self, name: str, fields: dict[str, object]) -> None:
        await self.do(Edit(name, fields))

    async def remove(self, name: str) -> None:
        await self.do(Remove(name))

    async def move(self, name: str, where: Where) -> None:
        await self.do(Move(name, where))

    async def stop(self, *, kill: bool = False) -> None:
        """Ask the scheduler this screen is attached to to stop (``gtui stop``)."""
        await self.do(Stop(kill))

    async def status(self) -> dict[str, Any]:
        """The scheduler's ``status`` (the shape of ``gtui status --json``)."""
        return (await self.do(Status())).status

    async def do(self, req: Request[R]) -> R:
        """One request on its own connection; GtuiError with the scheduler's message. A
        request that changes something returns once this copy shows its effect (``sync``)."""
        try:
            reply = await asyncio.to_thread(ask, self.paths, req)
        except OSError as e:
            raise GtuiError(f"cannot reach the scheduler of {self.queue_path.name}: {e}") from None
        if reply is None:
            raise NotAnswering(
                f"the scheduler of {self.queue_path.name} does not answer (it stopped?); "
                "nothing was done"
            )
        if not req.reads:
            await self._sync()
        return reply

    async def _sync(self) -> None:
        """Wait until every event the scheduler published so far is applied here."""
        writer = self._writer
        if writer is None or not self.connected:
            return
        self._next_sync += 1
        token = self._next_sync
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._syncs[token] = done
        try:
            writer.write(_encode(to_wire(Sync(token))))
            await writer.drain()
            await asyncio.wait_for(done, SYNC_WAIT_S)
        except (TimeoutError, ConnectionError, OSError):
            pass  # the events still come (or the loss is told): only the wait is given up
        finally:
            self._syncs.pop(token, None)

    # ------------------------------------------------------------------ the connection
    async def _connect(self) -> Hello:
        name = self.queue_path.name
        path = self.paths.socket
        try:
            _check_owner(path)
        except OSError:
            raise NotAnswering(f"no scheduler runs {name} (no socket at {path})") from None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(path), limit=MAX_REPLY), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as e:
            raise NotAnswering(f"no scheduler answers for {name}: {e}") from None
        try:
            sock = writer.get_extra_info("socket")
            if sock is None:
                raise GtuiError(f"{path} is served by another user; gtui will not use it")
            pid, uid = peer_of(sock)
            if uid != os.getuid():
                raise GtuiError(f"{path} is served by another user; gtui will not use it")
            state = stopped_state(pid)
            if state is not None:  # its hello would come when it is continued: not wait for it
                raise NotAnswering(stopped_words(self.paths, pid, state))
            since = self._since
            watch = Watch() if since is None else Watch(True, since.pid, since.seq, since.after)
            writer.write(_encode(to_wire(watch)))
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), HELLO_TIMEOUT_S)
            if not line:
                raise NotAnswering(f"the scheduler of {name} closed the connection")
            try:
                reply = json.loads(line)
            except ValueError:
                raise GtuiError(f"the scheduler of {name} sent what gtui cannot read") from None
            if not isinstance(reply, dict) or not reply.get("ok"):
                why = reply.get("error") if isinstance(reply, dict) else None
                raise GtuiError(str(why or f"the scheduler of {name} refused to be watched"))
            try:
                hello = from_json(Hello, reply.get("hello"))
            except WireError as e:
                raise GtuiError(
                    f"the scheduler of {name} speaks another version of gtui ({e}); "
                    "restart it with this one"
                ) from None
            await self._take_replay(reader, reply)
        except (OSError, TimeoutError, ValueError) as e:
            writer.close()
            raise NotAnswering(f"the scheduler of {name} did not answer: {e}") from None
        except BaseException:
            writer.close()
            raise
        self._reader, self._writer = reader, writer
        self.connected = True
        return hello

    async def _take_replay(self, reader: asyncio.StreamReader, reply: dict[str, Any]) -> None:
        """The events the hello says follow it, older than it (asked for with ``since``)."""
        seq, count = reply.get("seq"), reply.get("replay")
        self.seq = seq if isinstance(seq, int) and not isinstance(seq, bool) else None
        if self._since is None:
            return
        self.lost = reply.get("lost") is not False  # a scheduler that keeps none: lost
        self.replayed = []
        for _ in range(count if isinstance(count, int) else 0):
            line = await asyncio.wait_for(reader.readline(), HELLO_TIMEOUT_S)
            if not line:
                raise NotAnswering(f"the scheduler of {self.queue_path.name} closed the connection")
            try:
                self.replayed.append(decode_event(json.loads(line)))
            except (ValueError, WireError):
                self.lost = True

    def _take_hello(self, hello: Hello) -> None:
        """The whole state, as Engine.start publishes it."""
        self.pid = hello.pid
        self._jobs = {v.spec.name: v for v in hello.jobs}
        self._paused = hello.paused
        self._gpus = hello.gpus
        self._settings = hello.settings
        self._fake = hello.fake
        self._bus.publish(QueueChanged(tuple(self.jobs())))
        self._bus.publish(QueuePaused(self._paused))
        if hello.gpus is not None:
            self._bus.publish(hello.gpus)

    async def _follow(self) -> None:
        """Apply and publish what the scheduler sends, until the connection ends."""
        reader = self._reader
        if reader is None:
            return
        while not self._stopping:
            try:
                line = await reader.readline()
            except (ValueError, asyncio.LimitOverrunError, ConnectionError, OSError):
                return
            if not line:
                return
            try:
                msg = json.loads(line)
            except ValueError:
                log.warning("unreadable line from the scheduler: %r", line[:80])
                continue
            if isinstance(msg, dict):
                self._take(msg)

    def _take(self, msg: dict[str, Any]) -> None:
        if "event" in msg:
            try:
                event = decode_event(msg)
            except WireError as e:
                log.warning("skipped an event: %s", e)
                return
            if self.seq is not None and isinstance(event, REPLAYED):
                self.seq += 1
            self._apply(event)
            self._bus.publish(event)
        elif "settings" in msg:
            try:
                self._settings = from_json(Settings, msg["settings"])
            except WireError as e:
                log.warning("skipped new settings: %s", e)
        elif "sync" in msg:
            done = self._syncs.get(msg["sync"]) if isinstance(msg["sync"], int) else None
            if done is not None and not done.done():
                done.set_result(None)

    def _apply(self, event: Event) -> None:
        if isinstance(event, JobChanged):
            self._jobs[event.job.spec.name] = event.job
        elif isinstance(event, JobRemoved):
            self._jobs.pop(event.name, None)
        elif isinstance(event, QueueChanged):
            self._jobs = {v.spec.name: v for v in event.jobs}
        elif isinstance(event, GpusRead):
            self._gpus = event
        elif isinstance(event, QueuePaused):
            self._paused = event.paused

    def _close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        self.connected = False
        if writer is not None:
            writer.close()

    def _lost(self) -> None:
        """The connection ended: close it, and let commands waiting on a sync go on."""
        self._close()
        for done in self._syncs.values():
            if not done.done():
                done.set_result(None)

    async def _reconnect(self) -> bool:
        """After the connection ended: attach again, at once (the scheduler drops a watcher
        that fell behind), else every ``reconnect_every`` for ``reconnect_for`` seconds."""
        name = self.queue_path.name
        with contextlib.suppress(GtuiError):
            self._take_hello(await self._connect())
            return True
        self._bus.notice(
            "error",
            f"the scheduler of {name} (pid {self.pid}) stopped; jobs it started keep running. "
            f"Reconnecting every {self.reconnect_every:g}s; or quit and run `gtui {name}` to "
            "run the queue here (it re-adopts them)",
        )
        deadline = time.monotonic() + self.reconnect_for
        while not self._stopping and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.reconnect_every)
            if self._stopping:
                return True
            try:
                hello = await self._connect()
            except GtuiError:
                continue
            self._take_hello(hello)
            self._bus.notice("info", f"attached again to the scheduler (pid {self.pid}) of {name}")
            return True
        if not self._stopping:
            self._bus.notice(
                "error",
                f"no scheduler came back for {name}: this screen shows its last state. "
                f"Quit and run `gtui {name}` to run the queue here",
            )
        return self._stopping


__all__ = ["NotAnswering", "RemoteEngine", "Since"]
