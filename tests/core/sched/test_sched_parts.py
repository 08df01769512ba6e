"""The scheduler's parts, each built alone with what it needs (no Engine): the job runner, told
what ended a run as an argument; occupancy; the operations; the intake; forecasts and
notifications as subscribers of a run's end; the book's own cache invalidation; the one
builder commands use; and the engine's own size (a class of parts, not of mixins)."""

from __future__ import annotations

import ast
import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from gtui.core.api import Event, LogGrew, Notice, QueuePaused
from gtui.core.bus import EventBus, Topic
from gtui.core.diagnosis.userrules import UserRules
from gtui.core.exec.base import ExitStatus
from gtui.core.exec.local import LocalExecutor
from gtui.core.gpus.fake import FakeBackend
from gtui.core.gpus.reader import GpuReader
from gtui.core.model import JobState, Settings
from gtui.core.paths import ensure_state_dir, queue_paths
from gtui.core.queue.queuefile import load_queue
from gtui.core.queue.source import QueueSource
from gtui.core.sched.build import build_engine
from gtui.core.sched.commands import Operations
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.engine import Engine
from gtui.core.sched.forecast import Forecast
from gtui.core.sched.intake import Intake
from gtui.core.sched.logwatch import LogWatch
from gtui.core.sched.notifying import Notifying
from gtui.core.sched.occupancy import Occupancy
from gtui.core.sched.planner import Planner
from gtui.core.sched.quarantine import Quarantine
from gtui.core.sched.runs import JobRunner, RunEnded
from gtui.core.state.book import JobBook
from gtui.core.state.store import Store
from tests.conftest import PACKAGE_DIR, write_queue
from tests.waiting import until

QUEUE = """
[[jobs]]
name = "sleeper"
gpus = 1
mem = "10G"
cmd = "sleep 60"

[[jobs]]
name = "quick"
gpus = 0
cmd = "true"
"""


@dataclass
class Kit:
    """What the parts are built from: a queue's book over a store, a bus, simulated GPUs."""

    path: Path
    bus: EventBus
    book: JobBook
    config: QueueConfig
    reader: GpuReader
    planner: Planner
    quarantine: Quarantine
    events: list[Event] = field(default_factory=list)
    kicks: list[int] = field(default_factory=list)

    def kick(self) -> None:
        self.kicks.append(1)


def kit(tmp_path: Path) -> Kit:
    path = write_queue(tmp_path, QUEUE)
    ensure_state_dir(queue_paths(path))
    bus = EventBus()
    store = Store(queue_paths(path).db)
    book = JobBook(store, bus, path.name)
    queue = load_queue(path)
    config = QueueConfig(bus)
    config.settings = queue.settings
    reader = GpuReader(FakeBackend("1x80G"), bus)
    reader.snapshot = reader.backend.read(())
    k = Kit(path, bus, book, config, reader, Planner(book, bus), Quarantine(store))
    bus.subscribe(k.events.append)
    book.apply(queue, initial=True)
    return k


def runner_of(
    k: Kit, ends: Topic[RunEnded], after_end: Callable[[str], Awaitable[None]]
) -> JobRunner:
    paths = queue_paths(k.path)
    return JobRunner(
        book=k.book,
        bus=k.bus,
        run_ends=ends,
        executor=LocalExecutor(),
        reader=k.reader,
        paths=paths,
        queue_path=k.path,
        config=k.config,
        quarantine=k.quarantine,
        planner=k.planner,
        kick=k.kick,
        after_end=after_end,
        stopping=lambda: False,
    )


async def test_the_runner_alone_starts_a_job_and_records_its_kill(tmp_path: Path) -> None:
    """The kill marks that one attempt; its watcher hands the cause to ``finish``."""
    k = kit(tmp_path)
    ends: Topic[RunEnded] = Topic(k.bus)
    ended: list[RunEnded] = []
    ends.subscribe(ended.append)
    after: list[str] = []

    async def after_end(name: str) -> None:
        after.append(name)

    runner = runner_of(k, ends, after_end)
    runner.start_job("sleeper", (0,))
    assert k.book.records["sleeper"].state == JobState.RUNNING
    await runner.kill("sleeper")
    await until(lambda: after == ["sleeper"], what="the watcher records the end")
    rec = k.book.records["sleeper"]
    assert rec.state == JobState.KILLED
    assert [e.record.name for e in ended] == ["sleeper"] and not ended[0].exited_ok
    await runner.close()


async def test_finish_takes_the_cause_of_an_end_as_its_argument(tmp_path: Path) -> None:
    """The same end (SIGTERM) is a kill when the caller says so, a failure when it does not:
    no state shared with the kill decides it."""
    k = kit(tmp_path)
    runner = runner_of(k, Topic(k.bus), lambda name: asyncio.sleep(0))
    status = ExitStatus(None, 15)
    for name, killed, state in (("sleeper", True, JobState.KILLED), ("quick", False, None)):
        rec = k.book.records[name]
        rec.state, rec.attempt, rec.pid = JobState.RUNNING, 1, None
        k.book.commit(rec)
        runner.finish(name, status, killed=killed, tail="")
        if state is not None:
            assert k.book.records[name].state == state
        else:
            assert k.book.records[name].state != JobState.KILLED


async def test_the_log_watch_alone_tells_of_growth_and_forgets_an_ended_run(tmp_path: Path) -> None:
    """A running job's log growth is told once per size, its progress read once per size;
    after ``forget`` (its run ended) the same size is told afresh, for the next attempt."""
    k = kit(tmp_path)
    log = tmp_path / "sleeper.log"
    log.write_text("step 1\n")
    rec = k.book.records["sleeper"]
    rec.state, rec.attempt, rec.log = JobState.RUNNING, 1, str(log)
    k.book.commit(rec)
    reads: list[int] = []

    def read_progress(name: str, rec: object, size: int) -> bool:
        reads.append(size)
        return True

    logs = LogWatch(k.book, k.bus, LocalExecutor(), read_progress)

    def told() -> list[int]:
        return [e.size for e in k.events if isinstance(e, LogGrew) and e.name == "sleeper"]

    task = asyncio.create_task(logs.watch_logs())
    try:
        await until(lambda: told() == [7] and reads == [7], what="the first size told")
        log.write_text("step 1\nstep 2\n")
        await until(lambda: told() == [7, 14] and reads == [7, 14], what="the growth told")
        logs.forget("sleeper")
        await until(lambda: told() == [7, 14, 14], what="the same size told afresh")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_occupancy_alone_reads_the_gpus_and_publishes_them(tmp_path: Path) -> None:
    k = kit(tmp_path)
    occupancy = Occupancy(
        book=k.book,
        bus=k.bus,
        executor=LocalExecutor(),
        reader=k.reader,
        planner=k.planner,
        quarantine=k.quarantine,
        paths=queue_paths(k.path),
        config=k.config,
    )
    assert occupancy.usage() == []  # nothing of ours runs
    await occupancy.read()
    decision = occupancy.decide()
    assert [s.name for s in decision.starts] == ["sleeper", "quick"]
    occupancy.publish_gpus()
    assert occupancy.gpus is not None and len(occupancy.gpus.snapshot.gpus) == 1
    assert occupancy.poll_interval(2.0) == 2.0  # no job ended on real GPUs


async def test_the_operations_alone_pause_the_queue_and_hold_a_job(tmp_path: Path) -> None:
    k = kit(tmp_path)
    runner = runner_of(k, Topic(k.bus), lambda name: asyncio.sleep(0))
    intake = intake_of(k)
    ops = Operations(
        book=k.book,
        bus=k.bus,
        executor=LocalExecutor(),
        runner=runner,
        intake=intake,
        quarantine=k.quarantine,
        config=k.config,
        queue_path=k.path,
        kick=k.kick,
    )
    await ops.pause_queue()
    assert k.config.paused and k.book.store.get_meta("paused") == "1"
    assert QueuePaused(True) in k.events
    await ops.pause(["quick"])
    assert k.book.records["quick"].state == JobState.HELD
    await ops.kill(["quick"])  # a waiting job: killed at once, nothing to signal
    assert k.book.records["quick"].state == JobState.KILLED
    assert len(k.kicks) == 3  # a pass after each


def intake_of(k: Kit) -> Intake:
    source = QueueSource(k.path, k.bus, lambda: None)
    source.first()
    return Intake(
        source=source,
        book=k.book,
        bus=k.bus,
        config=k.config,
        user_rules=UserRules(k.bus),
        pool=lambda: None,
        kick=k.kick,
        stopping=lambda: False,
    )


def test_the_intake_alone_takes_a_queue_into_the_book_and_the_config(tmp_path: Path) -> None:
    k = kit(tmp_path)
    k.config.settings = Settings()
    intake = intake_of(k)
    k.path.write_text(QUEUE + '\n[settings]\npoll = "7s"\n')
    intake.take(load_queue(k.path))
    assert k.config.settings.poll_s == 7.0
    assert k.config.rules is not None


def test_forecasts_and_notifications_follow_a_run_s_end_on_its_topic(tmp_path: Path) -> None:
    k = kit(tmp_path)
    forecast = Forecast(k.book, LocalExecutor(), queue_paths(k.path))
    notifying = Notifying(k.bus, k.book, k.config, k.path)
    ends: Topic[RunEnded] = Topic(k.bus)
    ends.subscribe(forecast.on_run_ended)
    ends.subscribe(notifying.on_run_ended)
    forecast._runtimes_stale = False
    rec = k.book.records["quick"]
    rec.state = JobState.DONE
    ends.publish(RunEnded(rec, exited_ok=True))
    assert forecast._runtimes_stale  # a new runtime to count
    assert notifying._ends_since_done == 1  # an end, counted for "queue done"


def test_a_failing_subscriber_of_a_topic_is_told_and_stops_nobody(tmp_path: Path) -> None:
    bus = EventBus()
    told: list[Event] = []
    bus.subscribe(told.append)
    topic: Topic[int] = Topic(bus)
    got: list[int] = []

    def broken(n: int) -> None:
        raise RuntimeError("broken")

    topic.subscribe(broken)
    topic.subscribe(got.append)
    topic.publish(7)
    assert got == [7]
    assert any(isinstance(e, Notice) and "broken" in e.text for e in told)


def test_the_book_invalidates_its_own_caches(tmp_path: Path) -> None:
    """A change no commit tells of (a start undone) is made known through the book itself."""
    k = kit(tmp_path)
    rec = k.book.records["quick"]
    rec.state = JobState.RUNNING
    k.book.commit(rec)
    assert k.book.active_names() == ["quick"]
    rec.state = JobState.QUEUED  # undone without a commit, as a start whose save failed
    assert k.book.active_names() == ["quick"]  # the cache still says so
    version = k.book.version
    k.book.invalidate()
    assert k.book.version == version + 1
    assert k.book.active_names() == []


def test_the_one_builder_sets_what_a_command_asks(tmp_path: Path) -> None:
    path = write_queue(tmp_path, QUEUE)
    engine = build_engine(path, fake_gpus="1x80G", exits_with_run=True, taking_over=True)
    assert isinstance(engine, Engine)
    assert engine.exits_with_run and engine.taking_over and not engine.started
    assert engine.queue_path == path


def test_commands_build_their_engine_through_the_one_builder() -> None:
    """No module of the package or of the benchmarks but the builder calls Engine(...)."""
    callers = []
    repo = PACKAGE_DIR.parent.parent
    for file in [*PACKAGE_DIR.rglob("*.py"), *(repo / "benchmarks").rglob("*.py")]:
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Engine":
                callers.append(file.relative_to(repo).as_posix())
    assert callers == ["app/gtui/core/sched/build.py"]


def test_the_engine_is_a_class_of_parts_not_of_mixins() -> None:
    """At most 30 methods (every def in the class) and 400 lines, and no base class."""
    source = (PACKAGE_DIR / "core" / "sched" / "engine.py").read_text()
    cls = next(
        n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Engine"
    )
    assert cls.bases == []
    defs = [n for n in ast.walk(cls) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    assert len(defs) <= 30, [d.name for d in defs]
    assert cls.end_lineno is not None and cls.end_lineno - cls.lineno + 1 <= 400


@pytest.mark.parametrize("name", ["kill", "pause", "resume", "retry", "add", "move"])
def test_the_operations_keep_their_names_on_the_engine(tmp_path: Path, name: str) -> None:
    """The control socket and the dashboard call ``engine.kill``: it is the operations'."""
    engine = Engine(write_queue(tmp_path, QUEUE), control=False)
    engine.parts = SimpleNamespace(ops=SimpleNamespace(**{name: lambda: name}))
    assert getattr(engine, name)() == name
    assert getattr(Engine, name) is Engine.__dict__[name]  # on the class: itself
