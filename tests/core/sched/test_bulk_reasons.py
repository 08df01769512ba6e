"""A long queue's first walk of waiting reasons is told as one whole queue, not one event per
job (100,000 ReasonChanged events, each a view, a publish and a fold in the
dashboard's buffer, held its first screen), but only when every subscriber that takes
ReasonChanged also takes QueueChanged; the others still get one event per job."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gtui.core.api import Event, QueueChanged, ReasonChanged
from gtui.core.exec.memory import MemoryExecutor
from gtui.core.sched import planner
from gtui.core.sched.engine import Engine
from tests.conftest import write_queue
from tests.waiting import until

N = 20


def queue(tmp_path: Path) -> Path:
    body = '[settings]\npoll = "0.1s"\nmax_parallel = 1\n\n' + "".join(
        f'[[jobs]]\nname = "j{i}"\ncmd = "sleep 3600"\ngpus = 1\nmem = "10G"\n\n' for i in range(N)
    )
    return write_queue(tmp_path, body)


async def run_until_explained(engine: Engine, got: list[Event]) -> None:
    task = asyncio.create_task(engine.run())
    try:
        await until(
            lambda: (
                engine.started and all(v.record.reason for v in engine.jobs() if v.record.waiting)
            ),
            what="every waiting job's reason",
        )
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


async def test_many_reasons_at_once_are_one_whole_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planner, "BULK_REASONS", 5)
    engine = Engine(queue(tmp_path), fake_gpus="2x80G", executor=MemoryExecutor(), control=False)
    got: list[Event] = []
    engine.subscribe(got.append)
    await run_until_explained(engine, got)
    assert not [e for e in got if isinstance(e, ReasonChanged)]
    whole = [e for e in got if isinstance(e, QueueChanged)]
    assert len(whole) == 2  # the start's, then the walk's
    reasons = {v.spec.name: v.record.reason for v in whole[-1].jobs}
    assert all(reasons[f"j{i}"] for i in range(1, N)), reasons


async def test_a_subscriber_without_queue_changed_still_gets_each_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planner, "BULK_REASONS", 5)
    engine = Engine(queue(tmp_path), fake_gpus="2x80G", executor=MemoryExecutor(), control=False)
    got: list[Event] = []
    engine.subscribe(got.append, (ReasonChanged,))
    await run_until_explained(engine, got)
    names = {e.job.spec.name for e in got if isinstance(e, ReasonChanged)}
    assert names == {f"j{i}" for i in range(1, N)}
