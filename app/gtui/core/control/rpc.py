"""The client's side of the control socket: one request, one reply (JSON lines), typed by the
protocol's classes (gtui.core.control.protocol) over the socket of gtui.core.control.transport.

Kept apart from the server so that a command imports only this (and not asyncio with the whole
server): at 100,000 jobs a command's budget is 150 ms, and the server's imports were 100 ms of
it. The server (gtui.core.control.server) uses the same framing. What the client knows when no
answer comes (not done, or not known) is the transport's: see there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from gtui.core.control.protocol import (
    READS,
    STATUS_HEAD,
    Refused,
    Reply,
    Request,
    Status,
    StatusReply,
    reply_of,
    to_wire,
)
from gtui.core.control.transport import (  # noqa: F401  (the socket's side, re-exported)
    _PEERCRED,
    CONNECT_TIMEOUT_S,
    DEFAULT_DEADLINE_S,
    DEFAULT_TIMEOUT_S,
    LOOK_S,
    MAX_LINE,
    MAX_REPLY,
    NoAnswer,
    _check_owner,
    _encode,
    _read_line,
    deadline_s,
    decode_reply,
    exchange_line,
    peer_of,
    peer_uid,
    refusal_in,
    stopped_words,
)
from gtui.core.errors import GtuiError
from gtui.core.paths import QueuePaths, queue_paths


def request(
    queue: Path | QueuePaths, op: str, *, timeout: float | None = DEFAULT_TIMEOUT_S, **kw: Any
) -> dict[str, Any] | None:
    """Send one request to the queue's running scheduler and return its reply.

    None when no scheduler listens (no socket, a stale one, nobody accepting). Raises
    GtuiError when one listens but does not answer within ``timeout`` seconds (None: wait).
    """
    paths = queue if isinstance(queue, QueuePaths) else queue_paths(queue)
    line = exchange(paths, op, timeout=timeout, **kw)
    return None if line is None else decode_reply(line)


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
    reply = decode_reply(line)  # an older scheduler's reply, or a refusal
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
    return exchange_line(paths, op, kw, reads=op in READS, timeout=timeout, deadline=deadline)


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
    refused = refusal_in(reply)
    return None if refused is None else Refused(*refused)


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
