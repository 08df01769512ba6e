"""One scheduler per queue: an advisory ``flock`` on ``.gtui/<stem>.lock``.

``flock`` is tied to the open file, so the kernel drops it when the holder dies, even by
``kill -9``: there is never a stale lock to clean up. The file also records the holder's pid,
host and start time, but only for messages; whether the lock is held is always asked of the
kernel, never read from the file.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from gtui.core.errors import LockedError
from gtui.core.flock import open_lock, try_lock, unlock
from gtui.core.paths import QueuePaths, ensure_private_dir, queue_paths
from gtui.core.procstat import stat_of

# How long a reader waits for a holder that has just taken the lock to write its pid.
_PID_WAIT_S = 0.5


@dataclass(frozen=True)
class LockInfo:
    """What the holder wrote into the lock file."""

    pid: int
    host: str
    started: float  # time.time() when it took the lock


def _parse(text: str) -> LockInfo | None:
    parts = text.split()
    if len(parts) < 3:
        return None
    try:
        return LockInfo(pid=int(parts[0]), host=parts[1], started=float(parts[2]))
    except ValueError:
        return None


def process_lives(pid: int) -> bool:
    """Whether a lock holder's process still lives, for when its lock file cannot be read: its
    state in /proc, where an ended process its parent has not reaped yet is a zombie."""
    try:
        state = stat_of(pid).state
    except FileNotFoundError:
        return False
    except (OSError, IndexError, ValueError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    return state not in ("Z", "X")


class QueueLock:
    """The per-queue scheduler lock. ``acquire()`` raises LockedError (exit 3) when held.

    Held until ``release()`` or the process ends, even if this object is dropped: a lock that
    vanished with a forgotten reference would let a second scheduler in.
    """

    def __init__(self, queue: Path | QueuePaths) -> None:
        self.paths = queue if isinstance(queue, QueuePaths) else queue_paths(queue)
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        return self.paths.lock

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def _open(self) -> int:
        ensure_private_dir(self.path.parent)
        # Close-on-exec matters: a job that inherited this descriptor would keep the lock alive
        # after gtui died (gtui.core.flock opens every lock file so).
        return open_lock(self.path)

    def acquire(self) -> None:
        """Take the lock or raise LockedError naming the pid that holds it."""
        if self._fd is not None:
            return
        fd = self._open()
        try:
            taken = try_lock(fd)
        except BaseException:
            os.close(fd)
            raise
        if not taken:
            os.close(fd)
            raise LockedError(self._locked_message()) from None
        info = f"{os.getpid()} {socket.gethostname()} {time.time():.3f}\n".encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, info, 0)
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (idempotent). The file stays: removing a flock file is racy."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # while still held, so we never erase a successor's pid
        finally:
            os.close(fd)  # closing the last descriptor releases the flock

    def info(self) -> LockInfo | None:
        """What the lock file says (may be stale: use holder() to know if anyone holds it)."""
        try:
            return _parse(self.path.read_text(errors="replace"))
        except OSError:
            return None

    def holder(self) -> int | None:
        """The pid of the live holder, or None if nobody holds the lock.

        Asks the kernel (a non-blocking flock on a second descriptor), then reads the pid the
        holder wrote. Returns 0 if it is held but the holder has not written its pid yet.
        """
        if self._fd is not None:
            return os.getpid()
        if not self.path.exists():
            return None
        try:
            fd = open_lock(self.path, create=False, write=False)
        except FileNotFoundError:
            return None
        try:
            if try_lock(fd, shared=True):
                unlock(fd)
                return None
            # else: held by someone
        finally:
            os.close(fd)
        info = self._wait_info()
        return info.pid if info else 0

    def _wait_info(self) -> LockInfo | None:
        deadline = time.monotonic() + _PID_WAIT_S
        while True:
            info = self.info()
            if info is not None or time.monotonic() >= deadline:
                return info
            time.sleep(0.02)

    def _locked_message(self) -> str:
        info = self._wait_info()
        q = self.paths.queue.name
        if info is None:
            who = "another gtui"
        else:
            host = socket.gethostname()
            where = f" on {info.host}" if info.host != host else ""
            since = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.started))
            who = f"another gtui (pid {info.pid}{where}, since {since})"
        return f"{who} already runs this queue: {self.paths.queue}\n{self._hint(q, info)}"

    def _hint(self, q: str, info: LockInfo | None) -> str:
        """A next step that works here: `gtui attach` only where a tmux session runs it."""
        from gtui.core import tmux

        if tmux.available() and tmux.has_session(self.paths.tmux_session):
            return f"attach to its dashboard with `gtui attach {q}`"
        stop = f"stop it with `kill {info.pid}`" if info is not None else "or stop it"
        return (
            f"it runs without a dashboard (`gtui run`): follow it with `gtui status {q}`, "
            f"act on its jobs with `gtui kill|pause|resume|retry {q} NAME`, {stop}"
        )

    def __enter__(self) -> QueueLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
