"""The SQLite state store, on real files."""

from __future__ import annotations

import dataclasses
import sqlite3
import stat
import threading
from pathlib import Path

import pytest

from gtui.core.model import Diagnosis, JobRecord, JobState
from gtui.core.state import backup as backup_mod
from gtui.core.state import store as store_mod
from gtui.core.state.backup import Backups, backup_path, damage, open_checked, write_backup
from gtui.core.state.store import (
    SCHEMA_VERSION,
    CorruptStoreError,
    Store,
    StoreError,
    open_store_readonly,
)


def full_record(name: str = "train/lr=0.1 “q”") -> JobRecord:
    """A record where every field differs from its default."""
    return JobRecord(
        name=name,
        state=JobState.FAILED,
        attempt=3,
        first_attempt=2,
        gpus=(2, 0, 7),
        mem_mib=36_864,
        pid=12345,
        create_time=1_712_345_678.91,
        exit_code=None,
        signal=9,
        started_at=1_712_345_679.123456,
        ended_at=1_712_349_999.5,
        log="/tmp/logs/train.3.log",
        reason="needs 2 GPUs with 35G: 1 eligible",
        reason_at=1_712_000_100.5,
        after_edit_of="train-old-1a2b3c",
        quick_fails=3,
        retry_at=1_712_000_200.75,
        diagnosis=Diagnosis(kind="cuda_oom", line="CUDA out of memory. Tried…", hint="grow"),
        warnings=["process 99 on GPU 3, not assigned", "second\nline"],
        queued_since=1_712_000_000.25,
        peak_mib=40_000,
        peak_gpu_mib=[40_000, 12_000, 0],
        host_peak_mib=9_000,
        port=29_500,
        status_file="/tmp/q/.gtui/q.run/train.3.status",
        token="0f" * 16,
        node="node2",
        requeued_as="preempted",
        preempted_by="urgent",
        preempted_at=1_700_000_400.0,
        preemptions=2,
        requeues=1,
        preempt_for="urgent",
        preempt_signalled=True,
        boot_id="b0b1",
        links=[("wandb", "https://wandb.ai/a/p/runs/r1"), ("mlflow", "http://h/#/experiments/1")],
    )


def db(tmp_path: Path) -> Path:
    return tmp_path / "q" / ".gtui" / "q.db"


def test_every_field_round_trips(tmp_path: Path) -> None:
    rec = full_record()
    default = JobRecord(name="x")
    for f in dataclasses.fields(JobRecord):
        if f.name not in ("name", "exit_code"):  # exit_code None goes with a signal
            assert getattr(rec, f.name) != getattr(default, f.name), f"set {f.name} in the test"
    rec2 = dataclasses.replace(full_record("other"), exit_code=3, signal=None, diagnosis=None)
    with Store(db(tmp_path)) as s:
        s.save(rec)
        s.save(rec2)
        loaded = s.load()
    assert loaded == {rec.name: rec, rec2.name: rec2}
    assert isinstance(loaded[rec.name].state, JobState)
    assert isinstance(loaded[rec.name].gpus, tuple)


def test_persists_across_reopen_in_save_order(tmp_path: Path) -> None:
    names = ["c", "a", "b"]
    s = Store(db(tmp_path))
    s.save_many(JobRecord(name=n) for n in names)
    s.save(dataclasses.replace(JobRecord(name="a"), state=JobState.DONE, exit_code=0))  # upsert
    s.set_meta("paused", "1")
    s.set_meta("paused", "0")
    s.set_meta("gpus", '{"gpus": []}')
    s.close()
    s = Store(db(tmp_path))
    loaded = s.load()
    assert list(loaded) == names
    assert loaded["a"].state is JobState.DONE and loaded["a"].exit_code == 0
    assert s.get_meta("paused") == "0"
    assert s.get_meta("gpus") == '{"gpus": []}'
    assert s.get_meta("nope") is None
    assert s.get_meta("schema") == str(SCHEMA_VERSION)
    s.delete("c")
    s.delete("never-there")
    s.close()
    with Store(db(tmp_path)) as s:
        assert list(s.load()) == ["a", "b"]


def test_committed_before_close(tmp_path: Path) -> None:
    """A save is visible to another connection at once: nothing waits for close()."""
    s = Store(db(tmp_path))
    s.save(full_record())
    other = sqlite3.connect(db(tmp_path))
    assert other.execute("SELECT name, state FROM jobs").fetchall() == [
        (full_record().name, "failed")
    ]
    other.close()
    s.close()


def test_wal_normal_sync_and_modes(tmp_path: Path) -> None:
    path = db(tmp_path)
    s = Store(path)
    s.save(full_record())
    assert s.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL (see store.py)
    assert s.conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    other = sqlite3.connect(path)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    other.close()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    s.close()


def test_loose_permissions_are_tightened(tmp_path: Path) -> None:
    path = db(tmp_path)
    path.parent.mkdir(parents=True, mode=0o755)
    path.parent.chmod(0o755)
    Store(path).close()
    path.chmod(0o644)
    Store(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_corrupt_file_is_a_store_error_with_a_recovery_path(tmp_path: Path) -> None:
    path = db(tmp_path)
    path.parent.mkdir(parents=True, mode=0o700)
    junk = b"this is not sqlite at all\n" * 200
    path.write_bytes(junk)
    with pytest.raises(StoreError) as err:
        Store(path)
    msg = str(err.value)
    assert isinstance(err.value, CorruptStoreError)
    assert "damaged" in msg and "file is not a database" in msg
    assert "gtui doctor QUEUE.toml --repair" in msg and "nothing that ran runs again" in msg
    assert "queue file and logs are untouched" in msg
    assert path.read_bytes() == junk  # never silently replaced
    with pytest.raises(CorruptStoreError, match="damaged"):
        open_store_readonly(path)


def _saved(path: Path, n: int) -> Store:
    s = Store(path)
    s.save_many(JobRecord(name=f"j{i}", state=JobState.DONE, attempt=1) for i in range(n))
    s.set_meta("paused", "1")
    return s


def test_the_backup_holds_what_the_wal_held_and_needs_no_wal(tmp_path: Path) -> None:
    """Written while every commit is still in the WAL, the backup is whole on its own: the
    WAL deleted (and the scheduler killed), it still has every record."""
    path = db(tmp_path)
    s = _saved(path, 30)
    assert Path(f"{path}-wal").stat().st_size > 0  # the commits are in the WAL, not the file
    write_backup(path)
    bak = backup_path(path)
    assert not Path(f"{bak}-wal").exists()
    with Store(bak, readonly=True) as b:
        assert len(b.load()) == 30 and b.get_meta("paused") == "1"
    s.close()
    assert stat.S_IMODE(bak.stat().st_mode) == 0o600


@pytest.mark.parametrize("how", ["junk", "empty", "a bad record"])
def test_a_damaged_database_is_set_aside_and_rebuilt_from_its_backup(
    tmp_path: Path, how: str
) -> None:
    path = db(tmp_path)
    _saved(path, 30).close()
    write_backup(path)
    if how == "junk":
        path.write_bytes(b"not a database" * 500)
    elif how == "empty":
        path.write_bytes(b"")
    else:
        raw = sqlite3.connect(path)
        raw.execute("UPDATE jobs SET data = '{not json' WHERE name = 'j3'")
        raw.commit()
        raw.close()
    broken = path.read_bytes()
    assert damage(path) is not None
    opened = open_checked(path)
    with opened.store as s:
        assert len(s.load()) == 30 and s.get_meta("paused") == "1"
    assert opened.rebuilt is not None and "rebuilt from its backup" in opened.rebuilt
    aside = list(path.parent.glob("q.db.broken-*"))
    if how == "empty":
        assert not aside  # nothing worth keeping
    else:
        assert [p.read_bytes() for p in aside if p.suffix != ".db-wal"][:1] == [broken]
        assert str(aside[0]) in opened.rebuilt


def test_a_damaged_database_without_a_backup_starts_empty_and_says_so(tmp_path: Path) -> None:
    path = db(tmp_path)
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_bytes(b"not a database" * 500)
    opened = open_checked(path)
    with opened.store as s:
        assert s.load() == {}
    assert opened.rebuilt is not None and "no usable backup" in opened.rebuilt


def test_a_whole_database_is_opened_as_it_is(tmp_path: Path) -> None:
    path = db(tmp_path)
    _saved(path, 3).close()
    opened = open_checked(path)
    with opened.store as s:
        assert len(s.load()) == 3
    assert opened.rebuilt is None and damage(path) is None


def test_unreadable_record_is_a_store_error(tmp_path: Path) -> None:
    path = db(tmp_path)
    Store(path).close()
    raw = sqlite3.connect(path)
    raw.execute("INSERT INTO jobs VALUES ('bad', 'queued', '{\"name\": \"bad\", \"state\": 5}', 0)")
    raw.commit()
    raw.close()
    with Store(path) as s, pytest.raises(StoreError, match="record of job 'bad'"):
        s.load()


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = db(tmp_path)
    with Store(path) as s:
        s.set_meta("schema", str(SCHEMA_VERSION + 1))
    with pytest.raises(StoreError, match="newer gtui"):
        Store(path)


def test_locked_database_is_a_store_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_MS", 50)
    path = db(tmp_path)
    s = Store(path)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the write lock
    try:
        with pytest.raises(StoreError, match="locked by another process"):
            s.save(full_record())
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    s.save(full_record())  # and it works once the lock is gone
    assert list(s.load()) == [full_record().name]
    s.close()


def test_readonly_view(tmp_path: Path) -> None:
    path = db(tmp_path)
    assert open_store_readonly(path) is None
    writer = Store(path)
    writer.save(full_record())
    writer.set_meta("scheduler_pid", "4242")
    ro = open_store_readonly(path)
    assert ro is not None
    assert ro.load() == {full_record().name: full_record()}  # read while the writer is open
    writer.save(JobRecord(name="new"))
    assert "new" in ro.load()
    assert ro.get_meta("scheduler_pid") == "4242"
    with pytest.raises(StoreError, match="read-only"):
        ro.save(JobRecord(name="x"))
    ro.close()
    writer.close()
    ro = open_store_readonly(path)  # no scheduler running
    assert ro is not None and set(ro.load()) == {full_record().name, "new"}
    ro.close()


def test_readonly_view_of_an_empty_file(tmp_path: Path) -> None:
    path = db(tmp_path)
    path.parent.mkdir(parents=True)
    path.touch()
    ro = open_store_readonly(path)
    assert ro is not None
    assert ro.load() == {} and ro.get_meta("paused") is None
    ro.close()


def test_save_from_threads(tmp_path: Path) -> None:
    s = Store(db(tmp_path))

    def work(i: int) -> None:
        for j in range(20):
            s.save(JobRecord(name=f"t{i}-{j}", attempt=j))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(s.load()) == 80
    s.close()


def test_closed_store_says_so(tmp_path: Path) -> None:
    s = Store(db(tmp_path))
    s.close()
    s.close()  # twice is fine
    with pytest.raises(StoreError, match="closed"):
        s.load()


def test_records_round_trip_exactly_through_the_fast_paths() -> None:
    """record_to_json leaves out the fields at their new record's value, and record_from_json
    fills them back in field order (a 100,000-job queue's start): the result must equal the
    record, and a document with every field (an older gtui's) must read the same."""
    import dataclasses as dc
    import json

    from gtui.core.model import Diagnosis, JobRecord, JobState
    from gtui.core.state.store import record_from_json, record_to_json

    rec = JobRecord(
        name="a",
        state=JobState.FAILED,
        attempt=2,
        gpus=(1, 3),
        mem_mib=1024,
        diagnosis=Diagnosis("cuda_oom", "CUDA out of memory", "lower the batch size"),
        warnings=["w1"],
        reason="needs 1 GPU",
    )
    text = record_to_json(rec)
    order = [f.name for f in dc.fields(JobRecord)]
    written = list(json.loads(text))
    assert written == [k for k in order if k in written]
    assert "pid" not in written and "quick_fails" not in written and "state" in written
    back = record_from_json(text)
    assert back == rec and type(back.gpus) is tuple and type(back.state) is JobState
    assert back.diagnosis == rec.diagnosis and back.warnings is not rec.warnings
    # Every field written, as an older gtui wrote them: the same record.
    everything = {f: getattr(rec, f) for f in order}
    everything |= {"state": "failed", "gpus": [1, 3], "diagnosis": dc.asdict(rec.diagnosis)}
    assert record_from_json(json.dumps(everything)) == rec
    # A waiting job's document is its few set fields; a 0.0 is not a left-out 0.
    waiting = JobRecord(name="w", mem_mib=70 * 1024, reason="max_parallel 2 reached")
    assert set(json.loads(record_to_json(waiting))) == {"name", "mem_mib", "reason", "queued_since"}
    assert record_from_json(record_to_json(waiting)) == waiting
    odd = JobRecord(name="o", exit_code=0, quick_fails=0, started_at=0.0, first_attempt=0)
    back_odd = record_from_json(record_to_json(odd))
    assert back_odd == odd and back_odd.exit_code == 0 and back_odd.first_attempt == 0
    # A record written by an older gtui (fewer fields, other order) still reads, by the slow path.
    old = dict(everything)
    del old["retry_at"]
    older = record_from_json(json.dumps(dict(reversed(list(old.items())))))
    assert older.name == "a" and older.retry_at is None and older.gpus == (1, 3)


def test_a_backup_is_due_after_a_change_at_a_bounded_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = db(tmp_path)
    with Store(path) as s:
        backups = Backups(s)
        monkeypatch.setattr(backup_mod, "BACKUP_EVERY_S", 0.0)
        assert backups.due()  # none written yet
        backups.write()
        assert backup_path(path).is_file() and not backups.due()  # nothing changed since
        s.save(JobRecord(name="a"))
        assert backups.due()
        monkeypatch.setattr(backup_mod, "BACKUP_EVERY_S", 3600.0)
        assert not backups.due()  # changed, but the last one is too recent
