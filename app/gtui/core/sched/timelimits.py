"""The timers of a job's run: its time limit (a kill once ``timeout`` has passed, with the
signal ``warn_before`` asks for ahead of it) and the end of a back-off (the job a candidate
again). A part the job runner composes: the timers live on the runner's watched attempts,
which the runner's end and shutdown cancel; what a timer does is decided here."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Protocol

from gtui.core.exec.base import Executor, handle_of
from gtui.core.sched import outcome
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.planner import Planner
from gtui.core.sched.requeue import resume_of
from gtui.core.state.book import JobBook


class Timed(Protocol):
    """What a watched attempt (the runner's) holds of its timers: the limit's, the warning's,
    and the deadline its limit's timer fired for."""

    timer: asyncio.TimerHandle | None
    warning: asyncio.TimerHandle | None
    deadline_hit: float | None


class TimeLimits:
    """Arms a run's time limit and a back-off's end; kills a run past its limit."""

    def __init__(
        self,
        *,
        book: JobBook,
        executor: Executor,
        config: QueueConfig,
        planner: Planner,
        kick: Callable[[], None],
        runs: Mapping[str, Timed],
        warn: Callable[[str], None],
        kill: Callable[[str], Coroutine[Any, Any, None]],
        spawn: Callable[[Any], None],
    ) -> None:
        self._book = book
        self._executor = executor
        self._config = config
        self._planner = planner
        self._kick = kick
        self._runs = runs  # the runner's watched attempts, which hold the timers
        self._warn = warn  # the signal before the limit (sched.stops)
        self._kill = kill  # the runner's kill, the run not marked killed
        self._spawn = spawn

    def arm_retry(self, name: str, delay: float) -> None:
        """At the end of a back-off, make the job a candidate again and run a pass."""

        def due() -> None:
            self._planner.forget(name)
            self._kick()

        asyncio.get_running_loop().call_later(max(0.0, delay), due)

    def arm(self, name: str, run: Timed) -> None:
        """Set the run's limit timer (and its warning's) from its start and ``timeout``."""
        spec = self._book.specs.get(name)
        rec = self._book.records[name]
        if spec is None or spec.timeout_s is None or rec.started_at is None:
            return
        delay = max(0.0, rec.started_at + spec.timeout_s - time.time())
        loop = asyncio.get_running_loop()
        run.timer = loop.call_later(delay, self.on_timeout, name)
        warn = resume_of(spec, self._config.settings).warn_before_s
        if warn is not None and delay > warn:
            run.warning = loop.call_later(delay - warn, self._warn, name)

    def on_timeout(self, name: str) -> None:
        """The limit's timer: kill the job unless its own record says it ended in time (a
        scheduler stopped past the deadline runs this timer in the same turn as the exit's
        notice, which the watcher has not handled yet)."""
        run = self._runs.get(name)
        if run is not None:
            run.timer = None
        rec = self._book.records.get(name)
        spec = self._book.specs.get(name)
        if run is None or rec is None or not rec.active or not rec.pid or rec.started_at is None:
            return
        deadline = rec.started_at + (spec.timeout_s if spec and spec.timeout_s else 0.0)
        ended = self._executor.exit_status(handle_of(rec))
        if ended is not None and outcome.ended_in_time(ended, deadline):
            return  # it ended on its own before the limit: its watcher records that
        run.deadline_hit = deadline
        if ended is None:
            self._spawn(self._kill(name))
