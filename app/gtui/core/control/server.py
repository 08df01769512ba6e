"""The control socket: how ``gtui kill/pause/resume/retry/add/status`` reach a running scheduler.

JSON lines over a Unix socket at ``QueuePaths.socket``, in a directory only the user can open
(0700), the socket itself 0600, and the peer's uid checked with SO_PEERCRED; nothing listens on
the network. The server has no logic of its own: each line is read as a request of the protocol
(gtui.core.control.protocol: every request and reply, its fields and their wire form) and done
by the one handler (gtui.core.control.handle) on the engine, so the CLI, the socket and the
dashboard share one implementation.

A request may carry ``"deadline"`` (wall-clock seconds): one taken after it is refused, not
applied (``"exit": 3``), since its client has given up and said it was not done; the deadline
is checked again after any wait before the change (gtui.core.deadline). The server touches the
socket file every HEARTBEAT_S, so a client that finds the scheduler stopped can say since when.
A ``stop`` answers, then the scheduler's loop ends and it shuts down as when it exits idle; the
client waits until the queue's lock is free.

``{"op": "watch"}`` turns the connection into a stream (a dashboard attached to a scheduler that
runs elsewhere: gtui.core.control.remote). The server answers ``{"ok": true, "hello": HELLO}``,
the whole state at one moment (gtui.core.control.wire.Hello: jobs, paused, GPUs, settings,
fake, pid, queue), then one line per engine event after it, ``{"event": TYPE, "data": {...}}``
(wire.encode_event), and ``{"settings": {...}}`` before the QueueChanged of a reload that
changed them. The watcher may send ``{"op": "sync", "id": N}``: ``{"sync": N}`` comes back after
every event published before it, so a client that has its command's reply can wait until its
view has caught up. A watcher is never dropped for being idle; one that falls WATCH_BUFFER events
behind is (the scheduler never waits for a slow reader), and reconnects for a fresh hello.

A watcher that came late (``gtui events`` started before the scheduler, or one dropped and back)
may ask ``{"op": "watch", "replay": true, "pid": PID, "seq": SEQ, "after": TIME}``: the events
this scheduler published after its event number SEQ when PID is its own, else after TIME (Unix
seconds: when the watcher last read the saved state; 0: from the start). Every hello carries
``"seq"`` (the number of the last job, removal or pause event, counted from the scheduler's
start); this one ``"replay": N`` too, and those N events come as event lines before the live
ones. The scheduler keeps the last REPLAY_EVENTS of them; ``"lost": true`` says some asked for
are gone.

Size: the server and its one-request client share the wire format and the socket's security
checks (owner, mode, SO_PEERCRED); they stay together so both sides change at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import stat
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from gtui.core.api import Event, EventSink, GpusRead, JobView, QueueChanged
from gtui.core.bus import EventBus
from gtui.core.control.handle import Owner, RawReply, handle
from gtui.core.control.protocol import (
    Refused,
    Reply,
    Status,
    Sync,
    Watch,
    request_of,
    sync_of,
    to_wire,
)
from gtui.core.control.rpc import (  # noqa: F401  (the client side, re-exported)
    _PEERCRED,
    CONNECT_TIMEOUT_S,
    MAX_LINE,
    _check_owner,
    _encode,
    call,
    peer_uid,
    request,
)
from gtui.core.control.wire import REPLAYED, Hello, encode_event, to_json
from gtui.core.deadline import check as check_deadline
from gtui.core.deadline import within
from gtui.core.errors import EXIT_BAD_INPUT, GtuiError, LockedError, os_error_text
from gtui.core.model import Settings
from gtui.core.paths import QueuePaths, ensure_private_dir, queue_paths

log = logging.getLogger("gtui.control")

IDLE_TIMEOUT_S = 60.0  # a client that sends nothing for this long is dropped
BUSY_WAIT_S = 30.0  # how long close() lets requests in progress finish
WATCH_BUFFER = 10_000  # events a watcher may fall behind before it is dropped
HEARTBEAT_S = 1.0  # the socket file's mtime is touched this often (see rpc.stopped_words)
HOLD_REPLY = 64 * 1024  # a reply made in pieces is sent once this much is made (or all of it)
REPLAY_EVENTS = 10_000  # the last job events kept for a watcher that came late


class ControlledEngine(Owner, Protocol):
    """What the socket serves: the engine's commands (the handler's owner), and what a watcher
    is sent (``watch``): the state now, then every event (app/gtui/core/sched/engine.py)."""

    def subscribe(self, sink: EventSink) -> Callable[[], None]: ...
    def jobs(self) -> list[JobView]: ...
    @property
    def paused(self) -> bool: ...
    @property
    def gpus(self) -> GpusRead | None: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def fake(self) -> bool: ...


def _watch_request(line: bytes) -> Watch | None:
    """The request, when ``line`` asks for a watch."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("op") != Watch.op:
        return None
    req = request_of(obj)
    assert isinstance(req, Watch)
    return req


class Recent:
    """The scheduler's last REPLAY_EVENTS job events, numbered from its start and timed (a bus
    sink), for a watcher that came late."""

    def __init__(self, size: int = REPLAY_EVENTS) -> None:
        self.seq = 0
        self._events: deque[tuple[int, float, Event]] = deque(maxlen=size)
        self._gone_seq = 0  # the newest event no longer kept, and when it was published
        self._gone_time = 0.0

    def __call__(self, event: Event) -> None:
        if len(self._events) == self._events.maxlen:
            self._gone_seq, self._gone_time, _ = self._events[0]
        self.seq += 1
        self._events.append((self.seq, time.time(), event))

    def since(self, seq: int) -> tuple[list[Event], bool]:
        """The events after number ``seq``, and whether some of them are no longer kept."""
        return [e for n, _t, e in self._events if n > seq], seq < self._gone_seq

    def after(self, when: float) -> tuple[list[Event], bool]:
        """The events published after ``when``, and whether some of them are no longer kept."""
        return [e for _n, t, e in self._events if t > when], when < self._gone_time


def _deadline(req: dict[str, Any]) -> float | None:
    deadline = req.get("deadline")
    if deadline is None:
        return None  # an older client's request
    if isinstance(deadline, bool) or not isinstance(deadline, int | float):
        raise GtuiError("bad request: deadline must be a time in seconds")
    return float(deadline)


async def dispatch(engine: ControlledEngine, obj: object) -> Reply | Refused | RawReply:
    """Run one request on the engine and build its reply; never raises. A request past its
    deadline is refused here, before anything is done (its fields are read after: a client
    that gave up is told so first)."""
    try:
        if not isinstance(obj, dict) or not isinstance(obj.get("op"), str):
            raise GtuiError('bad request: expected {"op": ..., "names": [...]}')
        with within(_deadline(obj)):
            check_deadline()
            return await handle(engine, request_of(obj))
    except GtuiError as e:
        return Refused(str(e), e.exit_code)
    except OSError as e:  # a file of the queue it could not use: said, not a bug of gtui's
        return _os_failure(obj.get("op") if isinstance(obj, dict) else None, e)
    except Exception as e:  # the server must outlive any bug behind one request
        log.exception("control request failed: %r", obj)
        text = str(e).splitlines()[0][:200] if str(e) else ""
        return Refused(f"internal error: {type(e).__name__}: {text}".rstrip(": "))


def _os_failure(op: object, e: OSError) -> Refused:
    """The reply to a request that met a file it could not use (a state directory made
    unreadable): the file and the problem, to the client and in one line of the log."""
    text = os_error_text(e)
    log.warning("%s refused: %s", op or "a request", text)
    return Refused(text, EXIT_BAD_INPUT)


async def _send_pieces(writer: asyncio.StreamWriter, reply: RawReply) -> bool:
    """Each piece as it is made, the loop free between them. A piece that cannot be made
    before anything was sent gets an error reply instead; after, False: the line is left
    without its end and the connection closed, which the client reports as a reply it did
    not get. Half a document is never taken for a whole one."""
    pieces = iter(reply.pieces)
    held: list[str] | None = []  # the first pieces, kept until they are worth a write
    while True:
        try:
            piece = next(pieces, None)
        except Exception as e:
            if held is None:  # some of the line is out: it cannot be taken back
                log.exception("control reply failed")
                return False
            failure = (
                _os_failure(Status.op, e)
                if isinstance(e, OSError)
                else Refused(f"internal error: {type(e).__name__}")
            )
            if not isinstance(e, OSError):
                log.exception("control reply failed")
            writer.write(_encode(to_wire(failure)))
            return True
        if piece is None:
            break
        if held is not None:
            held.append(piece)
            if sum(map(len, held)) < HOLD_REPLY:
                continue
            piece, held = "".join(held), None
        writer.write(piece.encode())
        await writer.drain()
    if held:
        writer.write("".join(held).encode())
    writer.write(b"\n")
    return True


def _answers(path: Path) -> bool:
    """Whether some process accepts connections on the socket at ``path``."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(CONNECT_TIMEOUT_S)
    try:
        s.connect(str(path))
    except OSError:
        return False
    else:
        return True
    finally:
        s.close()


def answering_pid(path: Path) -> int | None:
    """The pid of a process of ours that accepts connections on ``path``, or None.

    How a scheduler finds another one that owns its queue's socket without holding the lock it
    would take (its ``.gtui/`` was deleted under it): the kernel names the peer (SO_PEERCRED).
    """
    try:
        _check_owner(path)
    except (OSError, GtuiError):
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(CONNECT_TIMEOUT_S)
    try:
        s.connect(str(path))
        raw = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    except OSError:
        return None
    finally:
        s.close()
    pid, _uid, _gid = _PEERCRED.unpack(raw)
    return int(pid)


def _bind_private(path: Path) -> socket.socket:
    """A listening socket at ``path``, mode 0600 from the moment it exists."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(16)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class ControlServer:
    """Serves the control socket of one queue for one engine."""

    def __init__(self, queue: Path | QueuePaths | None = None) -> None:
        """``queue`` defaults to the engine's, given at ``start``."""
        self._paths = queue if isinstance(queue, QueuePaths | None) else queue_paths(queue)
        self._server: asyncio.Server | None = None
        self._engine: ControlledEngine | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self._busy: set[asyncio.Task[None]] = set()  # handling a request: let it answer
        self._closing = False
        self._inode: tuple[int, int] | None = None
        self._beat: asyncio.TimerHandle | None = None
        self.recent: Recent | None = None  # set by ``serve``: what a late watcher is replayed
        self._forget: Callable[[], None] | None = None  # unsubscribes ``recent``

    @property
    def paths(self) -> QueuePaths:
        if self._paths is None:
            raise RuntimeError("ControlServer: no queue before start()")
        return self._paths

    @property
    def path(self) -> Path:
        return self.paths.socket

    async def start(self, engine: ControlledEngine) -> None:
        """Listen on the queue's socket. The caller holds the queue lock."""
        if self._paths is None:
            self._paths = queue_paths(engine.queue_path)
        path = self.path
        try:
            ensure_private_dir(path.parent)
            self._remove_stale(path)
            sock = _bind_private(path)
        except OSError as e:
            raise GtuiError(f"cannot listen on {path}: {e.strerror or e}") from None
        st = path.stat()
        self._inode = (st.st_dev, st.st_ino)
        self._engine = engine
        self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=MAX_LINE)
        self._heartbeat()

    def _heartbeat(self) -> None:
        """The socket's mtime says when this process last ran its loop: a client that finds it
        stopped (state T) tells since when."""
        with contextlib.suppress(OSError):
            os.utime(self.path)
        self._beat = asyncio.get_running_loop().call_later(HEARTBEAT_S, self._heartbeat)

    def _remove_stale(self, path: Path) -> None:
        try:
            st = path.lstat()
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode):
            raise GtuiError(f"{path} is in the way of gtui's control socket; remove it")
        if _answers(path):
            raise GtuiError(
                f"another process already answers on {path}; is another gtui running "
                f"{self.paths.queue}?"
            )
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    async def close(self) -> None:
        """Stop listening, let requests in progress answer (a ``kill`` that let ``gtui run``
        finish still gets its reply), drop idle clients, and remove the socket file."""
        server, self._server = self._server, None
        if server is None:
            return
        if self._beat is not None:
            self._beat.cancel()
        if self._forget is not None:
            self._forget()
        self._closing = True
        server.close()
        for task in list(self._clients - self._busy):
            task.cancel()
        if self._busy:
            await asyncio.wait(list(self._busy), timeout=BUSY_WAIT_S)
        for task in list(self._clients):
            task.cancel()
        if self._clients:
            await asyncio.gather(*self._clients, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)
        try:
            st = self.path.lstat()
            if (st.st_dev, st.st_ino) == self._inode:
                self.path.unlink()
        except FileNotFoundError:
            pass

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._clients.add(task)
        try:
            await self._conversation(reader, writer)
        except (asyncio.CancelledError, ConnectionError):
            pass
        except Exception:
            log.exception("control connection failed")
        finally:
            if task is not None:
                self._clients.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _conversation(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        sock = writer.get_extra_info("socket")
        uid = peer_uid(sock) if sock is not None else -1
        if uid != os.getuid():
            # Take (and ignore) its first line, so it reads our answer rather than a broken pipe.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(reader.readline(), 1.0)
            refused = Refused(f"refused: uid {uid} does not own gtui")
            writer.write(_encode(to_wire(refused)))
            await writer.drain()
            return
        assert self._engine is not None
        while True:
            try:
                line = await asyncio.wait_for(reader.readline(), IDLE_TIMEOUT_S)
            except TimeoutError:
                return
            except (ValueError, asyncio.LimitOverrunError):
                writer.write(_encode(to_wire(Refused(f"request over {MAX_LINE} bytes"))))
                await writer.drain()
                return
            if not line:
                return
            if not line.strip():
                continue
            watch = _watch_request(line)
            if watch is not None:
                # A stream from here on: never idle-dropped, never "busy" (close() ends it).
                await self._watch(reader, writer, watch)
                return
            task = asyncio.current_task()
            if task is not None:
                self._busy.add(task)
            try:
                try:
                    obj = json.loads(line)
                except ValueError:
                    reply: Reply | Refused | RawReply = Refused("bad request: not JSON")
                else:
                    reply = await dispatch(self._engine, obj)
                if isinstance(reply, RawReply):
                    if not await _send_pieces(writer, reply):
                        return
                else:
                    writer.write(_encode(to_wire(reply)))
                await writer.drain()
            finally:
                if task is not None:
                    self._busy.discard(task)
            if self._closing:
                return

    async def _watch(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, req: Watch
    ) -> None:
        """The state now (and the events a late watcher asked to be replayed), then every
        event, until the client goes away or falls behind."""
        engine = self._engine
        assert engine is not None
        # Bounded; the one place above the bound is for the marker that ends the watcher.
        queue: asyncio.Queue[_WatchItem] = asyncio.Queue(maxsize=WATCH_BUFFER + 1)
        dropped = False
        settings = engine.settings

        def push(item: _WatchItem) -> None:
            nonlocal dropped
            if dropped:
                return
            if queue.qsize() >= WATCH_BUFFER:
                # Too slow a reader: drop it rather than hold the scheduler or grow without end.
                dropped = True
                unsubscribe()
                queue.put_nowait(_DROP)
                return
            queue.put_nowait(item)

        def sink(event: Event) -> None:  # on the scheduler's turn: keep it cheap
            nonlocal settings
            if isinstance(event, QueueChanged) and engine.settings != settings:
                settings = engine.settings
                push(_Settings(settings))
            push(event)

        # Subscribed and the state read in one step (no await between): no event is lost or
        # applied twice; every event from here on is newer than the hello.
        unsubscribe = engine.subscribe(sink)
        try:
            hello = Hello(
                pid=os.getpid(),
                queue=str(engine.queue_path),
                jobs=tuple(engine.jobs()),
                paused=engine.paused,
                gpus=engine.gpus,
                settings=engine.settings,
                fake=engine.fake,
            )
            head: dict[str, Any] = {"ok": True, "hello": to_json(hello)}
            replay = self._replay(req, head)
            writer.write(_encode(head))
            del hello, head
            for event in replay:
                writer.write(_encode(encode_event(event)))
            del replay
            await writer.drain()
            tasks = {
                asyncio.create_task(_watch_requests(reader, push)),
                asyncio.create_task(_watch_send(writer, queue)),
            }
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                for task in tasks:
                    with contextlib.suppress(asyncio.CancelledError, ConnectionError):
                        await task
        finally:
            unsubscribe()

    def _replay(self, req: Watch, head: dict[str, Any]) -> list[Event]:
        """The events a watch request asks to be replayed (module docstring), counted in
        ``head``; read in the same step as the hello, so each is older than it."""
        recent = self.recent
        if recent is not None:
            head["seq"] = recent.seq
        if not req.replay:
            return []
        if recent is None:  # an engine served without a record of its events
            head.update(replay=0, lost=True)
            return []
        if req.pid == os.getpid() and req.seq is not None:
            events, lost = recent.since(req.seq)
        else:
            events, lost = recent.after(req.after)
        head.update(replay=len(events), lost=lost)
        return events


@dataclass(frozen=True)
class _Settings:
    settings: Settings


@dataclass(frozen=True)
class _Drop:
    """The end of a watcher that fell behind."""


_DROP = _Drop()
_WatchItem: TypeAlias = Event | _Settings | Sync | _Drop


async def _watch_requests(reader: asyncio.StreamReader, push: Callable[[_WatchItem], None]) -> None:
    """A watcher's own lines (``sync``); returns when it goes away."""
    while True:
        try:
            line = await reader.readline()
        except (ValueError, asyncio.LimitOverrunError, ConnectionError):
            return
        if not line:
            return
        try:
            sync = sync_of(json.loads(line))
        except ValueError:
            continue
        if sync is not None:
            push(sync)


async def _watch_send(writer: asyncio.StreamWriter, queue: asyncio.Queue[_WatchItem]) -> None:
    """Writes what the watcher was sent, as fast as it reads; returns when it fell behind."""
    while True:
        item = await queue.get()
        while True:
            if isinstance(item, _Drop):
                log.info("a watcher fell %d events behind: dropped", WATCH_BUFFER)
                return
            if isinstance(item, Sync):
                writer.write(_encode({"sync": item.id}))
            elif isinstance(item, _Settings):
                writer.write(_encode({"settings": to_json(item.settings)}))
            else:
                writer.write(_encode(encode_event(item)))
            if queue.empty():
                break
            item = queue.get_nowait()
        await writer.drain()


def refuse_if_served(paths: QueuePaths) -> None:
    """Another live gtui may serve this queue without holding the lock just taken (its
    ``.gtui/`` was deleted under it): then this one must not run the queue a second time."""
    pid = answering_pid(paths.socket)
    if pid is not None and pid != os.getpid():
        raise LockedError(
            f"another gtui (pid {pid}) already runs this queue: {paths.queue}\n"
            f"its state directory was replaced under it; stop it first (`kill {pid}`)"
        )


async def serve(engine: ControlledEngine, bus: EventBus) -> ControlServer | None:
    """The engine's control socket, or None (said on the bus) when it cannot be opened: the
    queue still runs, only the other commands cannot reach it."""
    server = ControlServer()
    try:
        await server.start(engine)
    except GtuiError as e:
        bus.notice("warning", f"control socket unavailable: {e}")
        return None
    server.recent = Recent()
    server._forget = bus.subscribe(server.recent, REPLAYED)
    return server
