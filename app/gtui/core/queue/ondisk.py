"""The queue file on disk: whether it may be trusted, and its bytes read without hanging.

Whoever can write the queue file can make gtui run any command; and a FIFO, a device or a huge
log given as the queue must be refused, not read forever.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gtui.core.errors import QueueFileError
from gtui.core.queue.encodings import decode_queue


def _own_group(gid: int) -> bool:
    """Whether ``gid`` is the user's private group (named after them, no other member)."""
    import grp
    import pwd

    try:
        group = grp.getgrgid(gid)
        me = pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, OSError):
        return False
    return gid == os.getgid() and group.gr_name == me and set(group.gr_mem) <= {me}


def check_trusted(path: Path) -> None:
    """Refuse a queue file that someone else could have written, before running its commands:
    whoever can write the file (or replace it in its folder) could make gtui run anything as
    you. As sshd's StrictModes: the file and its folder must belong to you or root and be
    writable by no one else (a group write bit is fine for your own private group; a folder
    with the sticky bit, such as /tmp, is fine too)."""
    me = os.getuid()
    folder = path.parent
    for p in (path, folder):
        try:
            st = p.stat()
        except OSError:
            return  # the reader says why it cannot be read
        what = f"its folder {p}" if p == folder else "it"
        if st.st_uid not in (me, 0):
            raise QueueFileError(
                str(path),
                f"{what} belongs to another user (uid {st.st_uid}), who could make gtui run any "
                "command as you; copy the queue into a folder of yours",
            )
        others = st.st_mode & stat.S_IWOTH or (
            st.st_mode & stat.S_IWGRP and not _own_group(st.st_gid)
        )
        if others and not (p == folder and st.st_mode & stat.S_ISVTX):
            mode = f"{stat.S_IMODE(st.st_mode):04o}"
            raise QueueFileError(
                str(path),
                f"{what} can be written by other users (mode {mode}), who could make gtui run "
                f"any command as you; fix it with: chmod go-w {p}",
            )


# A queue file larger than this is refused: 100,000 jobs take ~10 MB, and a bigger file is far
# more likely a mistake (a log given as the queue) than a queue.
MAX_QUEUE_BYTES = 256 << 20


def read_queue_bytes(path: Path) -> bytes:
    """The file's bytes, or a QueueFileError saying plainly why it cannot be read.

    Opened without blocking and checked to be a regular file first: a FIFO or a device given as
    the queue file would otherwise hang gtui (open waits for a writer, read never ends).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise QueueFileError(str(path), "no such file") from None
    except IsADirectoryError:
        raise QueueFileError(str(path), "is a directory, not a queue file") from None
    except OSError as e:
        raise QueueFileError(str(path), f"cannot read it: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise QueueFileError(str(path), "is a directory, not a queue file")
        if not stat.S_ISREG(st.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
            raise QueueFileError(str(path), f"is {kind}, not a regular file; give a queue file")
        if st.st_size > MAX_QUEUE_BYTES:
            raise QueueFileError(
                str(path),
                f"is {st.st_size >> 20} MiB; a queue file may hold at most "
                f"{MAX_QUEUE_BYTES >> 20} MiB (is it really a queue file?)",
            )
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_QUEUE_BYTES:
                raise QueueFileError(str(path), "grew past the size a queue file may have")
        return b"".join(chunks)
    except OSError as e:
        raise QueueFileError(str(path), f"cannot read it: {e.strerror or e}") from None
    finally:
        os.close(fd)


def read_queue_text(path: Path) -> str:
    """The file's text, or a QueueFileError saying plainly why it cannot be read."""
    return decode_queue(path, read_queue_bytes(path))
