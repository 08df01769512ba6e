"""The running jobs' logs, looked at every :data:`LOG_WATCH_S`: each growth is told on the bus
(``LogGrew``: the dashboard's log view, the link watch) and each new size has the job's
progress read once. A part of its own: it only reads the book and asks the executor for sizes,
and forgets a job when its run ends (told on the scheduler's own bus, like the link watch)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable

from gtui.core.api import LogGrew
from gtui.core.bus import EventBus
from gtui.core.exec.base import Executor, off_loop
from gtui.core.model import JobRecord
from gtui.core.state.book import JobBook

LOG_WATCH_S = 0.5  # how often running jobs' logs are checked for growth


class LogWatch:
    """Tells of the running jobs' log growth and has their progress read."""

    def __init__(
        self,
        book: JobBook,
        bus: EventBus,
        executor: Executor,
        read_progress: Callable[[str, JobRecord, int], bool],
    ) -> None:
        self._book = book
        self._bus = bus
        self._executor = executor
        self._read_progress = read_progress
        self._log_sizes: dict[str, int] = {}
        self._progress_sizes: dict[str, int] = {}  # the log size each job's progress was read at

    def forget(self, name: str) -> None:
        """The job's run ended: its next attempt's log is told of, and read, afresh."""
        self._log_sizes.pop(name, None)
        self._progress_sizes.pop(name, None)

    async def watch_logs(self) -> None:
        """Tell of each running job's log growth, and read its progress. The sizes are asked
        in a thread, one sweep at a time: a stat on a hung disk must not freeze the loop."""
        while True:
            await asyncio.sleep(LOG_WATCH_S)
            try:
                await self._watch_logs_once()
            except Exception as e:  # never the end of `gtui run`: the next sweep tries again
                self._bus.notice("warning", f"reading the jobs' log sizes failed: {e!r}")

    async def _watch_logs_once(self) -> None:
        records = self._book.records
        logs = [(n, log) for n in self._book.active_names() if (log := _active_log(records[n]))]
        if not logs:
            return
        sizes = await off_loop(functools.partial(_log_sizes, self._executor, logs))
        for (name, log), size in zip(logs, sizes, strict=True):
            rec = self._book.records.get(name)
            if rec is None or _active_log(rec) != log:
                continue  # ended (or started again) meanwhile
            if size is None:
                continue
            if self._log_sizes.get(name) != size:
                self._log_sizes[name] = size
                self._bus.publish(LogGrew(name, log, size))
            # Its progress is read at each size once: a size whose read was put off (one
            # under way, or the throttle) is asked again at the next look.
            if self._progress_sizes.get(name) != size and self._read_progress(name, rec, size):
                self._progress_sizes[name] = size


def _log_sizes(executor: Executor, logs: list[tuple[str, str]]) -> list[int | None]:
    return [executor.log_size(log) for _, log in logs]


def _active_log(rec: JobRecord) -> str | None:
    return rec.log if rec.active and rec.log else None
