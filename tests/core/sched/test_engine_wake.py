"""The scheduler's loop sleeps until woken or its poll: a cancel (``gtui run``'s SIGTERM) that
lands as a job's end wakes it must still end the loop."""

from __future__ import annotations

import asyncio

import pytest

from gtui.core.sched.engine import _woken_or_after


async def test_a_cancel_as_the_loop_is_woken_is_not_lost() -> None:
    wake = asyncio.Event()
    sleeping = asyncio.create_task(_woken_or_after(wake, 60.0))
    await asyncio.sleep(0)  # it waits on the event
    wake.set()  # a job's end...
    sleeping.cancel()  # ...and the SIGTERM, in the same turn of the loop
    with pytest.raises(asyncio.CancelledError):
        await sleeping


async def test_it_returns_when_woken_and_after_its_time() -> None:
    wake = asyncio.Event()
    waiting = asyncio.create_task(_woken_or_after(wake, 60.0))
    await asyncio.sleep(0)
    wake.set()
    await asyncio.wait_for(waiting, 5.0)
    await asyncio.wait_for(_woken_or_after(asyncio.Event(), 0.01), 5.0)
