"""The state database's backup, and its opening by a scheduler: a damaged file is set aside and
replaced by the backup, never started fresh.

The backup (``QUEUE.db.bak`` beside the database) is a whole database in one file, written by
SQLite's backup API from a connection of its own (a consistent snapshot that includes what the
write-ahead log holds) into a temporary file renamed over the last one: a crash at any moment
leaves the previous backup or the new one, whole. It never depends on the -wal file, so a deleted
WAL, an emptied or scrambled database takes none of it. The scheduler writes it at most every
:data:`BACKUP_EVERY_S` after a change, and at its start and its clean exit.

Whatever the backup is older than, the jobs' own traces make up (``gtui.core.state.evidence``
and ``gtui.core.sched.recovery``): the backup keeps what only the database knows (the queue
paused, quarantined GPUs, attempts history, retried jobs), the traces what ran since.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from gtui.core.state.store import BUSY_TIMEOUT_MS, CorruptStoreError, Store, StoreError

BACKUP_EVERY_S = 30.0
# A scheduler checks every page of a database up to this size at its start (~25,000 jobs; a
# few tenths of a second). A larger one is checked by `gtui doctor`; at a start, damage there
# is found by the first read of a bad page, and refused with the way to repair it.
CHECK_AT_START_MAX_BYTES = 16 << 20
_SIDE_FILES = ("-wal", "-shm")


def backup_path(db: Path) -> Path:
    return db.with_name(db.name + ".bak")


def write_backup(db: Path) -> None:
    """Copy ``db`` (and what its WAL holds) into its backup, atomically. StoreError if it
    cannot (the disk is full): the previous backup stays."""
    dest = backup_path(db)
    tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    try:
        src = sqlite3.connect(db, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            os.close(fd)
            _copy(src, tmp)
        finally:
            src.close()
        os.replace(tmp, dest)
    except (sqlite3.Error, OSError) as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise StoreError(f"cannot back up the state database {db}: {e}") from e


class Backups:
    """When the scheduler backs its store up: after a change, at most every
    :data:`BACKUP_EVERY_S` (a backup copies the whole file; commits come many a second)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._writes = -1  # none written yet
        self._at = time.monotonic()
        self.error: str | None = None  # the last failure (the previous backup stays)

    def due(self) -> bool:
        changed = self._store.writes != self._writes
        return changed and time.monotonic() - self._at >= BACKUP_EVERY_S

    def write(self) -> None:
        """Back up now (in a thread or at the end: it takes a connection of its own)."""
        self._writes, self._at = self._store.writes, time.monotonic()
        try:
            write_backup(self._store.path)
            self.error = None
        except StoreError as e:
            self.error = str(e)


def _copy(src: sqlite3.Connection, dest: Path) -> None:
    """``src`` whole into the new file ``dest``, in rollback-journal mode: a file that needs no
    -wal beside it (the backup API copies the pages, and with them the source's WAL mode)."""
    out = sqlite3.connect(dest, isolation_level=None)
    try:
        src.backup(out)
        out.execute("PRAGMA journal_mode = DELETE")
    finally:
        out.close()


def check(store: Store) -> None:
    """CorruptStoreError if the database's pages or a record are damaged: found here, before
    anything is started, not by the first query that reads a bad page."""
    with store.checking() as conn:
        row = conn.execute("PRAGMA quick_check").fetchone()
        if row is None or row[0] != "ok":
            raise CorruptStoreError(str(row[0] if row else "no answer to the check"))
        has_jobs = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'"
        ).fetchone()
        if has_jobs:
            bad = conn.execute(
                "SELECT name FROM jobs WHERE NOT json_valid(data) LIMIT 1"
            ).fetchone()
            if bad is not None:
                raise CorruptStoreError(f"the record of job {bad[0]!r} is unreadable")


@dataclass(frozen=True)
class Opened:
    store: Store
    rebuilt: str | None  # what was wrong and done about it, in words; None: nothing


def _emptied(db: Path) -> str | None:
    """Words for a database of 0 bytes with no WAL to recover from, while its backup exists
    (it was emptied); None otherwise. With no backup an empty file is a database with nothing
    in it yet (``sqlite3.connect`` makes one): opened as it is, the jobs' traces rebuild the
    rest."""
    try:
        size = db.stat().st_size
        wal = Path(f"{db}-wal")
        emptied = size == 0 and not (wal.exists() and wal.stat().st_size > 0)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StoreError(f"cannot read the state database {db}: {e.strerror or e}") from e
    return "it is empty (0 bytes)" if emptied and backup_path(db).is_file() else None


def damage(db: Path) -> str | None:
    """Why ``db`` cannot be used as it is, in words; None when it can (or does not exist).
    Reads only: for a check that changes nothing (``gtui doctor`` without --repair)."""
    why = _emptied(db)
    if why is not None or not db.exists():
        return why
    try:
        with Store(db, readonly=True) as store:
            check(store)
    except CorruptStoreError as e:
        return e.why
    return None


def open_checked(db: Path) -> Opened:
    """The scheduler's store (the caller holds the queue lock). A damaged database (see
    :func:`damage`) is moved aside, kept for a person to look at, and replaced by its backup
    when that is whole, else started empty: the jobs' traces then rebuild the records."""
    why = _emptied(db)
    if why is None:
        try:
            store = Store(db)  # read-write: it recovers a WAL a reader could not
        except CorruptStoreError as e:
            why = e.why
        else:
            try:
                if db.stat().st_size <= CHECK_AT_START_MAX_BYTES:
                    check(store)
                return Opened(store, None)
            except CorruptStoreError as e:
                why = e.why
                store.close()
            except BaseException:
                store.close()
                raise
    aside = _set_aside(db)
    words = f"the state database {db} was damaged ({why})"
    if aside is not None:
        words += f"; kept as {aside}"
    restored = _restore(db)
    words += f"; {restored}" if restored else "; it has no usable backup: rebuilt empty"
    return Opened(Store(db), words)


def _set_aside(db: Path) -> Path | None:
    """Move the damaged file and its WAL and shared memory out of the way (an empty file is
    only removed); where it went, or None."""
    if db.stat().st_size == 0:
        db.unlink()
        for side in _SIDE_FILES:
            Path(f"{db}{side}").unlink(missing_ok=True)
        return None
    aside = db.with_name(f"{db.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
    os.replace(db, aside)
    for side in _SIDE_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.replace(f"{db}{side}", f"{aside}{side}")
    return aside


def _restore(db: Path) -> str | None:
    """Copy a whole backup into ``db``; words for what it held, or None (none, or damaged)."""
    bak = backup_path(db)
    if not bak.is_file():
        return None
    try:
        with Store(bak, readonly=True) as store:
            check(store)
            jobs = store.count()
        taken = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(bak.stat().st_mtime))
        tmp = db.with_name(f"{db.name}.restore-{os.getpid()}")
        src = sqlite3.connect(f"{bak.resolve().as_uri()}?mode=ro", uri=True)
        try:
            _copy(src, tmp)
        finally:
            src.close()
        os.chmod(tmp, 0o600)
        os.replace(tmp, db)
    except (StoreError, sqlite3.Error, OSError):
        return None
    return f"rebuilt from its backup of {taken} ({jobs} job(s))"
