"""The dashboard's first fill takes the queue the engine's start published, instead of making
every job's view a second time and then applying both (at 100,000 jobs each pass over
every job's view is ~0.3 s of the first screen). Events after it still apply on top."""

from __future__ import annotations

from pathlib import Path

import pytest

from gtui.core.exec.memory import MemoryExecutor
from gtui.core.sched.engine import Engine
from gtui.core.state.book import JobBook
from gtui.ui.app import GtuiApp
from gtui.ui.events import EventBuffer
from tests.conftest import write_queue
from tests.waiting import pilot_until as until


async def test_the_first_screen_makes_every_jobs_view_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = '[settings]\npoll = "0.1s"\nmax_parallel = 1\n\n' + "".join(
        f'[[jobs]]\nname = "j{i}"\ncmd = "sleep 3600"\ngpus = 1\nmem = "10G"\n\n' for i in range(30)
    )
    q = write_queue(tmp_path, body)
    fills: list[int] = []
    real = JobBook.views

    def counting(self: JobBook, *, copies: bool = True) -> list:  # type: ignore[type-arg]
        out = real(self, copies=copies)
        fills.append(len(out))
        return out

    monkeypatch.setattr(JobBook, "views", counting)
    engine = Engine(q, fake_gpus="2x80G", executor=MemoryExecutor(), control=False)
    app = GtuiApp(engine, host="testhost")
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: app.main.ready and len(app.main.table) == 30)
            assert fills == [30]  # the start's QueueChanged, used by the first fill
            # ... and what came after it applies on top: j0 runs.
            await until(pilot, lambda: app.main.table.view("j0").record.active)
    finally:
        await engine.shutdown(kill_jobs=True)


def test_take_queue_leaves_the_events_after_it() -> None:
    from gtui.core.api import JobChanged, QueueChanged, freeze
    from gtui.core.model import JobRecord, JobSpec

    buffer = EventBuffer()
    assert buffer.take_queue() is None
    buffer.add(QueueChanged(()))
    view = freeze(JobSpec(name="a", cmd="true"), JobRecord(name="a"), 0)
    buffer.add(JobChanged(view))
    assert buffer.take_queue() == ()
    batch = buffer.take()
    assert batch.queue is None and list(batch.jobs.values()) == [view]


async def test_the_screen_says_it_reads_the_file_until_the_engine_has_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 100,000-job file takes seconds to read. Meanwhile the terminal shows a
    painted screen that says so, not "no jobs" nor a mode or a dispatch state not read yet;
    the engine's loop (its first placement pass) starts once the filled table is painted."""
    from gtui.ui.widgets.header import HeaderBar

    q = write_queue(
        tmp_path,
        '[settings]\nmode = "pack"\n\n'
        + "".join(f'[[jobs]]\nname = "j{i}"\ncmd = "sleep 3600"\n\n' for i in range(3)),
    )
    engine = Engine(q, fake_gpus="2x80G", executor=MemoryExecutor(), control=False)
    app = GtuiApp(engine, host="testhost")
    seen: list[tuple[str, str, bool]] = []
    real_start, real_run = Engine._start, Engine.run

    async def starting(self: Engine) -> object:
        main = app.main
        header = main.query_one(HeaderBar).render().plain
        title = str(main.query_one("#queue-box").border_title)
        seen.append((header, title, not main.table._after_paint))  # painted: callbacks gone
        return await real_start(self)

    async def running(self: Engine, **kw: bool) -> int:
        seen.append(("run", str(len(app.main.table)), not app.main.table._after_paint))
        return await real_run(self, **kw)

    monkeypatch.setattr(Engine, "_start", starting)
    monkeypatch.setattr(Engine, "run", running)
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: app.main.ready and len(app.main.table) == 3)
            await until(pilot, lambda: len(seen) == 2, what="the engine's loop")
            header, title, painted = seen[0]
            assert "reading q.toml…" in header and painted
            assert "no jobs" not in header and "pack" not in header and " ON" not in header
            assert title == "Queue · reading q.toml…"
            assert seen[1] == ("run", "3", True)  # after the filled table's paint
            now = app.main.query_one(HeaderBar).render().plain
            assert "pack" in now and "reading" not in now
    finally:
        await engine.shutdown(kill_jobs=True)
