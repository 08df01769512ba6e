"""The whole scheduler on the memory executor: the executor seam is all the engine needs.

Every job here runs in a :class:`MemoryExecutor` (timers in the event loop, pids from 2**30 up),
on fake GPUs, with no control socket: placement, retries and diagnosis, kill, pause and resume,
re-adoption after a restart, ``after``, launch failures and leftovers, with no OS process.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gtui.core.api import Event, JobChanged
from gtui.core.exec.local import LocalExecutor
from gtui.core.exec.memory import MemoryExecutor
from gtui.core.model import JobState
from gtui.core.sched.engine import Engine
from tests.conftest import write_queue
from tests.waiting import until

FIRST_MEMORY_PID = 2**30  # the memory executor's pids start here, above any real pid
SETTINGS = '[settings]\npoll = "0.1s"\nkill_grace = "1s"\n\n'


@pytest.fixture(autouse=True)
def _no_local_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch through the real executor would be a bug here: make it fail loudly."""

    def refuse(self: LocalExecutor, req: object) -> None:
        raise AssertionError(f"a real process was launched: {req!r}")

    monkeypatch.setattr(LocalExecutor, "launch", refuse)


class Watch:
    """Subscribed to an engine: every pid seen in a JobChanged, and the jobs the executor ran
    at once, sampled at each JobChanged."""

    def __init__(self, engine: Engine, executor: MemoryExecutor) -> None:
        self.executor = executor
        self.pids: set[int] = set()
        self.max_running = 0
        self.samples: list[list[str]] = []
        engine.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        if not isinstance(event, JobChanged):
            return
        if event.job.record.pid is not None:
            self.pids.add(event.job.record.pid)
        running = self.executor.running()
        self.samples.append(running)
        self.max_running = max(self.max_running, len(running))


def memory_engine(q: Path, executor: MemoryExecutor, gpus: str = "2x80G") -> Engine:
    return Engine(q, fake_gpus=gpus, executor=executor, control=False)


async def run_to_end(engine: Engine, timeout: float = 30.0) -> int:
    return await asyncio.wait_for(engine.run(exit_when_idle=True), timeout)


def assert_memory_only(engine: Engine, executor: MemoryExecutor, watch: Watch) -> None:
    """Jobs ran, and every one of them in the memory executor: no real pid anywhere."""
    assert executor.launched, "the memory executor launched nothing"
    pids = set(watch.pids)
    pids.update(v.record.pid for v in engine.jobs() if v.record.pid is not None)
    assert pids, "no job recorded a pid"
    assert all(pid >= FIRST_MEMORY_PID for pid in pids), sorted(pids)


def names(executor: MemoryExecutor) -> list[str]:
    return [req.name for req in executor.launched]


async def test_a_queue_runs_to_the_end_two_at_a_time_on_two_gpus(tmp_path: Path) -> None:
    jobs = "".join(
        f'[[jobs]]\nname = "j{i}"\ncmd = "echo job {i}; sleep 0.15; exit 0"\n'
        f'gpus = 1\nmem = "10G"\n\n'
        for i in range(6)
    )
    q = write_queue(tmp_path, SETTINGS + jobs)
    executor = MemoryExecutor()
    engine = memory_engine(q, executor)
    watch = Watch(engine, executor)

    assert await run_to_end(engine) == 0

    assert_memory_only(engine, executor, watch)
    assert sorted(names(executor)) == [f"j{i}" for i in range(6)]  # each once
    for i in range(6):
        rec = engine.view(f"j{i}").record
        assert rec.state == JobState.DONE, (rec.name, rec.state, rec.diagnosis)
        assert rec.exit_code == 0 and rec.signal is None
        assert rec.attempt == 1
        assert len(rec.gpus) == 1 and rec.gpus[0] in (0, 1)
        assert Path(str(rec.log)).read_text() == f"job {i}\n"
    # Shared mode, one-GPU jobs, two GPUs: never more than two at once, and two did run at once.
    assert watch.max_running == 2, watch.samples
    assert executor.running() == []


async def test_a_failing_job_is_diagnosed_and_retried_once(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        SETTINGS
        + """
[[jobs]]
name = "oom"
cmd = "echo 'RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB'; exit 1"
gpus = 1
mem = "10G"
retries = 1
""",
    )
    executor = MemoryExecutor()
    engine = memory_engine(q, executor)
    watch = Watch(engine, executor)

    assert await run_to_end(engine) == 1

    assert_memory_only(engine, executor, watch)
    rec = engine.view("oom").record
    assert rec.state == JobState.FAILED
    assert rec.attempt == 2
    assert rec.exit_code == 1 and rec.signal is None
    assert rec.diagnosis is not None and rec.diagnosis.kind == "cuda_oom", rec.diagnosis
    assert "CUDA out of memory" in rec.diagnosis.line
    assert [(r.name, r.attempt) for r in executor.launched] == [("oom", 1), ("oom", 2)]
    assert rec.mem_mib is not None and rec.mem_mib > 10 * 1024  # the retry asked for more
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert logs == ["oom.1.log", "oom.2.log"]
    assert len(watch.pids) == 2  # two attempts, two memory pids


async def test_kill_a_running_job(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        SETTINGS + '[[jobs]]\nname = "k"\ncmd = "sleep 30"\ngpus = 1\nmem = "10G"\n',
    )
    executor = MemoryExecutor()
    engine = memory_engine(q, executor)
    watch = Watch(engine, executor)
    task = asyncio.create_task(run_to_end(engine))
    try:
        await until(
            lambda: engine.started and engine.view("k").record.state == JobState.RUNNING,
            what="k running",
        )
        assert executor.running() == ["k"]
        await engine.kill(["k"])
        await until(
            lambda: engine.view("k").record.state == JobState.KILLED, what="k recorded killed"
        )
        assert await task == 1
    finally:
        if not task.done():
            await engine.shutdown(kill_jobs=True)
            task.cancel()

    assert_memory_only(engine, executor, watch)
    rec = engine.view("k").record
    assert rec.state == JobState.KILLED
    assert rec.signal == 15
    assert executor.running() == []
    assert names(executor) == ["k"]


async def test_pause_suspends_in_the_executor_and_resume_finishes(tmp_path: Path) -> None:
    duration = 0.3
    q = write_queue(
        tmp_path,
        SETTINGS
        + f'[[jobs]]\nname = "p"\ncmd = "sleep {duration}; exit 0"\ngpus = 1\nmem = "10G"\n',
    )
    executor = MemoryExecutor()
    engine = memory_engine(q, executor)
    watch = Watch(engine, executor)
    task = asyncio.create_task(run_to_end(engine))
    try:
        await until(
            lambda: engine.started and engine.view("p").record.state == JobState.RUNNING,
            what="p running",
        )
        await engine.pause(["p"])
        paused_at = time.monotonic()
        assert engine.view("p").record.state == JobState.SUSPENDED
        # Past the job's whole duration, frozen: it is still alive, and still suspended.
        await until(
            lambda: time.monotonic() > paused_at + duration + 0.2,
            what="the job's duration to pass",
        )
        assert executor.running() == ["p"]
        rec = engine.view("p").record
        assert rec.state == JobState.SUSPENDED and rec.exit_code is None
        assert not task.done()  # a suspended job keeps the engine busy

        await engine.resume(["p"])
        assert engine.view("p").record.state == JobState.RUNNING
        assert executor.running() == ["p"]  # it still had time to go
        assert await task == 0
    finally:
        if not task.done():
            await engine.shutdown(kill_jobs=True)
            task.cancel()

    assert_memory_only(engine, executor, watch)
    rec = engine.view("p").record
    assert rec.state == JobState.DONE and rec.exit_code == 0
    assert rec.started_at is not None and rec.ended_at is not None
    assert rec.ended_at - rec.started_at >= duration + 0.2  # its clock stopped while paused
    assert names(executor) == ["p"]


async def test_a_second_engine_readopts_a_running_job_without_launching_it_again(
    tmp_path: Path,
) -> None:
    q = write_queue(
        tmp_path,
        SETTINGS + '[[jobs]]\nname = "long"\ncmd = "sleep 5"\ngpus = 1\nmem = "10G"\n',
    )
    executor = MemoryExecutor()

    first = memory_engine(q, executor)
    watch_a = Watch(first, executor)
    task_a = asyncio.create_task(first.run())
    try:
        await until(
            lambda: first.started and first.view("long").record.state == JobState.RUNNING,
            what="long running under the first engine",
        )
        pid = first.view("long").record.pid
        await first.shutdown()  # leaves the job running
        await asyncio.wait_for(task_a, 30)
    finally:
        if not task_a.done():
            task_a.cancel()
    assert_memory_only(first, executor, watch_a)
    assert executor.running() == ["long"]
    assert len(executor.launched) == 1

    second = memory_engine(q, executor)
    watch_b = Watch(second, executor)
    await second.start()
    task_b = asyncio.create_task(run_to_end(second))
    try:
        rec = second.view("long").record
        assert rec.state == JobState.RUNNING and rec.pid == pid  # adopted, not started again
        executor.finish("long")
        assert await task_b == 0
    finally:
        if not task_b.done():
            await second.shutdown(kill_jobs=True)
            task_b.cancel()

    assert len(executor.launched) == 1
    rec = second.view("long").record
    assert rec.state == JobState.DONE and rec.exit_code == 0
    assert rec.pid == pid and rec.attempt == 1
    assert executor.running() == []
    assert all(p >= FIRST_MEMORY_PID for p in watch_b.pids)


async def test_after_starts_a_job_only_once_its_dependency_is_done(tmp_path: Path) -> None:
    # b comes first in the file and a GPU is free for it: only `after` holds it back.
    q = write_queue(
        tmp_path,
        SETTINGS
        + """
[[jobs]]
name = "b"
cmd = "echo b"
gpus = 1
mem = "10G"
after = ["a"]

[[jobs]]
name = "a"
cmd = "sleep 0.2; echo a"
gpus = 1
mem = "10G"
""",
    )
    executor = MemoryExecutor()
    engine = memory_engine(q, executor)
    watch = Watch(engine, executor)

    assert await run_to_end(engine) == 0

    assert_memory_only(engine, executor, watch)
    assert names(executor) == ["a", "b"]
    a, b = engine.view("a").record, engine.view("b").record
    assert a.state == JobState.DONE and b.state == JobState.DONE
    assert a.ended_at is not None and b.started_at is not None
    assert b.started_at >= a.ended_at
    # Whenever b ran, a no longer did.
    assert all(not ("b" in s and "a" in s) for s in watch.samples), watch.samples


async def test_a_missing_cwd_fails_the_launch(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        SETTINGS
        + """
[[jobs]]
name = "nowhere"
cmd = "echo hi"
gpus = 1
mem = "10G"
cwd = "missing"

[[jobs]]
name = "ok"
cmd = "echo ok"
gpus = 1
mem = "10G"
""",
    )
    executor = MemoryExecutor()
    engine = memory_engine(q, executor)
    watch = Watch(engine, executor)

    assert await run_to_end(engine) == 1

    assert_memory_only(engine, executor, watch)
    assert names(executor) == ["ok"]  # the executor refused the other one
    rec = engine.view("nowhere").record
    assert rec.state == JobState.FAILED
    assert rec.pid is None
    assert rec.diagnosis is not None and rec.diagnosis.kind == "launch", rec.diagnosis
    assert "does not exist" in rec.diagnosis.line
    assert engine.view("ok").record.state == JobState.DONE


async def test_processes_left_behind_become_a_warning(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        SETTINGS + '[[jobs]]\nname = "leaky"\ncmd = "sleep 30"\ngpus = 1\nmem = "10G"\n',
    )
    executor = MemoryExecutor()
    engine = memory_engine(q, executor)
    watch = Watch(engine, executor)
    task = asyncio.create_task(run_to_end(engine))
    try:
        await until(
            lambda: engine.started and engine.view("leaky").record.state == JobState.RUNNING,
            what="leaky running",
        )
        token = engine.view("leaky").record.token
        assert token
        executor.leave_behind(token, [123])
        executor.finish("leaky")
        assert await task == 0
    finally:
        if not task.done():
            await engine.shutdown(kill_jobs=True)
            task.cancel()

    assert_memory_only(engine, executor, watch)
    rec = engine.view("leaky").record
    assert rec.state == JobState.DONE
    assert any("left 1 process running" in w for w in rec.warnings), rec.warnings
    assert any("pid 123" in w for w in rec.warnings), rec.warnings
