"""The client's side of the control socket: one request, one reply (JSON lines).

Kept apart from the server so that a command such as ``gtui add`` imports only this (and not
asyncio with the whole server): at 100,000 jobs its budget is 150 ms, and the server's imports
were 100 ms of it. The server (gtui.core.control.server) uses the same framing.

A client never reports a failure for something that may still happen. Each request carries its
deadline (``"deadline"``: wall-clock seconds), past which the server refuses it
(gtui.core.deadline). The client asks the kernel who serves the socket (SO_PEERCRED) and does
not send to a scheduler that is stopped (state T: Ctrl-Z, ``kill -STOP``); while it waits it
looks again, and whether the scheduler has read the request yet (the bytes still queued on the
socket, SIOCOUTQ). Each way of not getting an answer is a :class:`NoAnswer` that says what is
known: not done (exit 3: nothing was sent, or the deadline passed before the scheduler read it),
or not known (exit 4).
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import json
import os
import socket
import struct
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gtui.core.control.protocol import (
    READS,
    STATUS_HEAD,
    Ping,
    Refused,
    Reply,
    Request,
    Status,
    StatusReply,
    reply_of,
    to_wire,
)
from gtui.core.errors import EXIT_LOCKED, EXIT_UNKNOWN, GtuiError
from gtui.core.paths import QueuePaths, queue_paths
from gtui.core.procstat import stopped_state

MAX_LINE = 1 << 20  # bytes in one request line
MAX_REPLY = 1 << 30  # bytes in one reply line (a status of 100,000 jobs is about 45 MiB)
CONNECT_TIMEOUT_S = 2.0
DEFAULT_TIMEOUT_S = 30.0
# How long a scheduler has to take a request before it must refuse it; GTUI_REQUEST_DEADLINE_S
# sets it (the tests' stopped schedulers need no 30 s).
DEFAULT_DEADLINE_S = 30.0
LOOK_S = 0.2  # while waiting for a reply, the scheduler's state is looked at this often

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_of(sock: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end of a connected Unix socket (for a
    listening one: the process that listens, even before it accepts)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    pid, uid, _gid = _PEERCRED.unpack(raw)
    return int(pid), int(uid)


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket."""
    return peer_of(sock)[1]


def deadline_s() -> float:
    """Seconds a scheduler has to take a request (GTUI_REQUEST_DEADLINE_S, else 30)."""
    try:
        given = float(os.environ.get("GTUI_REQUEST_DEADLINE_S") or DEFAULT_DEADLINE_S)
    except ValueError:
        return DEFAULT_DEADLINE_S
    return given if given > 0 else DEFAULT_DEADLINE_S


def _clock(t: float) -> str:
    """A moment as a person reads it: the time of day, with the date when not today."""
    local = time.localtime(t)
    same_day = time.localtime()[:3] == local[:3]
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", local)


def stopped_words(paths: QueuePaths, pid: int, state: str = "T") -> str:
    """What a command says of a stopped scheduler, and how to continue it. Its control server
    touches the socket every second (server.HEARTBEAT_S): the socket's mtime is about when it
    stopped."""
    try:
        since = f" since {_clock(paths.socket.stat().st_mtime)}"
    except OSError:
        since = ""
    return (
        f"the scheduler (pid {pid}) of {paths.queue.name} is stopped ({state} state){since}; "
        f"resume it with `kill -CONT {pid}` or `fg`"
    )


class NoAnswer(GtuiError):
    """A scheduler listens but gave no answer. ``why`` is the state of the scheduler in one
    sentence (what ``gtui status`` shows above the saved state); the message adds what became
    of the request: not done (exit 3) or not known (exit 4)."""

    def __init__(self, why: str, outcome: str, exit_code: int, pid: int) -> None:
        super().__init__(f"{why}. {outcome}" if outcome else why, exit_code)
        self.why = why
        self.pid = pid


def _unread(s: socket.socket) -> bool:
    """Whether bytes we sent still wait in the socket for the scheduler to read them (a stream
    socket's sent bytes count until the reader takes them). False when the kernel cannot say:
    the request is then taken to have been read, the careful side."""
    out = array.array("i", [0])
    try:
        fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, out)
    except OSError:
        return False
    return out[0] > 0


def _encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), default=str).encode() + b"\n"


def _check_owner(path: Path) -> None:
    """Refuse to talk to a socket someone else planted where ours should be."""
    uid = os.getuid()
    for p in (path.parent, path):
        st = p.lstat()
        if st.st_uid != uid:
            raise GtuiError(f"{p} belongs to another user (uid {st.st_uid}); gtui will not use it")


def request(
    queue: Path | QueuePaths, op: str, *, timeout: float | None = DEFAULT_TIMEOUT_S, **kw: Any
) -> dict[str, Any] | None:
    """Send one request to the queue's running scheduler and return its reply.

    None when no scheduler listens (no socket, a stale one, nobody accepting). Raises
    GtuiError when one listens but does not answer within ``timeout`` seconds (None: wait).
    """
    paths = queue if isinstance(queue, QueuePaths) else queue_paths(queue)
    line = exchange(paths, op, timeout=timeout, **kw)
    return None if line is None else _decode(line)


def _decode(line: bytes) -> dict[str, Any]:
    try:
        reply = json.loads(line)
    except ValueError:
        raise GtuiError(f"the scheduler sent a reply gtui cannot read: {line[:80]!r}") from None
    if not isinstance(reply, dict):
        raise GtuiError(f"the scheduler sent a reply gtui cannot read: {line[:80]!r}")
    return reply


_STATUS_HEAD = STATUS_HEAD.encode()


def status_document(paths: QueuePaths, timeout: float | None = DEFAULT_TIMEOUT_S) -> bytes | None:
    """The running scheduler's ``status --json`` document as the JSON bytes it sent, not
    decoded (a 100,000-job status is passed through to stdout as it came); None when no
    scheduler listens."""
    line = exchange(paths, Status.op, timeout=timeout)
    if line is None:
        return None
    if line.startswith(_STATUS_HEAD) and line.endswith(b"}"):
        return line[len(_STATUS_HEAD) : -1]
    reply = _decode(line)  # an older scheduler's reply, or a refusal
    if not reply.get("ok") or not isinstance(reply.get("status"), dict):
        raise GtuiError(str(reply.get("error") or "the scheduler sent a status gtui cannot read"))
    return json.dumps(reply["status"], separators=(",", ":")).encode()


def exchange(
    paths: QueuePaths,
    op: str,
    *,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    deadline: float | None = None,
    **kw: Any,
) -> bytes | None:
    """One request, and its reply line as bytes (see ``request``). ``deadline`` (seconds, else
    :func:`deadline_s`, never past ``timeout``): how long the scheduler has to take it."""
    path = paths.socket
    try:
        _check_owner(path)
    except FileNotFoundError:
        return None
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(CONNECT_TIMEOUT_S)
        try:
            s.connect(str(path))
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK) or isinstance(
                e, TimeoutError
            ):
                return None
            raise
        pid, uid = peer_of(s)
        if uid != os.getuid():
            raise GtuiError(f"{path} is served by another user; gtui will not use it")
        state = stopped_state(pid)
        if state is not None:
            raise NoAnswer(
                stopped_words(paths, pid, state),
                "" if op in READS else f"Nothing was sent to it: {_what(op)} not done",
                EXIT_LOCKED,
                pid,
            )
        take = min(deadline or deadline_s(), timeout if timeout is not None else float("inf"))
        due = time.time() + take
        payload = _encode({"op": op, **kw, "deadline": due})
        if len(payload) > MAX_LINE:
            raise GtuiError(f"request over {MAX_LINE} bytes")
        s.settimeout(LOOK_S)
        waiting = _Waiting(paths, op, s, pid, due, take, timeout)
        try:
            s.sendall(payload)
            line = _read_line(s, waiting.look)
        except (BrokenPipeError, ConnectionResetError):
            line = b""
        if not line:
            # It took the request and went away, or could not answer: whether it acted is
            # unknown, so say so rather than act a second time on the saved state.
            raise GtuiError(_no_reply(paths, op), EXIT_LOCKED if op in READS else EXIT_UNKNOWN)
        return line
    finally:
        s.close()


def _what(op: str) -> str:
    return f"the {op.replace('_', ' ')} was"


class _Waiting:
    """A request sent and not answered yet: at each LOOK_S, whether to go on waiting."""

    def __init__(
        self,
        paths: QueuePaths,
        op: str,
        s: socket.socket,
        pid: int,
        due: float,
        take: float,
        timeout: float | None,
    ) -> None:
        self.paths, self.op, self.s, self.pid, self.due, self.take = paths, op, s, pid, due, take
        self.timeout = timeout
        self.end = None if timeout is None else time.monotonic() + timeout
        self.got = 0  # bytes of the reply so far

    def look(self, got: int) -> None:
        """Returns to wait on; raises NoAnswer once there is nothing to wait for: the
        scheduler is stopped, or its deadline passed with the request unread (it will refuse
        it), or ``timeout`` passed with nothing more of the reply (``got``: its bytes so far; a
        long reply that keeps coming is waited for)."""
        q = self.paths.queue.name
        if got > self.got:
            self.got = got
            self.end = None if self.timeout is None else time.monotonic() + self.timeout
        unread = _unread(self.s)
        late = unread and time.time() > self.due  # it will refuse it when it reads it
        state = stopped_state(self.pid)
        if state is None and not late:
            if self.end is None or time.monotonic() < self.end:
                return
            if unread and time.monotonic() < self.end + self.take:
                return  # its deadline is a moment away (the wall clock and ours differ a little)
        if state is not None:
            why = stopped_words(self.paths, self.pid, state)
        elif self.op in READS or not late:
            why = f"the scheduler (pid {self.pid}) of {q} did not answer within {self.timeout:g}s"
        else:
            why = (
                f"the scheduler (pid {self.pid}) of {q} did not take the request within "
                f"{self.take:g}s (busy, or its machine is swapping)"
            )
        if self.op in READS:
            raise NoAnswer(why, "", EXIT_LOCKED, self.pid)
        if late:
            refused = f"It will refuse it: {_what(self.op)} not done"
            raise NoAnswer(why, refused, EXIT_LOCKED, self.pid)
        if unread:
            when = "it resumes" if state is not None else "it takes it"
            outcome = (
                f"Your request waits in its socket: done if {when} before {_clock(self.due)}, "
                f"refused after; `gtui status {q}` shows which"
            )
        else:
            outcome = (
                f"It {'stopped after it had read' if state is not None else 'had read'} "
                f"your request: whether it was done is unknown; `gtui status {q}` shows it"
            )
        raise NoAnswer(why, outcome, EXIT_UNKNOWN, self.pid)


def _no_reply(paths: QueuePaths, op: str) -> str:
    """What to say of a request taken and never answered: whether it acted is unknown, so
    say so rather than act a second time on the saved state; and whether the scheduler is
    still there (then the reply failed, and its output says why) or went away."""
    q = paths.queue.name
    pid = None
    if op != Ping.op:
        with contextlib.suppress(GtuiError, OSError, ValueError):
            again = exchange(paths, Ping.op, timeout=CONNECT_TIMEOUT_S)
            pid = json.loads(again).get("pid") if again else None
    if pid is None:
        return f"the scheduler of {q} stopped before it answered; see `gtui status {q}`"
    unknown = "" if op == Status.op else f"; whether it did it is unknown: see `gtui status {q}`"
    return f"the scheduler (pid {pid}) of {q} could not answer {op} (its output says why){unknown}"


def _read_line(s: socket.socket, look: Callable[[int], None] | None = None) -> bytes:
    """Up to the first newline; b"" when the connection ends before one (a reply cut off is no
    reply). Each chunk is searched alone: searching the whole buffer at every chunk made a
    45 MiB reply quadratic. ``look(bytes so far)`` is called each time the socket's timeout
    passes with nothing read (it raises to give up); without it the timeout raises."""
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = s.recv(1 << 20)
        except TimeoutError:
            if look is None:
                raise
            look(size)
            continue
        if not chunk:
            return b""
        end = chunk.find(b"\n")
        if end >= 0:
            chunks.append(chunk[:end])
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_REPLY:
            raise GtuiError(f"the scheduler's reply is over {MAX_REPLY} bytes")


R = TypeVar("R", bound=Reply)


def send(
    queue: Path | QueuePaths, req: Request[R], *, timeout: float | None = None
) -> R | Refused | None:
    """Send ``req`` to the queue's running scheduler: its reply, or its refusal; None when no
    scheduler listens. ``timeout``: the request's own (``req.timeout_s``) unless given."""
    wire = to_wire(req)
    op = wire.pop("op")
    reply = request(queue, op, timeout=req.timeout_s if timeout is None else timeout, **wire)
    if reply is None:
        return None
    got = refusal_of(reply) or reply_of(req, reply)
    if isinstance(got, StatusReply) and not got.status:
        raise GtuiError("the scheduler sent a status gtui cannot read")
    return got


def refusal_of(reply: dict[str, Any]) -> Refused | None:
    """The refusal a reply says, if it is one (an exit status that is no positive number is
    left to the client's default)."""
    if reply.get("ok"):
        return None
    code = reply.get("exit")
    return Refused(
        str(reply.get("error") or "the scheduler refused the request"),
        code if isinstance(code, int) and code > 0 else None,
    )


def ask(queue: Path | QueuePaths, req: Request[R], *, timeout: float | None = None) -> R | None:
    """``send`` that raises GtuiError with the scheduler's message when it says no."""
    reply = send(queue, req, timeout=timeout)
    if isinstance(reply, Refused):
        raise GtuiError(reply.error, reply.exit)
    return reply


def call(queue: Path | QueuePaths, op: str, **kw: Any) -> dict[str, Any] | None:
    """``request`` that raises GtuiError with the scheduler's message when it says no (the
    untyped form of :func:`ask`: a request as its op and keys, as an older client sent it)."""
    reply = request(queue, op, **kw)
    refused = None if reply is None else refusal_of(reply)
    if refused is not None:
        raise GtuiError(refused.error, refused.exit)
    return reply
