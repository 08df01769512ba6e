"""The check for processes a job left running after its end, batched: the job ends of one
moment share one scan (the executor's ``leftovers``), and each job found is warned about.

The scan reads the environment of every process of the user (on a busy machine, 2-4 ms of CPU
in a thread that holds the GIL against the loop). Its batches are paced by what the last scan
cost (``next_wait``): a short job's end waits a little longer for its warning, and the scans
never take more than about :data:`SCAN_SHARE` of a core, however fast jobs end."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Coroutine
from typing import Any

from gtui.core.api import JobChanged
from gtui.core.bus import EventBus
from gtui.core.exec.base import Executor, in_thread
from gtui.core.sched import outcome
from gtui.core.state.book import JobBook

LEFTOVER_BATCH_S = 0.1  # job ends this close together share one scan for leftovers
SCAN_SHARE = 0.02  # the most of one core the scans take, one after another
SCAN_WAIT_MAX_S = 1.0  # the longest a job's end waits for its scan (and `gtui run` its exit)


def next_wait(scan_cpu_s: float) -> float:
    """How long the next batch gathers job ends, after a scan that cost ``scan_cpu_s`` of
    CPU: at least :data:`LEFTOVER_BATCH_S`, long enough that scanning takes at most
    :data:`SCAN_SHARE` of a core, never over :data:`SCAN_WAIT_MAX_S`."""
    paced = scan_cpu_s * (1.0 / SCAN_SHARE - 1.0)
    return min(SCAN_WAIT_MAX_S, max(LEFTOVER_BATCH_S, paced))


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
        self._wait = LEFTOVER_BATCH_S  # how long the next batch gathers (next_wait)

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
                await asyncio.sleep(self._wait)
                batch, self._pending = self._pending, {}
                leftovers = functools.partial(self._executor.leftovers, set(batch.values()))
                found, spent = await in_thread(functools.partial(_timed, leftovers))
                self._wait = next_wait(spent)
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


def _timed(scan: Callable[[], dict[str, list[int]]]) -> tuple[dict[str, list[int]], float]:
    """The scan's result and the CPU its thread spent on it."""
    t0 = time.thread_time()
    found = scan()
    return found, time.thread_time() - t0
