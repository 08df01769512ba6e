"""The client's side of the control socket: one request, one reply (JSON lines).

Kept apart from the server so that a command such as ``gtui add`` imports only this (and not
asyncio with the whole server): at 100,000 jobs its budget is 150 ms, and the server's imports
were 100 ms of it. The server (gtui.core.control.server) uses the same framing.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import struct
from pathlib import Path
from typing import Any

from gtui.core.errors import GtuiError
from gtui.core.paths import QueuePaths, queue_paths

MAX_LINE = 1 << 20  # bytes in one request line
MAX_REPLY = 1 << 30  # bytes in one reply line (a status of 100,000 jobs is about 45 MiB)
CONNECT_TIMEOUT_S = 2.0
DEFAULT_TIMEOUT_S = 30.0

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    _pid, uid, _gid = _PEERCRED.unpack(raw)
    return int(uid)


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


_STATUS_HEAD = b'{"ok":true,"status":'


def status_document(paths: QueuePaths, timeout: float | None = DEFAULT_TIMEOUT_S) -> bytes | None:
    """The running scheduler's ``status --json`` document as the JSON bytes it sent, not
    decoded (a 100,000-job status is passed through to stdout as it came); None when no
    scheduler listens."""
    line = exchange(paths, "status", timeout=timeout)
    if line is None:
        return None
    if line.startswith(_STATUS_HEAD) and line.endswith(b"}"):
        return line[len(_STATUS_HEAD) : -1]
    reply = _decode(line)  # an older scheduler's reply, or a refusal
    if not reply.get("ok") or not isinstance(reply.get("status"), dict):
        raise GtuiError(str(reply.get("error") or "the scheduler sent a status gtui cannot read"))
    return json.dumps(reply["status"], separators=(",", ":")).encode()


def exchange(
    paths: QueuePaths, op: str, *, timeout: float | None = DEFAULT_TIMEOUT_S, **kw: Any
) -> bytes | None:
    """One request, and its reply line as bytes (see ``request``)."""
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
        if peer_uid(s) != os.getuid():
            raise GtuiError(f"{path} is served by another user; gtui will not use it")
        s.settimeout(timeout)
        payload = _encode({"op": op, **kw})
        if len(payload) > MAX_LINE:
            raise GtuiError(f"request over {MAX_LINE} bytes")
        try:
            s.sendall(payload)
            line = _read_line(s)
        except TimeoutError:
            raise GtuiError(
                f"the scheduler of {paths.queue.name} did not answer within {timeout:g}s"
            ) from None
        except (BrokenPipeError, ConnectionResetError):
            line = b""
        if not line:
            raise GtuiError(_no_reply(paths, op))
        return line
    finally:
        s.close()


def _no_reply(paths: QueuePaths, op: str) -> str:
    """What to say of a request taken and never answered: whether it acted is unknown, so
    say so rather than act a second time on the saved state; and whether the scheduler is
    still there (then the reply failed, and its output says why) or went away."""
    q = paths.queue.name
    pid = None
    if op != "ping":
        with contextlib.suppress(GtuiError, OSError, ValueError):
            again = exchange(paths, "ping", timeout=CONNECT_TIMEOUT_S)
            pid = json.loads(again).get("pid") if again else None
    if pid is None:
        return f"the scheduler of {q} stopped before it answered; see `gtui status {q}`"
    unknown = "" if op == "status" else f"; whether it did it is unknown: see `gtui status {q}`"
    return f"the scheduler (pid {pid}) of {q} could not answer {op} (its output says why){unknown}"


def _read_line(s: socket.socket) -> bytes:
    """Up to the first newline; b"" when the connection ends before one (a reply cut off is no
    reply). Each chunk is searched alone: searching the whole buffer at every chunk made a
    45 MiB reply quadratic."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = s.recv(1 << 20)
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


def call(queue: Path | QueuePaths, op: str, **kw: Any) -> dict[str, Any] | None:
    """``request`` that raises GtuiError with the scheduler's message when it says no."""
    reply = request(queue, op, **kw)
    if reply is not None and not reply.get("ok"):
        code = reply.get("exit")
        raise GtuiError(
            str(reply.get("error") or "the scheduler refused the request"),
            code if isinstance(code, int) and code > 0 else None,
        )
    return reply
