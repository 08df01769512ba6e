"""Every ended attempt of every job: a small table beside the job records, in the same state db.

A job record keeps only its latest attempt (the one it runs, or ran last); the dashboard's job
detail view shows every attempt, with how it ended. The scheduler appends one row per ended
attempt (``runs._finish``, after the record is committed); readers open the db file read-only
(the dashboard, in process or attached to a scheduler elsewhere over its socket: the same
machine and user), so no reader ever needs the scheduler.

The table is created on the first write (``CREATE TABLE IF NOT EXISTS``), not by a schema
migration: an older gtui opening the db ignores a table it does not know, and a db with no
table yet reads as no history. Columns added since (the peak on each GPU, the host
memory peak, GPU-hours, tracker run links, the energy) are added to an older table at the
first write (``ALTER TABLE ADD COLUMN``: older gtuis name their columns, so they read on),
and a reader of a table without them reads None. History is secondary: a write that fails (a
full disk, a locked db) is dropped, never raised into the scheduler, whose job record (the
truth) was committed just before.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gtui.core.errors import GtuiError
from gtui.core.gpus.energy import AttemptEnergy
from gtui.core.model import JobRecord, JobState
from gtui.core.state.store import BUSY_TIMEOUT_MS, Store

TABLE = "attempts"
_DDL = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    " name TEXT NOT NULL,"
    " attempt INTEGER NOT NULL,"
    " state TEXT NOT NULL,"  # what the end made of the job: done, failed, killed, queued (retry)
    " started_at REAL,"
    " ended_at REAL,"
    " exit_code INTEGER,"
    " signal INTEGER,"
    " diag_kind TEXT,"
    " diag_line TEXT,"
    " peak_mib INTEGER,"
    " gpus TEXT NOT NULL,"  # JSON list of physical indices
    " log TEXT,"
    " PRIMARY KEY (name, attempt))"
)
# Columns added since, additive: name -> type. An older table gets them at the first write.
_ADDED = {
    "peak_gpu_mib": "TEXT",
    "host_peak_mib": "INTEGER",
    "gpu_hours": "REAL",
    "links": "TEXT",  # JSON list of [tracker, url]: the attempt's tracker run links
}
# An attempt's GPU energy (sched/energymeter.py): kWh over its GPUs, and 1 when one was shared.
_ENERGY_COLUMNS = {"energy_kwh": "REAL", "energy_shared": "INTEGER"}
_ADDED.update(_ENERGY_COLUMNS)
_BASE_COLUMNS = (
    "name, attempt, state, started_at, ended_at, exit_code, signal, diag_kind, diag_line, "
    "peak_mib, gpus, log"
)
_COLUMNS = _BASE_COLUMNS + ", " + ", ".join(_ADDED)
_ready: weakref.WeakSet[Store] = weakref.WeakSet()  # stores whose connection made the table


@dataclass(frozen=True)
class Attempt:
    """One ended attempt of a job, as it was recorded when it ended."""

    name: str
    attempt: int
    state: str
    started_at: float | None
    ended_at: float | None
    exit_code: int | None
    signal: int | None
    diag_kind: str | None
    diag_line: str | None
    peak_mib: int | None
    gpus: tuple[int, ...]
    log: str | None
    peak_gpu_mib: tuple[int, ...] = ()  # the peak on each of ``gpus``, in order
    host_peak_mib: int | None = None
    gpu_hours: float | None = None
    links: tuple[tuple[str, str], ...] = ()  # its tracker run links, (tracker, url)
    # Its GPUs' energy in kWh (None: not measured) and whether another job or user used one
    # of its GPUs meanwhile (then it is the GPU's energy over the attempt's time).
    energy_kwh: float | None = None
    energy_shared: bool = False


def gpu_hours(n_gpus: int, started_at: float | None, ended_at: float | None) -> float | None:
    """GPUs held times hours held (None: not started, or a CPU job). Kept unrounded: a
    report sums many short attempts, and rounding each would make them vanish."""
    if not n_gpus or started_at is None or ended_at is None:
        return None
    return n_gpus * max(0.0, ended_at - started_at) / 3600


def attempt_of(rec: JobRecord) -> Attempt:
    """The record's current attempt, as a history row."""
    d = rec.diagnosis
    return Attempt(
        name=rec.name,
        attempt=rec.attempt,
        state=_end_word(rec),
        started_at=rec.started_at,
        ended_at=rec.ended_at,
        exit_code=rec.exit_code,
        signal=rec.signal,
        diag_kind=d.kind if d else None,
        diag_line=d.line if d else None,
        peak_mib=rec.peak_mib,
        gpus=tuple(rec.gpus),
        log=rec.log,
        peak_gpu_mib=tuple(rec.peak_gpu_mib),
        host_peak_mib=rec.host_peak_mib,
        gpu_hours=gpu_hours(len(rec.gpus), rec.started_at, rec.ended_at),
        links=tuple(rec.links),
    )


def _end_word(rec: JobRecord) -> str:
    """What the end made of the job; an attempt stopped through no fault of its own (and
    queued again) shows its cause: "preempted", "interrupted", "requeued"."""
    if rec.state is JobState.QUEUED and rec.requeued_as:
        return rec.requeued_as
    return rec.state.value


def record_attempt(store: Store, rec: JobRecord, energy: AttemptEnergy | None = None) -> None:
    """Append (or, for the same attempt recorded again, replace) the attempt that just ended,
    with its GPUs' ``energy`` where the energy meter measured it. Best effort: see the module
    docstring."""
    if rec.attempt <= 0 or store.readonly:
        return
    a = attempt_of(rec)
    row = (
        a.name,
        a.attempt,
        a.state,
        a.started_at,
        a.ended_at,
        a.exit_code,
        a.signal,
        a.diag_kind,
        a.diag_line,
        a.peak_mib,
        json.dumps(list(a.gpus)),
        a.log,
        json.dumps(list(a.peak_gpu_mib)) if a.peak_gpu_mib else None,
        a.host_peak_mib,
        a.gpu_hours,
        json.dumps([list(p) for p in a.links]) if a.links else None,
        *_energy_row(energy),
    )
    # AttributeError too: the store's lock and connection are its internals; should they
    # change, history stops (tests/core/state/test_history.py says so) but the scheduler does not.
    with contextlib.suppress(sqlite3.Error, GtuiError, AttributeError), store._lock:
        conn = store.conn
        if store not in _ready:
            conn.execute(_DDL)
            have = {r[1] for r in conn.execute(f"PRAGMA table_info({TABLE})")}
            for column, kind in _ADDED.items():
                if column not in have:
                    conn.execute(f"ALTER TABLE {TABLE} ADD COLUMN {column} {kind}")
            _ready.add(store)
        # The store's connection is in autocommit mode: one statement, one transaction.
        conn.execute(f"INSERT OR REPLACE INTO {TABLE} ({_COLUMNS}) VALUES ({_q(len(row))})", row)


def attempts(db: Path, name: str) -> list[Attempt]:
    """The recorded attempts of ``name``, oldest first; [] when there is no db or no history.

    Opens ``db`` read-only for this one query: the caller may be the scheduler's own process or
    a dashboard attached to it from another one.
    """
    return attempts_of(db, (name,)).get(name, [])


def attempts_of(db: Path, names: Sequence[str]) -> dict[str, list[Attempt]]:
    """The recorded attempts of each of ``names``, oldest first (see :func:`attempts`)."""
    if not names or not db.is_file():
        return {}
    try:
        conn = open_readonly(db)
    except sqlite3.Error:
        return {}
    try:
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({TABLE})")}
        added = ", ".join(c if c in have else f"NULL AS {c}" for c in _ADDED)
        rows = conn.execute(
            f"SELECT {_BASE_COLUMNS}, {added} FROM {TABLE} WHERE name IN ({_q(len(names))}) "
            "ORDER BY name, attempt",
            tuple(names),
        ).fetchall()
    except sqlite3.Error:  # no table yet (no attempt ended since this gtui), or a locked db
        return {}
    finally:
        conn.close()
    out: dict[str, list[Attempt]] = {}
    for r in rows:
        try:
            gpus = tuple(int(g) for g in json.loads(r[10] or "[]"))
        except (ValueError, TypeError):
            gpus = ()
        out.setdefault(r[0], []).append(
            Attempt(
                name=r[0],
                attempt=int(r[1]),
                state=str(r[2]),
                started_at=r[3],
                ended_at=r[4],
                exit_code=r[5],
                signal=r[6],
                diag_kind=r[7],
                diag_line=r[8],
                peak_mib=r[9],
                gpus=gpus,
                log=r[11],
                peak_gpu_mib=_ints(r[12]),
                host_peak_mib=r[13],
                gpu_hours=r[14],
                links=_pairs(r[15]),
                **_energy_fields(r[16:18]),
            )
        )
    return out


def _energy_row(energy: AttemptEnergy | None) -> tuple[float | None, int | None]:
    """The energy columns of an attempt's row."""
    if energy is None or energy.kwh is None:
        return (None, None)
    return (energy.kwh, int(energy.shared))


def _energy_fields(values: Sequence[Any]) -> dict[str, Any]:
    """The energy columns read back as Attempt fields."""
    kwh, shared = [*values, None, None][:2]
    return {
        "energy_kwh": kwh if isinstance(kwh, int | float) else None,
        "energy_shared": bool(shared),
    }


def _ints(text: str | None) -> tuple[int, ...]:
    """A JSON list of integers, as written above (anything else reads as none)."""
    try:
        return tuple(int(v) for v in json.loads(text or "[]"))
    except (ValueError, TypeError):
        return ()


def _pairs(text: str | None) -> tuple[tuple[str, str], ...]:
    """A JSON list of [tracker, url] pairs, as written above (anything else reads as none)."""
    try:
        value = json.loads(text or "[]")
        return tuple((str(t), str(u)) for t, u in value)
    except (ValueError, TypeError):
        return ()


def _q(n: int) -> str:
    return ", ".join("?" * n)


# -- the whole history (estimates and `gtui report`) --------------------------------------------


def open_readonly(db: Path) -> sqlite3.Connection:
    """A read-only connection to the state db, as every reader of the history opens one (a
    scheduler may be writing it); raises sqlite3.Error as ``connect`` does."""
    return sqlite3.connect(
        f"{db.resolve().as_uri()}?mode=ro",
        uri=True,
        timeout=BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,
    )


REPORT_CHUNK = 500  # names per query (SQLite's limit on parameters is far above)


def _read(db: Path, sql: str) -> list[Any]:
    """Rows of one read-only query of ``db``; [] with no db, no table yet, a locked db, or one
    that cannot be read (its directory's permissions: the history only adds to what is shown)."""
    try:
        if not db.is_file():
            return []
    except OSError:
        return []
    try:
        conn = open_readonly(db)
    except sqlite3.Error:
        return []
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def done_runtimes(db: Path) -> list[tuple[str, float]]:
    """(name, seconds) of every attempt that ended done: what start estimates are made of.
    One light query, however long the history."""
    rows = _read(
        db,
        f"SELECT name, ended_at - started_at FROM {TABLE} "
        "WHERE state = 'done' AND started_at IS NOT NULL AND ended_at IS NOT NULL",
    )
    return [(str(n), max(0.0, float(d))) for n, d in rows]


def all_attempts(db: Path) -> list[Attempt]:
    """Every recorded attempt of every job, oldest end first ([] with no db or no history):
    what ``gtui report`` reads. Through :func:`attempts_of`, so every field it reads is here."""
    names = [str(r[0]) for r in _read(db, f"SELECT DISTINCT name FROM {TABLE}")]
    out: list[Attempt] = []
    for i in range(0, len(names), REPORT_CHUNK):
        for runs in attempts_of(db, names[i : i + REPORT_CHUNK]).values():
            out.extend(runs)
    out.sort(key=lambda a: (a.ended_at or 0.0, a.name, a.attempt))
    return out
