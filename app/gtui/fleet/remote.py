"""Each host's last known state, and how it is refreshed: ``gtui status --json`` on the host
(its scheduler's GPUs come with it; ``gtui gpus --json`` where no scheduler gave any), each
call with a deadline. A host that fails keeps its
last jobs on screen, marked unreachable since the first failure, and is tried again after a
delay that doubles up to ``BACKOFF_MAX``; the other hosts are never held up by it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gtui.fleet import transport
from gtui.fleet.config import Host

BACKOFF_FIRST = 2.0
BACKOFF_MAX = 60.0


@dataclass
class HostState:
    """What the fleet knows of one host's queue."""

    host: Host
    jobs: list[dict[str, Any]] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    paused: bool = False
    scheduler: bool = False
    answered: bool = False  # the last try reached it
    problem: str | None = None  # unreachable, missing, old, error
    error: str = ""  # one line
    since: float | None = None  # when it stopped answering
    seen: float | None = None  # when it last answered
    delay: float = 0.0  # the back-off before the next try
    next_try: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host.key,
            "name": self.host.name,
            "queue": self.host.queue,
            "reachable": self.answered,
            "problem": self.problem,
            "error": self.error or None,
            "unreachable_since": self.since,
            "scheduler": self.scheduler,
            "paused": self.paused,
            "jobs": self.jobs,
            "gpus": self.gpus,
        }

    def failed(self, problem: str, error: str, now: float) -> None:
        self.answered = False
        self.problem, self.error = problem, error
        if self.since is None:
            self.since = now
        self.delay = min(BACKOFF_MAX, self.delay * 2 if self.delay else BACKOFF_FIRST)
        self.next_try = now + self.delay

    def status_line(self, now: float | None = None) -> str:
        """How the host stands, in a few words for a header or a table."""
        if self.answered:
            run = "scheduler running" if self.scheduler else "no scheduler"
            return f"{run}{', paused' if self.paused else ''}"
        if self.problem is None:
            return "connecting"
        if self.problem == "unreachable" and self.since is not None:
            ago = int((now or time.time()) - self.since)
            return f"unreachable for {ago}s: {self.error}"
        return self.error


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


async def refresh(state: HostState, deadline: float = transport.DEADLINE) -> HostState:
    """Ask the host for its jobs and GPUs; record the answer or the failure."""
    q = state.host.queue
    status = await transport.call(state.host, ["status", q, "--json"], deadline)
    now = time.time()
    if status.problem is not None:
        state.failed(status.problem, status.text, now)
        return state
    doc = _json(status.out) if status.rc == 0 else None
    if not isinstance(doc, dict):
        state.failed("error", status.text or "gtui status gave no JSON", now)
        return state
    state.jobs = list(doc.get("jobs") or [])
    state.paused = bool(doc.get("paused"))
    state.scheduler = bool((doc.get("scheduler") or {}).get("running"))
    gpus = doc.get("gpus") or []
    if not gpus:
        # No scheduler has looked at the GPUs: the host's own ``gtui gpus`` does.
        reply = await transport.call(state.host, ["gpus", "--json"], deadline)
        listed = _json(reply.out) if reply.rc == 0 else None
        gpus = listed if isinstance(listed, list) else []
    state.gpus = list(gpus)
    state.answered, state.problem, state.error = True, None, ""
    state.since, state.delay, state.next_try, state.seen = None, 0.0, 0.0, now
    return state


async def refresh_due(states: Sequence[HostState], deadline: float = transport.DEADLINE) -> None:
    """Refresh, all at once, the hosts whose back-off has run out."""
    now = time.time()
    await asyncio.gather(*(refresh(s, deadline) for s in states if s.next_try <= now))
