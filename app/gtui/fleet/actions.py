"""An action on one host's queue: the host's own ``gtui kill|pause|resume|retry QUEUE JOB...``
or ``gtui add QUEUE ... -- CMD``, over its ssh connection, with a deadline."""

from __future__ import annotations

from collections.abc import Sequence

from gtui.fleet import transport
from gtui.fleet.config import Host

VERBS = ("kill", "pause", "resume", "retry")
ACTION_DEADLINE = 30.0


async def act(host: Host, verb: str, names: Sequence[str]) -> transport.Reply:
    """``verb`` on ``names`` in ``host``'s queue; the reply carries the host's own words."""
    if verb not in VERBS:
        raise ValueError(verb)
    return await transport.call(host, [verb, host.queue, *names], ACTION_DEADLINE)


async def add(host: Host, command: str, gpus: int | None = None, name: str = "") -> transport.Reply:
    """Add a job to ``host``'s queue: ``command`` is one shell line, run there as written."""
    args = ["add", host.queue]
    if gpus is not None:
        args += ["--gpus", str(gpus)]
    if name:
        args += ["--name", name]
    return await transport.call(host, [*args, "--", command], ACTION_DEADLINE)


def said(reply: transport.Reply) -> str:
    """What the host said about the action, in one line."""
    return transport.one_line(reply.out) or reply.text or f"exit {reply.rc}"
