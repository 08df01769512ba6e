"""The check for processes a job left running after its end, batched: the job ends of one
moment share one scan (the executor's ``leftovers``), and each job found is warned about."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any

from gtui.core.api import JobChanged
from gtui.core.bus import EventBus
from gtui.core.exec.base import Executor, in_thread
from gtui.core.sched import outcome
from gtui.core.state.book import JobBook

LEFTOVER_BATCH_S = 0.1  # job ends this close together share one scan for leftovers


class LeftoverCheck:
    def __init__(
        self,
        executor: Executor,
        book: JobBook,
        bus: EventBus,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self._executor = executor
        self._book = book
        self._bus = bus
        self._spawn = spawn  # the runner's: its shutdown waits for a scan under way
        self._pending: dict[str, str] = {}  # job -> token of the attempt that ended
        self._checking = False

    def soon(self, name: str, token: str) -> None:
        """Check for what the job left running, together with the other jobs that end in the
        next moment: one /proc scan for all of them. A scan per job end (2 ms, in a thread that
        holds the GIL) halved the throughput of short jobs (benchmarks/throughput.py)."""
        self._pending[name] = token
        if not self._checking:
            self._checking = True
            self._spawn(self._batches())

    async def _batches(self) -> None:
        try:
            while self._pending:
                await asyncio.sleep(LEFTOVER_BATCH_S)
                batch, self._pending = self._pending, {}
                leftovers = functools.partial(self._executor.leftovers, set(batch.values()))
                found = await in_thread(leftovers)
                for name, token in batch.items():
                    self._note(name, token, found.get(token, []))
        finally:
            self._checking = False

    def _note(self, name: str, token: str, pids: list[int]) -> None:
        rec = self._book.records.get(name)
        if not pids or rec is None or rec.token != token or self._book.store.closed:
            return
        outcome.leftover_warning(rec, pids)
        self._book.commit(rec)
        self._bus.publish(JobChanged(self._book.view(name)))
