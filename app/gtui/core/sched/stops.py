"""How a running job is told to stop when the stop is not its fault: a preemption's sequence
(its ``signal``, its ``grace`` to save and exit, then the runner's kill) and the warning ahead
of a time limit (``signal = "USR1@5m"``). The job's end comes back through the runner's
watcher as any end does; ``requeue.after_end`` makes it a requeue.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from typing import Any, Protocol

from gtui.core.api import JobChanged
from gtui.core.bus import EventBus
from gtui.core.exec.base import Executor, handle_of
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.faults import crash_point
from gtui.core.sched.requeue import resume_of
from gtui.core.state.book import JobBook


class _Runner(Protocol):
    """What a stop needs of the runner: its background tasks, a run's watcher, its kill."""

    def spawn(self, coro: Any) -> None: ...

    def watcher(self, name: str) -> asyncio.Task[None] | None: ...

    def kill_process(self, name: str) -> Coroutine[Any, Any, None]: ...


class Stops:
    """The preemption's stop sequence and the time limit's warning, for one runner."""

    def __init__(
        self, book: JobBook, bus: EventBus, executor: Executor, config: QueueConfig, runner: _Runner
    ) -> None:
        self._book = book
        self._bus = bus
        self._executor = executor
        self._config = config
        self._runner = runner

    def preempt(self, name: str, by: str) -> None:
        """Stop a running job to make room for ``by``. The intent is committed first: a
        scheduler killed from here on goes on with the stop at its restart, and the end is
        recorded as a preemption whatever comes. Then its signal, its grace, the kill."""
        rec = self._book.records[name]
        if not rec.active or rec.preempt_for is not None:
            return
        rec.preempt_for = by
        rec.preempted_at = time.time()
        self._book.commit(rec)
        self._bus.publish(JobChanged(self._book.view(name)))
        crash_point("after_preempt_intent")
        self._runner.spawn(self.stop(name))

    async def stop(self, name: str) -> None:
        """The stop sequence: the signal, what is left of the grace, then the kill. A restart
        that finds a stop under way runs it again from here: the signal may come twice (a
        scheduler killed between the intent and the signal sent none), the grace does not
        start over."""
        rec = self._book.records.get(name)
        spec = self._book.specs.get(name)
        if rec is None or spec is None or not rec.active or not rec.pid:
            return
        resume = resume_of(spec, self._config.settings)
        if not rec.preempt_signalled:  # saved before it is sent: an end after it is the stop's
            rec.preempt_signalled = True
            self._book.commit(rec)
        self._signal(name, resume.signal, "signal")
        crash_point("after_preempt_signal")
        left = (rec.preempted_at or time.time()) + resume.grace_s - time.time()
        watcher = self._runner.watcher(name)
        if watcher is not None and left > 0:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError, Exception):
                await asyncio.wait_for(asyncio.shield(watcher), timeout=left)
        rec = self._book.records.get(name)
        if rec is not None and rec.active and rec.preempt_for is not None:
            await self._runner.kill_process(name)

    def warn(self, name: str) -> None:
        """The job's ``signal`` ahead of its time limit: time to save."""
        rec = self._book.records.get(name)
        spec = self._book.specs.get(name)
        if rec is None or spec is None or not rec.active or not rec.pid:
            return
        self._signal(name, resume_of(spec, self._config.settings).signal, "warn before its limit")

    def _signal(self, name: str, signum: int, doing: str) -> None:
        rec = self._book.records[name]
        try:
            self._executor.signal(handle_of(rec), signum)
        except Exception as e:  # said, never fatal: the grace and the kill still follow
            self._bus.notice("warning", f"could not {doing} {name}: {e}")
