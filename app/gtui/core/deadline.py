"""A request's deadline: the wall-clock time after which what it asks must not be done.

A client that gives up on a request (its scheduler was stopped, or too busy to take it) must be
able to say "not done" and be right. So a request carries its deadline, and whoever applies it
checks it at the moment of applying, after any wait: the control server when it takes the
request from its socket, and each place that waits before it changes something (the queue
file's lock) again after that wait. The server sets the deadline for the request it serves;
threads started from there (``asyncio.to_thread``) see it too.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import Context, ContextVar, copy_context

from gtui.core.errors import EXIT_LOCKED, GtuiError

_current: ContextVar[float | None] = ContextVar("gtui_request_deadline", default=None)


class TooLate(GtuiError):
    """The request's deadline passed before it could be applied: nothing was done."""

    exit_code = EXIT_LOCKED


@contextlib.contextmanager
def within(deadline: float | None) -> Iterator[None]:
    """Everything applied in this context checks ``deadline`` (None: no deadline)."""
    token = _current.set(deadline)
    try:
        yield
    finally:
        _current.reset(token)


def check() -> None:
    """TooLate if the current request's deadline has passed."""
    deadline = _current.get()
    if deadline is not None and time.time() > deadline:
        late = time.time() - deadline
        raise TooLate(
            f"this request reached the scheduler {late:.0f}s after its deadline "
            f"({time.strftime('%H:%M:%S', time.localtime(deadline))}), when its client had "
            "given up: it was not done"
        )


def detached() -> Context:
    """The current context without a request's deadline: for a task started while a request
    is applied (a job's run, started by an ``add``) that outlives the request, whose own
    later edits must not be refused as that request's."""
    ctx = copy_context()
    ctx.run(_current.set, None)
    return ctx
