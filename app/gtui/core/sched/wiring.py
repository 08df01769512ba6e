"""The scheduler's parts that need the open store, built together, each with what it needs.

The engine calls ``wire`` once its start has opened the store and made the job book; it
hands in its own hooks (a pass and a wake, what follows a job's end, whether it is stopping)
and keeps the parts. A test builds a part alone with the same arguments.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gtui.core.api import LogGrew
from gtui.core.bus import EventBus, Topic
from gtui.core.diagnosis.userrules import UserRules
from gtui.core.exec.base import Executor
from gtui.core.gpus.reader import GpuReader
from gtui.core.paths import QueuePaths
from gtui.core.queue.source import QueueSource
from gtui.core.sched.commands import Operations
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.energymeter import EnergyMeter
from gtui.core.sched.forecast import Forecast
from gtui.core.sched.healthwatch import HealthWatch
from gtui.core.sched.intake import Intake, Pool
from gtui.core.sched.linkwatch import LinkWatch
from gtui.core.sched.logwatch import LogWatch
from gtui.core.sched.notifying import Notifying
from gtui.core.sched.occupancy import Occupancy
from gtui.core.sched.planner import Planner
from gtui.core.sched.preempting import Preemption
from gtui.core.sched.quarantine import Quarantine
from gtui.core.sched.runs import JobRunner, RunEnded
from gtui.core.state.book import JobBook


@dataclass(frozen=True)
class Hooks:
    """What the parts ask of the engine that owns them."""

    kick: Callable[[], None]  # a placement pass now, and the loop woken
    after_end: Callable[[str], Awaitable[None]]  # a job's end recorded: GPUs read, a pass
    stopping: Callable[[], bool]  # the engine is stopping: watchers record no more ends


@dataclass(frozen=True)
class Parts:
    planner: Planner
    quarantine: Quarantine
    forecast: Forecast
    notifying: Notifying
    runner: JobRunner
    occupancy: Occupancy
    intake: Intake
    ops: Operations
    health: HealthWatch
    preemption: Preemption
    links: LinkWatch
    energy: EnergyMeter
    logs: LogWatch


def wire(
    book: JobBook,
    reader: GpuReader,
    bus: EventBus,
    config: QueueConfig,
    executor: Executor,
    paths: QueuePaths,
    source: QueueSource,
    user_rules: UserRules,
    pool: Pool,
    hooks: Hooks,
) -> Parts:
    queue_path = paths.queue
    planner = Planner(book, bus)
    quarantine = Quarantine(book.store)
    forecast = Forecast(book, executor, paths)
    notifying = Notifying(bus, book, config, queue_path)
    ended: Topic[RunEnded] = Topic(bus)  # a run's end, to the parts that follow runs
    ended.subscribe(forecast.on_run_ended)
    ended.subscribe(notifying.on_run_ended)
    links = LinkWatch(book, bus, executor)
    bus.subscribe(links.on_log_grew, (LogGrew,))  # type: ignore[arg-type]
    ended.subscribe(lambda e: links.forget(e.record.name))
    energy = EnergyMeter(book, reader)
    logs = LogWatch(book, bus, executor, forecast.read_progress)
    ended.subscribe(lambda e: logs.forget(e.record.name))
    runner = JobRunner(
        book=book,
        bus=bus,
        run_ends=ended,
        executor=executor,
        reader=reader,
        paths=paths,
        queue_path=queue_path,
        config=config,
        quarantine=quarantine,
        planner=planner,
        kick=hooks.kick,
        after_end=hooks.after_end,
        stopping=hooks.stopping,
        last_look=links.at_end,
        energy=energy,
    )
    occupancy = Occupancy(
        book=book,
        bus=bus,
        executor=executor,
        reader=reader,
        planner=planner,
        quarantine=quarantine,
        paths=paths,
        config=config,
    )
    intake = Intake(
        source=source,
        book=book,
        bus=bus,
        config=config,
        user_rules=user_rules,
        pool=pool,
        kick=hooks.kick,
        stopping=hooks.stopping,
    )
    preemption = Preemption(book, config, occupancy, runner)
    ops = Operations(
        book=book,
        bus=bus,
        executor=executor,
        runner=runner,
        intake=intake,
        quarantine=quarantine,
        config=config,
        queue_path=queue_path,
        kick=hooks.kick,
        preemption=preemption,
    )
    health = HealthWatch(
        book=book,
        bus=bus,
        reader=reader,
        quarantine=quarantine,
        runner=runner,
        notifying=notifying,
        config=config,
    )
    return Parts(
        planner,
        quarantine,
        forecast,
        notifying,
        runner,
        occupancy,
        intake,
        ops,
        health,
        preemption,
        links,
        energy,
        logs,
    )
