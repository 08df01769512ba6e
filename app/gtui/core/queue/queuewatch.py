"""When to read the queue file again, and what to make of what is there.

Reload used to be decided by mtime alone, so two saves within one second on a file system with
1-second mtimes looked like one. And it took whatever the file held at that instant, so
``python gen.py > q.toml`` (truncate, then write) showed an empty or half-written file as
the new queue. This watch decides by content:

- a change of (mtime, size, inode) makes it read the file; while the file was modified close
  to the last read (within ``RECENT_S``, more than any mtime granularity), it reads it at every
  check even with the same stat, so a same-second save is not missed;
- what it read counts only once the same bytes (a BLAKE2 digest) were seen twice, ``SETTLE_S``
  apart: a writer still at work changes them in between;
- an empty file (nothing but white space) is never a queue: it is what a truncating writer
  leaves for a moment, so it is reported and ignored, and the last good queue stays.

It only reads and compares; the engine decides what a change does to its jobs.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from gtui.core.errors import QueueFileError
from gtui.core.queue.encodings import decode_queue
from gtui.core.queue.ondisk import read_queue_bytes

SETTLE_S = 0.25  # the same content seen twice this far apart is taken as written
# A file modified this close to our last read may change again within its mtime's granularity
# (1 s on many file systems, 2 s on FAT) with the same stat: read it again while that holds.
RECENT_S = 5.0


@dataclass(frozen=True)
class Unchanged:
    """Nothing new to apply."""


@dataclass(frozen=True)
class Missing:
    """The file is gone (renamed or deleted)."""


@dataclass(frozen=True)
class Settling:
    """New content, not yet seen stable: check again after ``SETTLE_S``."""


@dataclass(frozen=True)
class Empty:
    """The file holds nothing: ignored, the last good queue stays."""


@dataclass(frozen=True)
class Unreadable:
    """The file cannot be read (a FIFO, too large, not UTF-8, no permission)."""

    error: QueueFileError


@dataclass(frozen=True)
class Changed:
    """New, stable content to load. Call :meth:`QueueWatch.applied` once it was taken."""

    text: str
    digest: bytes


Change = Unchanged | Missing | Settling | Empty | Unreadable | Changed


def digest_of_bytes(data: bytes) -> bytes:
    """The digest the watch compares a file's content by (BLAKE2, 16 bytes)."""
    return hashlib.blake2b(data, digest_size=16).digest()


class QueueWatch:
    """Follows one queue file's content for a running scheduler."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sig: tuple[int, int, int, int] | None = None
        self._read_at = 0.0  # time.time() of the last read
        self._mtime = 0.0
        self._applied: bytes | None = None  # digest of the content the engine runs
        self._pending: tuple[bytes, float] | None = None  # digest, monotonic time first seen
        self._reported: bytes | None = None  # digest of content already reported bad

    @property
    def applied(self) -> bytes | None:
        return self._applied

    def taken(self, digest: bytes) -> None:
        """The engine now runs the content with this digest (or chose to keep it refused)."""
        self._applied = digest
        self._pending = None

    def reported(self, digest: bytes) -> bool:
        """Whether content with this digest was already reported (say each problem once)."""
        if self._reported == digest:
            return True
        self._reported = digest
        return False

    def moved(self) -> bool:
        """Whether the file's stat differs from the last look (one syscall, no read). The
        frequent look between polls uses this: ``check`` re-reads and hashes a file changed in
        the last RECENT_S at every call, which every 0.2 s was 25 reads of an 8 MB,
        100,000-job file after each ``gtui add``."""
        try:
            st = os.stat(self.path)
        except OSError:
            return self._sig is not None
        return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev) != self._sig

    def check(self, *, force: bool = False) -> Change:
        """What the file holds now, compared with what the engine runs.

        ``force`` (gtui's own atomic writes: `gtui add`, dashboard edits): read now and take
        the content without waiting for it to settle.
        """
        try:
            st = os.stat(self.path)
        except OSError:
            self._sig = None
            return Missing()
        sig = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)
        recent = self._mtime > self._read_at - RECENT_S
        if not force and sig == self._sig and not recent and self._pending is None:
            return Unchanged()
        self._sig = sig
        self._mtime = st.st_mtime
        self._read_at = time.time()
        try:
            data = read_queue_bytes(self.path)
        except QueueFileError as e:
            return Unreadable(e)
        digest = digest_of_bytes(data)
        if digest == self._applied:
            self._pending = None
            return Unchanged()
        if not force:
            now = time.monotonic()
            if self._pending is None or self._pending[0] != digest:
                self._pending = (digest, now)
                return Settling()
            if now - self._pending[1] < SETTLE_S:
                return Settling()
        if not data.strip():
            return Empty()
        try:
            text = decode_queue(self.path, data)
        except QueueFileError as e:
            return Unreadable(e)
        return Changed(text, digest)

    def digest_of(self, text: str) -> bytes:
        """The digest of ``text`` as it is stored on disk (for the first load)."""
        return digest_of_bytes(text.encode("utf-8"))
