"""Where gtui keeps things for a queue file: one place for every path rule.

State lives beside the queue file in ``.gtui/`` (mode 0700): the SQLite database, the lock, and
the per-attempt exit-status files. The control socket lives in a private runtime directory
(``$XDG_RUNTIME_DIR/gtui`` or ``/tmp/gtui-<uid>``, mode 0700, owned by us), because a Unix socket
path must stay under ~107 bytes and some file systems (NFS homes) cannot hold sockets.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from gtui.core.errors import GtuiError


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (mode 0700) if needed and refuse one that someone else could write to."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise GtuiError(f"{path} is not a directory; remove it and start again")
    if st.st_uid != os.getuid():
        raise GtuiError(f"{path} belongs to another user (uid {st.st_uid}); gtui will not use it")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


def runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir() and os.access(base, os.W_OK):
        return Path(base) / "gtui"
    return Path("/tmp") / f"gtui-{os.getuid()}"


@dataclass(frozen=True)
class QueuePaths:
    """Every path gtui derives from one queue file."""

    queue: Path

    @property
    def stem(self) -> str:
        return self.queue.stem

    @property
    def state_dir(self) -> Path:
        return self.queue.parent / ".gtui"

    @property
    def db(self) -> Path:
        return self.state_dir / f"{self.stem}.db"

    @property
    def lock(self) -> Path:
        return self.state_dir / f"{self.stem}.lock"

    @property
    def run_dir(self) -> Path:
        """Per-attempt exit-status files written by the job wrapper."""
        return self.state_dir / f"{self.stem}.run"

    @property
    def file_lock(self) -> Path:
        """Held while the queue file is rewritten (``gtui add``, dashboard edits)."""
        return self.state_dir / f"{self.stem}.toml.lock"

    @property
    def socket(self) -> Path:
        digest = hashlib.sha1(str(self.queue).encode()).hexdigest()[:10]
        return runtime_dir() / f"{self.stem[:40]}-{digest}.sock"

    @property
    def tmux_session(self) -> str:
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.stem)
        return f"gtui-{safe}"

    def log_dir(self, log_dir_setting: str) -> Path:
        p = Path(os.path.expanduser(log_dir_setting))
        return p if p.is_absolute() else self.queue.parent / p


def queue_paths(queue: str | Path) -> QueuePaths:
    return QueuePaths(Path(queue).expanduser().resolve())
