"""One way to take a ``flock``: how a lock file is opened and how it is locked.

A lock file is opened with ``O_NOFOLLOW`` (a lock file planted as a symlink would make gtui
create or lock a file of the planter's choosing: refused with ELOOP) and ``O_CLOEXEC`` (a job
that inherited the descriptor would keep the lock alive after gtui died). A created one gets
mode 0o600 unless the caller shares it. ``flock`` is tied to the open file: closing the last
descriptor releases it, so the kernel drops it when the holder dies, even by ``kill -9``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

# Every lock file gtui opens carries these (see the module docstring for why).
LOCK_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC


def open_lock(
    path: str | os.PathLike[str],
    *,
    create: bool = True,
    exclusive: bool = False,
    write: bool = True,
    nonblock: bool = False,
    mode: int = 0o600,
    dir_fd: int | None = None,
) -> int:
    """An fd on the lock file ``path``, opened with :data:`LOCK_OPEN_FLAGS`.

    ``create``: made (``mode``) when absent; ``exclusive``: only made, never opened when it
    exists (FileExistsError); ``write`` False: read-only, for a lock any user may take on a file
    it cannot write; ``nonblock``: a FIFO planted in its place cannot hang the open."""
    flags = (os.O_RDWR if write else os.O_RDONLY) | LOCK_OPEN_FLAGS
    if create or exclusive:
        flags |= os.O_CREAT
    if exclusive:
        flags |= os.O_EXCL
    if nonblock:
        flags |= os.O_NONBLOCK
    return os.open(path, flags, mode, dir_fd=dir_fd)


def lock(fd: int, *, shared: bool = False) -> None:
    """Take the lock on ``fd``, waiting for it."""
    fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)


def try_lock(fd: int, *, shared: bool = False) -> bool:
    """Take the lock on ``fd`` if nobody holds it in a conflicting way; False when one does."""
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def unlock(fd: int) -> None:
    """Drop the lock on ``fd`` (the fd stays open)."""
    fcntl.flock(fd, fcntl.LOCK_UN)


@contextlib.contextmanager
def locked(
    path: str | os.PathLike[str], *, shared: bool = False, mode: int = 0o600
) -> Iterator[int]:
    """Hold the lock on ``path`` (created when absent), waited for, for the block; yields the
    fd. Closing it on the way out releases the lock."""
    fd = open_lock(path, mode=mode)
    try:
        lock(fd, shared=shared)
        yield fd
    finally:
        os.close(fd)
