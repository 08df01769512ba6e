"""One way to write a file that gtui keeps: temp file, fsync, rename, fsync of the directory.

Readers see the old content or the new, never half of it, and a crash or a full disk leaves
the old file in place. A full disk is reported in words (``DiskFullError``), not as errno 28.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

from gtui.core.errors import GtuiError


class DiskFullError(GtuiError):
    """No space (or quota) left to write a file gtui keeps; the old file is intact."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data``. ``mode`` None keeps the file's mode (a new file gets
    0644 less the umask). Raises DiskFullError on ENOSPC / EDQUOT, OSError otherwise."""
    target = Path(os.path.realpath(path))
    if mode is None:
        try:
            mode = stat.S_IMODE(target.stat().st_mode)
        except FileNotFoundError:
            mode = 0o644 & ~_umask()
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(
                f"{target}: no space left on the device (the old file is kept); "
                "free some space and try again"
            ) from None
        raise
    with contextlib.suppress(OSError):
        dfd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
