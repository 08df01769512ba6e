"""A lost or damaged state database never re-runs what ran: the write-ahead log deleted after a
SIGKILL, the database emptied to 0 bytes, junk written into it or the file cut short. The jobs'
own traces (each attempt's exit-status file and log, a running job's wrapper process) say what
ran; a scheduler checks the store against them before it starts anything, re-adopts what still
runs, and `gtui doctor` rebuilds a damaged store from its backup and those traces.

Every job appends a line to ``NAME.runs`` as its first act: a run is counted there, from the
jobs' side, not from what gtui recorded."""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import gtui, write_queue
from tests.reliability.helpers import finish, start_run, status, wait_for

LONG = "echo run >> long.runs; while [ ! -e release ]; do sleep 0.05; done"


def _queue(n_done: int, *, long: bool) -> str:
    body = ""
    for i in range(n_done):
        cmd = f"echo run >> j{i}.runs; echo out {i}"
        body += f'[[jobs]]\nname = "j{i}"\ngpus = 0\ncmd = "{cmd}"\n\n'
    if long:
        body += f'[[jobs]]\nname = "long"\ngpus = 0\ncmd = "{LONG}"\n'
    return body


def _runs(tmp_path: Path, name: str) -> int:
    p = tmp_path / f"{name}.runs"
    return len(p.read_text().splitlines()) if p.exists() else 0


def _states(q: Path) -> dict[str, str]:
    return {n: str(j["state"]) for n, j in status(q).items()}


def _db(tmp_path: Path) -> Path:
    return tmp_path / ".gtui" / "q.db"


def _drop_wal(db: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)


def _all_done_once(tmp_path: Path, q: Path, n: int) -> None:
    for i in range(n):
        assert _runs(tmp_path, f"j{i}") == 1, f"j{i} ran {_runs(tmp_path, f'j{i}')} times"
    states = _states(q)
    assert all(states[f"j{i}"] == "done" for i in range(n)), states


def _ran_all(tmp_path: Path, q: Path, n: int) -> None:
    """Run the queue to its end once (every job done) and check each job ran once."""
    out = gtui("run", str(q), timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    _all_done_once(tmp_path, q, n)


def test_a_deleted_wal_after_sigkill_reruns_nothing_and_readopts_the_running_job(
    tmp_path: Path,
) -> None:
    q = write_queue(tmp_path, _queue(5, long=True))
    first = start_run(q)
    wait_for(lambda: all(_runs(tmp_path, f"j{i}") == 1 for i in range(5)), what="5 jobs to run")
    wait_for(lambda: _runs(tmp_path, "long") == 1, what="the long job to start")
    wait_for(
        lambda: _states(q) == {**{f"j{i}": "done" for i in range(5)}, "long": "running"},
        what="5 done and 1 running recorded",
    )
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    assert Path(str(_db(tmp_path)) + "-wal").exists()  # what the test is about
    _drop_wal(_db(tmp_path))
    second = start_run(q)
    wait_for(lambda: _states(q).get("long") == "running", what="the long job re-adopted")
    (tmp_path / "release").touch()
    out = finish(second, 120)
    assert second.returncode == 0, out
    _all_done_once(tmp_path, q, 5)
    assert _runs(tmp_path, "long") == 1, "the running job was launched a second time"
    assert _states(q)["long"] == "done", out
    assert "rebuilt" in out and "re-adopted" in out, out


@pytest.mark.parametrize("backup", [True, False], ids=["with-backup", "no-backup"])
def test_a_database_emptied_to_zero_bytes_reruns_nothing_and_says_it_rebuilt(
    tmp_path: Path, backup: bool
) -> None:
    n = 20
    q = write_queue(tmp_path, _queue(n, long=False))
    _ran_all(tmp_path, q, n)
    db = _db(tmp_path)
    os.truncate(db, 0)
    _drop_wal(db)
    if not backup:
        Path(str(db) + ".bak").unlink(missing_ok=True)
    again = gtui("run", str(q), timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    out = again.stdout + again.stderr
    assert "Traceback" not in out
    assert "rebuilt" in out, out
    _all_done_once(tmp_path, q, n)


def _junk_in_the_middle(db: Path) -> None:
    size = db.stat().st_size
    assert size > 8192, size
    with db.open("r+b") as f:
        f.seek(4096)  # page 2 on: the tables' pages
        f.write(os.urandom(size - 4096))


def _cut_short(db: Path) -> None:
    os.truncate(db, db.stat().st_size // 3)


@pytest.mark.parametrize("damage", [_junk_in_the_middle, _cut_short], ids=["junk", "truncated"])
def test_doctor_rebuilds_a_damaged_database_and_nothing_reruns(
    tmp_path: Path, damage: object
) -> None:
    n = 20
    q = write_queue(tmp_path, _queue(n, long=False))
    _ran_all(tmp_path, q, n)
    db = _db(tmp_path)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("VACUUM")  # the records on pages of their own, all in the main file
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    _drop_wal(db)
    damage(db)  # type: ignore[operator]
    check = gtui("doctor", str(q))
    assert "Traceback" not in check.stdout + check.stderr
    assert check.returncode == 1, check.stdout + check.stderr
    assert "damaged" in check.stdout, check.stdout
    assert db.read_bytes()[4096:8192] == db.read_bytes()[4096:8192]  # a check changes nothing
    repair = gtui("doctor", str(q), "--repair")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert "rebuilt" in repair.stdout, repair.stdout
    assert list(tmp_path.glob(".gtui/q.db.broken-*")), "the damaged file is kept aside"
    after = gtui("doctor", str(q))
    assert after.returncode == 0, after.stdout + after.stderr
    again = gtui("run", str(q), timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    _all_done_once(tmp_path, q, n)


def test_doctor_rebuilds_from_the_traces_alone_when_the_backup_is_gone(tmp_path: Path) -> None:
    n = 6
    q = write_queue(
        tmp_path,
        _queue(n, long=False)
        + '[[jobs]]\nname = "bad"\ngpus = 0\nretries = 0\ncmd = "echo run >> bad.runs; exit 3"\n',
    )
    out = gtui("run", str(q), timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    db = _db(tmp_path)
    db.write_bytes(b"this is not a database" * 100)
    _drop_wal(db)
    Path(str(db) + ".bak").unlink()
    repair = gtui("doctor", str(q), "--repair")
    assert repair.returncode == 0, repair.stdout + repair.stderr
    assert "rebuilt" in repair.stdout, repair.stdout
    states = _states(q)
    assert states["bad"] == "failed", states
    again = gtui("run", str(q), timeout=120)
    assert "Traceback" not in again.stdout + again.stderr
    _all_done_once(tmp_path, q, n)
    assert _runs(tmp_path, "bad") == 1


def test_a_log_without_an_exit_status_is_unknown_not_rerun(tmp_path: Path) -> None:
    q = write_queue(tmp_path, _queue(2, long=False))
    _ran_all(tmp_path, q, 2)
    db = _db(tmp_path)
    for p in (db, Path(str(db) + ".bak")):
        p.unlink(missing_ok=True)
    _drop_wal(db)
    (tmp_path / ".gtui" / "q.run" / "j1.1.status").unlink()
    again = gtui("run", str(q), timeout=120)
    out = again.stdout + again.stderr
    assert "Traceback" not in out
    assert _runs(tmp_path, "j0") == 1 and _runs(tmp_path, "j1") == 1, out
    states = _states(q)
    assert states == {"j0": "done", "j1": "unknown"}, (states, out)
