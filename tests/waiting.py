"""How a test waits in this project: on a condition, with a generous deadline, never on a guess
of how long something takes (docs/testing.md).

The deadline only catches a hang: a test never asserts that something was fast. When it runs
out, the failure says what was awaited.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

DEADLINE_S = 30.0  # generous: a busy two-core CI machine is slow, and only a hang should hit it


def wait_for(cond: Callable[[], object], timeout: float = DEADLINE_S, what: str = "") -> None:
    """Block until ``cond()`` is true (polled every 50 ms), or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what or cond}")
        time.sleep(0.05)


async def until(cond: Callable[[], object], timeout: float = DEADLINE_S, what: str = "") -> None:
    """``wait_for`` for a test that shares the event loop with the engine it waits on."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what or cond}")
        await asyncio.sleep(0.02)
