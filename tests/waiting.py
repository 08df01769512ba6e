"""How a test waits in this project: on a condition, with a generous deadline, never on a guess
of how long something takes (docs/testing.md).

The deadline only catches a hang: a test never asserts that something was fast. When it runs
out, the failure says what was awaited. The one set of waits for the whole suite: a plain
thread (``wait_for``), a coroutine beside the engine (``until``), and a Textual pilot
(``pilot_until``), which must let the app paint between looks.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.pilot import Pilot

DEADLINE_S = 30.0  # generous: a busy two-core CI machine is slow, and only a hang should hit it

Errors = tuple[type[BaseException], ...]


def _holds(cond: Callable[[], object], ignoring: Errors) -> bool:
    """``cond()``, false while it raises one of ``ignoring`` (what it reads is not there yet)."""
    try:
        return bool(cond())
    except ignoring:
        return False


def _timed_out(timeout: float, what: str, cond: Callable[[], object]) -> AssertionError:
    return AssertionError(f"timed out after {timeout:.0f} s waiting for {what or cond}")


def wait_for(
    cond: Callable[[], object],
    timeout: float = DEADLINE_S,
    what: str = "",
    ignoring: Errors = (),
) -> None:
    """Block until ``cond()`` is true (polled every 20 ms), or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while not _holds(cond, ignoring):
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what, cond)
        time.sleep(0.02)


async def until(
    cond: Callable[[], object],
    timeout: float = DEADLINE_S,
    what: str = "",
    ignoring: Errors = (),
) -> None:
    """``wait_for`` for a test that shares the event loop with the engine it waits on."""
    deadline = time.monotonic() + timeout
    while not _holds(cond, ignoring):
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what, cond)
        await asyncio.sleep(0.02)


async def pilot_until(
    pilot: Pilot[int], cond: Callable[[], object], timeout: float = DEADLINE_S, what: str = ""
) -> None:
    """``until`` for a dashboard test: ``pilot.pause`` lets the app handle its messages and
    paint between looks, so a condition on what is shown can come true."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what, cond)
        await pilot.pause(0.02)
