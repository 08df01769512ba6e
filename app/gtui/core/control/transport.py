"""The socket under the control client (gtui.core.control.rpc): one request line sent, one
reply line read, and what the client knows when none comes. It knows no request class: a
request is its op and its fields, so that ``gtui add`` reaches a running scheduler without
importing the protocol's dataclasses (most of its start-up).

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
import errno
import fcntl
import json
import os
import socket
import struct
import termios
import time

from gtui.core.errors import EXIT_LOCKED, EXIT_UNKNOWN, GtuiError
from gtui.core.procstat import stopped_state

TYPE_CHECKING = False  # typing is not imported at run time: ``gtui add`` starts without it
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from gtui.core.paths import QueuePaths

# The two ops this module sends or names itself (the protocol's Ping and Status; a test holds
# them to it).
PING_OP = "ping"
STATUS_OP = "status"

# Bytes in one request line: an add --from of 10,000 long commands is over a MiB (the old
# limit, which refused it), 100,000 of them tens of MiB.
MAX_LINE = 1 << 25
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


def exchange_line(
    paths: QueuePaths,
    op: str,
    fields: dict[str, Any],
    *,
    reads: bool,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    deadline: float | None = None,
) -> bytes | None:
    """One request (``op`` and its ``fields``), and its reply line as bytes; None when no
    scheduler listens. ``reads``: the request only reads (a refusal then says nothing of what
    was done). ``deadline`` (seconds, else :func:`deadline_s`, never past ``timeout``): how long
    the scheduler has to take it."""
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
                "" if reads else f"Nothing was sent to it: {_what(op)} not done",
                EXIT_LOCKED,
                pid,
            )
        take = min(deadline or deadline_s(), timeout if timeout is not None else float("inf"))
        due = time.time() + take
        payload = _encode({"op": op, **fields, "deadline": due})
        if len(payload) > MAX_LINE:
            raise GtuiError(f"request over {MAX_LINE} bytes")
        s.settimeout(LOOK_S)
        waiting = _Waiting(paths, op, reads, s, pid, due, take, timeout)
        try:
            s.sendall(payload)
            line = _read_line(s, waiting.look)
        except (BrokenPipeError, ConnectionResetError):
            line = b""
        if not line:
            # It took the request and went away, or could not answer: whether it acted is
            # unknown, so say so rather than act a second time on the saved state.
            raise GtuiError(_no_reply(paths, op), EXIT_LOCKED if reads else EXIT_UNKNOWN)
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
        reads: bool,
        s: socket.socket,
        pid: int,
        due: float,
        take: float,
        timeout: float | None,
    ) -> None:
        self.paths, self.op, self.s, self.pid, self.due, self.take = paths, op, s, pid, due, take
        self.reads = reads
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
        elif self.reads or not late:
            why = f"the scheduler (pid {self.pid}) of {q} did not answer within {self.timeout:g}s"
        else:
            why = (
                f"the scheduler (pid {self.pid}) of {q} did not take the request within "
                f"{self.take:g}s (busy, or its machine is swapping)"
            )
        if self.reads:
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
    if op != PING_OP:
        try:
            again = exchange_line(paths, PING_OP, {}, reads=True, timeout=CONNECT_TIMEOUT_S)
            pid = json.loads(again).get("pid") if again else None
        except (GtuiError, OSError, ValueError):
            pass
    if pid is None:
        return f"the scheduler of {q} stopped before it answered; see `gtui status {q}`"
    unknown = "" if op == STATUS_OP else f"; whether it did it is unknown: see `gtui status {q}`"
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


def decode_reply(line: bytes) -> dict[str, Any]:
    try:
        reply = json.loads(line)
    except ValueError:
        raise GtuiError(f"the scheduler sent a reply gtui cannot read: {line[:80]!r}") from None
    if not isinstance(reply, dict):
        raise GtuiError(f"the scheduler sent a reply gtui cannot read: {line[:80]!r}")
    return reply


def refusal_in(reply: dict[str, Any]) -> tuple[str, int | None] | None:
    """The error and exit status a reply refuses with, if it is a refusal (an exit status that
    is no positive number is left to the client's default)."""
    if reply.get("ok"):
        return None
    code = reply.get("exit")
    return (
        str(reply.get("error") or "the scheduler refused the request"),
        code if isinstance(code, int) and code > 0 else None,
    )
