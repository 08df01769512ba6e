"""The run state of a queue in SQLite: one row per job, plus a few meta values.

The engine commits every transition before it publishes it, so after a crash or ``kill -9`` the
next start knows which jobs ran, which are done, and which pids to re-adopt.

Why these settings:

- WAL: ``gtui status`` reads while the scheduler writes, without blocking either side.
- ``synchronous=NORMAL``: in WAL mode every commit survives any crash of gtui itself
  (``kill -9``, the OOM killer, an SSH drop); only a power loss or kernel crash may lose the
  last few commits, and that also ends every job. FULL adds an fsync to each of the three
  commits between a job's end and the next start: measured, it tripled the end-to-start time
  (benchmarks/end_to_start.py: 41 ms median with FULL, 22 ms with NORMAL).
- ``busy_timeout``: a reader holding a lock briefly never fails a write.
- A record is a JSON document keyed by name (with its state in a column for queries), so adding
  a field to :class:`JobRecord` needs no schema change; ``meta.schema`` versions the layout for
  the changes that do.

Size: just over 400 lines: the schema, its migrations and every query sit together, so that one
file says all that touches the database's layout.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import compress
from operator import attrgetter, ne
from pathlib import Path
from typing import Any

from gtui.core.errors import GtuiError
from gtui.core.gcpause import paused_gc
from gtui.core.model import FINAL_STATES, NO_ITEMS, RECORD_FIELDS, Diagnosis, JobRecord, JobState
from gtui.core.paths import ensure_private_dir

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 5000


class StoreError(GtuiError):
    """The state database cannot be used (locked, corrupt, too new); says how to recover."""


class CorruptStoreError(StoreError):
    """The database's file is damaged (not a database, scrambled pages, an unreadable record):
    what a scheduler and ``gtui doctor --repair`` rebuild (gtui.core.state.backup)."""

    def __init__(self, why: str, message: str | None = None) -> None:
        super().__init__(message or why)
        self.why = why


def _v1(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS jobs ("
        " name TEXT PRIMARY KEY,"
        " state TEXT NOT NULL,"
        " data TEXT NOT NULL,"
        " updated_at REAL NOT NULL)"
    )


# MIGRATIONS[n] brings a database from schema n-1 to n (0 = empty file).
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1}

_FIELDS = set(RECORD_FIELDS)
_FIELD_ORDER = list(RECORD_FIELDS)
_FIELD_VALUES = attrgetter(*RECORD_FIELDS)


def _defaults() -> dict[str, Any]:
    """Each field's value in a new record, as its document gives it (lists, the state's
    value), except ``queued_since``, whose default is the time it is made: always written."""
    data = dict(zip(_FIELD_ORDER, _FIELD_VALUES(JobRecord(name="")), strict=True))
    data["state"] = JobState.QUEUED.value
    data["gpus"] = []
    data["warnings"], data["peak_gpu_mib"] = [], []
    del data["name"], data["queued_since"]
    return data


# What a left-out field reads back as. The keys a document holds are in field order, a
# subset of _FIELD_ORDER; a document of an older gtui has them all.
_DEFAULTS = _defaults()
_ALL_DEFAULTS = {"name": "", "queued_since": 0.0, **_DEFAULTS}
_ALL_DEFAULTS = {k: _ALL_DEFAULTS[k] for k in _FIELD_ORDER}


# A new record's attribute values, compared with a record's in C (``map(ne, ...)``) to leave
# out the fields that hold them; the name and the time it was queued never equal theirs.
_RAW_DEFAULTS = tuple(
    object() if k in ("name", "queued_since") else v
    for k, v in zip(_FIELD_ORDER, _FIELD_VALUES(JobRecord(name="")), strict=True)
)


def record_to_json(rec: JobRecord) -> str:
    """A JobRecord as a JSON document (tuples become lists, the diagnosis an object).

    Its fields in field order, read and compared with a new record's at C speed (one
    attrgetter, ``compress``), those that hold their new record's value left out: a waiting
    job's document is 4-6 keys instead of 34, and a 100,000-job restart decoded the others'
    nulls and zeros for half of its read of the store. Field by field, the first save of a
    100,000-job queue's records took ~1 s."""
    values = _FIELD_VALUES(rec)
    kept = map(ne, values, _RAW_DEFAULTS)
    data = dict(compress(zip(_FIELD_ORDER, values, strict=True), kept))
    if "state" in data:
        data["state"] = rec.state.value
    if "gpus" in data:
        data["gpus"] = list(rec.gpus)
    diag = rec.diagnosis
    if diag is not None:
        data["diagnosis"] = {"kind": diag.kind, "line": diag.line, "hint": diag.hint}
    return json.dumps(data, ensure_ascii=False, allow_nan=False)


_STATES = {s.value: s for s in JobState}


# Values that many records share (a waiting job's reason, when it was given and when the job
# was queued, its memory): read back, each record's would be an object of its own.
_SHARED_FIELDS = ("reason", "reason_at", "queued_since", "mem_mib")
Shared = dict[str, dict[Any, Any]]  # field -> value -> the one object of that value


def record_from_json(text: str, shared: Shared | None = None) -> JobRecord:
    """The inverse of :func:`record_to_json`; unknown keys (a newer gtui's) are ignored.

    ``shared``: the values already read for the fields of ``_SHARED_FIELDS`` (by field, so that
    no 1.0 stands for a 1), of which an equal one is taken instead of the one just decoded. A
    100,000-job queue's waiting records read back all give the same few reasons and times: its
    restart kept ~150 bytes a job of copies."""
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise ValueError("not a job record")
    if "queued_since" in data and _FIELDS.issuperset(data):
        # Written by this version or an older one (known fields, left-out ones at their
        # defaults): every field filled in order, then the instance made positionally.
        # Through JobRecord(**kwargs) a 100,000-job store took 2.4 s to load, and this is a
        # third.
        full = _ALL_DEFAULTS.copy()
        full.update(data)
        state = _STATES.get(full["state"])
        diag = full["diagnosis"]
        if state is not None and (diag is None or isinstance(diag, dict)):
            full["state"] = state
            gpus = full["gpus"]
            full["gpus"] = tuple(int(g) for g in gpus) if gpus else ()
            full["diagnosis"] = Diagnosis(**diag) if diag is not None else None
            warnings = full["warnings"]
            full["warnings"] = [str(w) for w in warnings] if warnings else NO_ITEMS
            if full["peak_gpu_mib"] == []:
                full["peak_gpu_mib"] = NO_ITEMS  # shared, as a new record's (see JobRecord)
            full["links"] = _links(full["links"])
            if shared is not None:
                for key in _SHARED_FIELDS:
                    value = full[key]
                    if value is not None:
                        full[key] = shared[key].setdefault(value, value)
            # Every field, in order: positional, without a dict of keyword arguments.
            return JobRecord(*full.values())
    kwargs = {k: v for k, v in data.items() if k in _FIELDS}
    kwargs["state"] = JobState(kwargs.get("state", JobState.QUEUED.value))
    kwargs["gpus"] = tuple(int(g) for g in kwargs.get("gpus") or ())
    diag = kwargs.get("diagnosis")
    kwargs["diagnosis"] = Diagnosis(**diag) if isinstance(diag, dict) else None
    warnings = kwargs.get("warnings")
    kwargs["warnings"] = [str(w) for w in warnings] if warnings else NO_ITEMS
    if kwargs.get("peak_gpu_mib") == []:
        kwargs["peak_gpu_mib"] = NO_ITEMS
    kwargs["links"] = _links(kwargs.get("links"))
    return JobRecord(**kwargs)


def _links(value: Any) -> list[tuple[str, str]]:
    """A record's tracker links read back (JSON keeps each pair as a list); none: the
    shared empty list, as a new record's."""
    if not value:
        return NO_ITEMS
    return [(str(p[0]), str(p[1])) for p in value if isinstance(p, list | tuple) and len(p) == 2]


class Store:
    """The job records and meta values of one queue. Thread-safe; every write commits."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._empty = False  # a read-only view of a database the scheduler has not set up yet
        self.writes = 0  # commits so far: whether a backup is behind (gtui.core.state.backup)
        try:
            with self._errors("open"):
                self._conn = self._connect()
                if not readonly:
                    self._migrate()
                else:
                    version = self._schema_version()
                    self._check_version(version)
                    self._empty = version == 0
        except BaseException:
            self.close()
            raise

    # -- connection ------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.readonly:
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            conn = sqlite3.connect(
                uri,
                uri=True,
                timeout=BUSY_TIMEOUT_MS / 1000,
                check_same_thread=False,
                isolation_level=None,
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            return conn
        ensure_private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) & 0o077:
                os.fchmod(fd, 0o600)  # SQLite gives -wal and -shm the database file's mode
        finally:
            os.close(fd)
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False, isolation_level=None
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(
                f"{self.path}: SQLite cannot use WAL mode here (journal_mode={mode}); "
                "put the queue on a local file system"
            )
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"{self.path}: the state database is closed")
        return self._conn

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Turn SQLite's exceptions into a StoreError that says how to recover."""
        try:
            yield
        except StoreError:
            raise
        except sqlite3.Error as e:
            raise self._explain(e, doing) from e
        except OSError as e:
            raise StoreError(
                f"cannot {doing} the state database {self.path}: {e.strerror or e}"
            ) from e

    def _explain(self, e: sqlite3.Error, doing: str) -> StoreError:
        code = getattr(e, "sqlite_errorname", "") or ""
        msg = str(e)
        where = f"the state database {self.path}"
        if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in msg:
            return StoreError(
                f"{where} is locked by another process ({msg}); wait and retry, "
                "or stop the other gtui on this queue (gtui ls)"
            )
        if code.startswith("SQLITE_FULL"):
            return StoreError(f"cannot {doing} {where}: the disk is full; free some space")
        if code.startswith(("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
            return StoreError(
                f"cannot {doing} {where} ({msg}); check that it and its directory are yours "
                "and writable"
            )
        if code.startswith("SQLITE_IOERR"):
            return StoreError(f"cannot {doing} {where}: disk I/O error ({msg})")
        return self._corrupt(msg)

    def _corrupt(self, why: str) -> CorruptStoreError:
        return CorruptStoreError(
            why,
            f"the state database {self.path} is damaged ({why}); `gtui doctor QUEUE.toml "
            "--repair` rebuilds it from its backup and the jobs' logs and exit-status files "
            "(so does `gtui run` at its start): nothing that ran runs again\n"
            "your queue file and logs are untouched",
        )

    @contextlib.contextmanager
    def checking(self) -> Iterator[sqlite3.Connection]:
        """The connection, for a check of the whole file (gtui.core.state.backup.check): its
        SQLite errors read as this store's."""
        with self._lock, self._errors("check"):
            yield self.conn

    # -- schema ----------------------------------------------------------------------------------

    def _schema_version(self) -> int:
        has_meta = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
        ).fetchone()
        if not has_meta:
            return 0
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        try:
            return int(row[0]) if row else 0
        except ValueError:
            raise self._corrupt(f"schema version {row[0]!r}") from None

    def _check_version(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"the state database {self.path} was written by a newer gtui (schema {version}, "
                f"this one knows {SCHEMA_VERSION}); upgrade gtui, or move the file aside"
            )

    def _migrate(self) -> None:
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = self._schema_version()
            self._check_version(version)
            for v in range(version + 1, SCHEMA_VERSION + 1):
                MIGRATIONS[v](conn)
            if version != SCHEMA_VERSION:
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?)",
                    (str(SCHEMA_VERSION),),
                )
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    # -- records ---------------------------------------------------------------------------------

    def load(self) -> dict[str, JobRecord]:
        """Every job record, in the order they were first saved."""
        if self._empty:
            return {}
        out: dict[str, JobRecord] = {}
        # 100,000 records hold no cycles: collecting while they are made finds none
        with paused_gc(), self._lock, self._errors("read"):
            cursor = self.conn.execute("SELECT name, data FROM jobs ORDER BY rowid")
            while rows := cursor.fetchmany(4096):  # not all 100,000 texts at once
                for name, data in rows:
                    try:
                        out[name] = record_from_json(data)
                    except (ValueError, TypeError) as e:
                        why = f"the record of job {name!r} is unreadable: {e}"
                        raise self._corrupt(why) from e
        return out

    def load_split(self) -> tuple[dict[str, JobRecord], dict[str, JobState]]:
        """The records of jobs that have not ended, and only the state of those that have
        (the scheduler keeps no object for an ended job: see ``gtui.core.state.records``).
        Both in the order they were first saved; the ended ones' documents are not read."""
        if self._empty:
            return {}, {}
        live: dict[str, JobRecord] = {}
        ended: dict[str, JobState] = {}
        shared: Shared = {key: {} for key in _SHARED_FIELDS}
        final = tuple(s.value for s in FINAL_STATES)
        marks = ", ".join("?" * len(final))
        with paused_gc(), self._lock, self._errors("read"):
            # An ended job's document is not decoded, but SQLite checks that it is JSON
            # (in C, ~1 us a row): a corrupt record is said at the start, as before.
            cursor = self.conn.execute(
                f"SELECT name, state, CASE WHEN state IN ({marks}) THEN NULL ELSE data END, "
                f"CASE WHEN state IN ({marks}) THEN json_valid(data) ELSE 1 END "
                "FROM jobs ORDER BY rowid",
                final + final,
            )
            while rows := cursor.fetchmany(4096):
                for name, state, data, valid in rows:
                    try:
                        if not valid:
                            raise ValueError("not a JSON document")
                        if data is None:
                            ended[name] = JobState(state)
                        else:
                            live[name] = record_from_json(data, shared)
                    except (ValueError, TypeError) as e:
                        why = f"the record of job {name!r} is unreadable: {e}"
                        raise self._corrupt(why) from e
        return live, ended

    def count(self) -> int:
        """How many job records are saved."""
        if self._empty:
            return 0
        with self._lock, self._errors("read"):
            return int(self.conn.execute("SELECT count(*) FROM jobs").fetchone()[0])

    def attempts(self) -> dict[str, int]:
        """Each saved job's attempt count, in one query without decoding its document: what
        ``gtui doctor`` checks the jobs' traces on disk against (gtui.core.state.evidence)."""
        if self._empty:
            return {}
        with self._lock, self._errors("read"):
            rows = self.conn.execute(
                "SELECT name, coalesce(json_extract(data, '$.attempt'), 0) FROM jobs"
            ).fetchall()
        return {name: int(n) for name, n in rows if isinstance(n, int)}

    def get(self, name: str) -> JobRecord | None:
        """One record, or None."""
        return self.get_many((name,)).get(name)

    def get_many(self, names: Iterable[str]) -> dict[str, JobRecord]:
        """The records of ``names`` that exist, in batches of 500 names a query."""
        wanted = list(names)
        out: dict[str, JobRecord] = {}
        if self._empty or not wanted:
            return out
        with self._lock, self._errors("read"):
            for i in range(0, len(wanted), 500):
                chunk = wanted[i : i + 500]
                marks = ", ".join("?" * len(chunk))
                rows = self.conn.execute(
                    f"SELECT name, data FROM jobs WHERE name IN ({marks})", chunk
                ).fetchall()
                for name, data in rows:
                    try:
                        out[name] = record_from_json(data)
                    except (ValueError, TypeError) as e:
                        why = f"the record of job {name!r} is unreadable: {e}"
                        raise self._corrupt(why) from e
        return out

    def save(self, rec: JobRecord) -> None:
        """Insert or replace one record and commit."""
        self.save_many((rec,))

    def save_many(self, recs: Iterable[JobRecord]) -> None:
        """Insert or replace records in one transaction."""
        rows = [(r.name, r.state.value, record_to_json(r), time.time()) for r in recs]
        if not rows:
            return
        self._write(
            "INSERT INTO jobs (name, state, data, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(name) DO UPDATE SET state = excluded.state, data = excluded.data, "
            "updated_at = excluded.updated_at",
            rows,
        )

    def delete(self, name: str) -> None:
        self._write("DELETE FROM jobs WHERE name = ?", [(name,)])

    def get_meta(self, key: str) -> str | None:
        if self._empty:
            return None
        with self._lock, self._errors("read"):
            row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._write("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [(key, value)])

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if self.readonly:
            raise StoreError(f"{self.path}: opened read-only; only the scheduler writes it")
        with self._lock, self._errors("write"):
            conn = self.conn
            if len(rows) == 1:
                # The connection is in autocommit mode: one statement is one transaction, as
                # atomic and as durable as BEGIN ... COMMIT around it, in one call, not three
                # (a job's start, pid and end are one row each).
                conn.execute(sql, rows[0])
                self.writes += 1
                return
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, rows)
                conn.execute("COMMIT")
                self.writes += 1
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise

    @property
    def closed(self) -> bool:
        return self._conn is None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
                self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store_readonly(path: Path) -> Store | None:
    """The store for reading only (``gtui status`` with no scheduler), or None if none exists."""
    if not path.is_file():
        return None
    return Store(path, readonly=True)
