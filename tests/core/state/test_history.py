"""The attempts history: one row per ended attempt, in the queue's state db, read read-only."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from gtui.core.model import Diagnosis, JobRecord, JobState
from gtui.core.sched.engine import Engine
from gtui.core.state.history import attempts, attempts_of, record_attempt
from gtui.core.state.store import Store
from tests.conftest import write_queue


async def test_every_ended_attempt_is_recorded_with_how_it_ended(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"

        [[jobs]]
        name = "flaky"
        gpus = 1
        mem = "10G"
        retries = 1
        cmd = "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'; exit 1"

        [[jobs]]
        name = "fine"
        gpus = 0
        cmd = "true"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    code = await asyncio.wait_for(engine.run(exit_when_idle=True), 30)
    assert code == 1
    db = engine.paths.db
    rows = attempts(db, "flaky")
    assert [a.attempt for a in rows] == [1, 2]
    first, second = rows
    assert first.state == "queued" and second.state == "failed"  # retried, then final
    assert first.exit_code == 1 and first.signal is None
    assert first.diag_kind == "cuda_oom" and "Tried to allocate" in (first.diag_line or "")
    assert first.gpus == (0,) and (first.log or "").endswith("flaky.1.log")
    assert (second.log or "").endswith("flaky.2.log")
    assert first.started_at and first.ended_at and first.started_at <= first.ended_at
    assert (second.started_at or 0) >= (first.ended_at or 0)
    both = attempts_of(db, ["flaky", "fine"])
    assert [a.state for a in both["fine"]] == ["done"] and both["fine"][0].diag_kind is None
    assert attempts(db, "nobody") == []


def test_no_db_or_no_table_reads_as_no_history(tmp_path: Path) -> None:
    assert attempts(tmp_path / "missing.db", "x") == []
    db = tmp_path / "old.db"
    Store(db).close()  # a db an older gtui made: records, no history table
    assert attempts(db, "x") == []


def test_a_store_that_cannot_write_drops_the_row_and_never_raises(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = Store(db)
    rec = JobRecord(name="a", state=JobState.FAILED, attempt=1, gpus=(1,))
    rec.diagnosis = Diagnosis("error", "boom", "hint")
    record_attempt(store, rec)
    record_attempt(store, rec)  # the same attempt again (a recovery): replaced, not doubled
    assert [(a.attempt, a.diag_line) for a in attempts(db, "a")] == [(1, "boom")]
    store.close()
    record_attempt(store, JobRecord(name="a", attempt=2))  # closed: dropped, no exception
    readonly = Store(db, readonly=True)
    record_attempt(readonly, JobRecord(name="a", attempt=3))
    readonly.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM attempts").fetchone()[0] == 1
