"""Records of jobs that never ran are saved after the first pass, a chunk at a time with the
loop free in between (one 100,000-record transaction held the dashboard's first
screens for ~2 s), and a record saved with its waiting reason is not saved again for it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gtui.core.bus import EventBus
from gtui.core.exec.memory import MemoryExecutor
from gtui.core.model import JobRecord
from gtui.core.sched import engine as engine_mod
from gtui.core.sched.engine import Engine
from gtui.core.state.book import JobBook
from gtui.core.state.store import Store
from tests.conftest import write_queue
from tests.waiting import until


def test_deferred_records_are_saved_in_chunks(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        book = JobBook(store, EventBus(), "q.toml")
        book.deferred = [JobRecord(name=f"j{i}", reason="waits") for i in range(10)]
        book.reasons_dirty = {f"j{i}" for i in range(10)} | {"other"}
        assert book.save_deferred(limit=4) is True
        assert len(store.load()) == 4 and len(book.deferred) == 6
        assert book.save_deferred(limit=4) is True
        assert book.save_deferred(limit=4) is False
        saved = store.load()
        assert sorted(saved) == sorted(f"j{i}" for i in range(10))
        assert saved["j3"].reason == "waits"
        assert book.reasons_dirty == {"other"}  # saved with their reasons already
        assert book.save_deferred() is False  # nothing left


async def test_the_engine_saves_every_new_record_in_turns_of_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_mod, "DEFERRED_CHUNK", 7)
    body = '[settings]\npoll = "0.1s"\n\n' + "".join(
        f'[[jobs]]\nname = "j{i}"\ncmd = "sleep 3600"\ngpus = 1\nmem = "70G"\n\n' for i in range(50)
    )
    q = write_queue(tmp_path, body)
    engine = Engine(q, fake_gpus="1x80G", executor=MemoryExecutor(), control=False)
    turns: list[int] = []
    real = JobBook.save_deferred

    def counting(self: JobBook, limit: int | None = None) -> bool:
        turns.append(len(self.deferred))
        return real(self, limit)

    monkeypatch.setattr(JobBook, "save_deferred", counting)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.started and not engine._book.deferred)
        with Store(engine.paths.db) as store:
            assert len(store.load()) == 50
        assert turns[0] == 50 and len([t for t in turns if t]) >= 50 // 7
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()
