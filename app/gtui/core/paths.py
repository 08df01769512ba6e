"""Where gtui keeps things for a queue file: one place for every path rule.

State lives beside the queue file in ``.gtui/`` (mode 0700): the SQLite database, the lock, and
the per-attempt exit-status files. The control socket lives in a private runtime directory
(``$XDG_RUNTIME_DIR/gtui`` or ``$TMPDIR/gtui-<uid>``, mode 0700, owned by us), because a Unix
socket path must stay under ~107 bytes and some file systems (NFS homes) cannot hold sockets.

A queue's identity is not its file name. ``.gtui/queues.json`` maps each queue's *key* (the stem
it was first run under) to its file's name and inode; a file renamed with ``mv`` keeps its inode,
so ``gtui run q2.toml`` after ``mv q.toml q2.toml`` finds the same key, and with it the same
database, lock and socket: one queue is one scheduler, and its done jobs stay done.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from gtui.core.errors import GtuiError

REGISTRY = "queues.json"
STATE_DIR_ENV = "GTUI_STATE_DIR"  # where state goes for a queue whose folder is read-only
_REGISTRY_MAX = 1 << 20  # bytes: a registry larger than this is not ours to trust


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


def _usable_private(path: Path) -> bool:
    """Whether ``path`` is absent or a real directory of ours (ensure_private_dir makes it 0700
    before use); a symlink or another user's directory is not."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()


def sha1_hex(text: str) -> str:
    """The SHA-1 of ``text`` (UTF-8) in hex, which names a queue's state and socket files. From
    CPython's built-in SHA-1 where it has one: hashlib would load OpenSSL for it, 5 ms of each
    ``gtui add``."""
    try:
        from _sha1 import sha1
    except ImportError:
        from hashlib import sha1
    digest: str = sha1(text.encode()).hexdigest()
    return digest


def temp_dir() -> str:
    """The folder ``tempfile.gettempdir()`` gives on Linux (the first of $TMPDIR, $TEMP, $TMP,
    /tmp, /var/tmp, /usr/tmp that is a folder we can write to, else the working folder), found
    without importing tempfile, whose imports (random, shutil, bz2, lzma) were a tenth of a
    ``gtui add``."""
    named = [os.environ.get(v) for v in ("TMPDIR", "TEMP", "TMP")]
    for d in [*(n for n in named if n), "/tmp", "/var/tmp", "/usr/tmp"]:
        if os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK):
            return os.path.abspath(d)
    return os.getcwd()


def runtime_dir() -> Path:
    """Where control sockets live. Another local user can create ``/tmp/gtui-<uid>`` before us
    (where XDG_RUNTIME_DIR is unset) to block or capture the socket: such a directory is never
    used, and gtui falls back to ``~/.cache/gtui/run``, which is private by construction."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and Path(base).is_dir() and os.access(base, os.W_OK):
        return Path(base) / "gtui"
    shared = Path(temp_dir()) / f"gtui-{os.getuid()}"
    if _usable_private(shared):
        return shared
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return home / "gtui" / "run"


def config_dir() -> Path:
    """Where the user's gtui settings live (the dashboard's theme): ``$XDG_CONFIG_HOME/gtui``,
    else ``~/.config/gtui`` (the XDG base directory rule; a relative XDG_CONFIG_HOME is ignored,
    as the spec says). Not created here: a reader needs nothing on disk."""
    base = os.environ.get("XDG_CONFIG_HOME")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".config"
    return root / "gtui"


class QueuePaths:
    """Every path gtui derives from one queue file. A plain class, not a dataclass: ``gtui
    add`` finds its scheduler's socket here and starts without dataclasses."""

    __slots__ = ("key", "queue")

    def __init__(self, queue: Path, key: str = "") -> None:
        self.queue = queue
        self.key = key  # the queue's identity in its state directory ("" = the file's stem)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QueuePaths) and (self.queue, self.key) == (other.queue, other.key)

    def __hash__(self) -> int:
        return hash((self.queue, self.key))

    def __repr__(self) -> str:
        return f"QueuePaths(queue={self.queue!r}, key={self.key!r})"

    @property
    def stem(self) -> str:
        """The name every per-queue file is made from: the key, which survives a rename."""
        return self.key or self.queue.stem

    @property
    def registry(self) -> Path:
        return self.state_dir / REGISTRY

    @property
    def state_dir(self) -> Path:
        """``.gtui/`` beside the queue file; under ``$GTUI_STATE_DIR`` (one folder per queue
        folder) when that is set, for a queue in a folder the user cannot write."""
        override = os.environ.get(STATE_DIR_ENV)
        if override:
            folder = self.queue.parent
            digest = sha1_hex(str(folder))[:8]
            return Path(override).expanduser().resolve() / f"{folder.name or 'root'}-{digest}"
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
        # By the queue's identity (state directory + key), not its file name: a renamed queue
        # file reaches the same scheduler.
        digest = sha1_hex(str(self.state_dir / self.stem))[:10]
        return runtime_dir() / f"{self.stem[:40]}-{digest}.sock"

    @property
    def tmux_session(self) -> str:
        """``gtui-<stem>-<hash>``: the stem for people, a short hash of the queue's identity
        (its folder and key) so that two ``queue.toml`` in two folders get two sessions."""
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in self.stem)
        digest = sha1_hex(str(self.state_dir / self.stem))[:6]
        return f"gtui-{safe[:40]}-{digest}"

    def log_dir(self, log_dir_setting: str) -> Path:
        """``log_dir`` from the queue file's folder; with ``$GTUI_STATE_DIR`` set, from the
        queue's state folder there: whoever cannot keep state beside the queue file (another
        user's folder, a read-only one) cannot keep logs there either."""
        p = Path(os.path.expanduser(log_dir_setting))
        if p.is_absolute():
            return p
        return (self.state_dir if os.environ.get(STATE_DIR_ENV) else self.queue.parent) / p


def ensure_state_dir(paths: QueuePaths) -> Path:
    """The queue's state directory, made private; a folder the user cannot write gets a
    plain message saying where state goes and how to put it elsewhere, not a traceback."""
    refuse_foreign_state(paths)
    try:
        return ensure_private_dir(paths.state_dir)
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise GtuiError(read_only_hint(paths, e)) from None


def refuse_foreign_state(paths: QueuePaths) -> None:
    """Refuse a state directory another user made, saying how to keep ours elsewhere: two
    users' queue files in one shared folder share the place their state would go."""
    try:
        st = paths.state_dir.lstat()
    except OSError:
        return
    if st.st_uid == os.getuid():
        return
    text = f"{paths.state_dir} belongs to another user (uid {st.st_uid}); gtui will not use it"
    if not os.environ.get(STATE_DIR_ENV):
        text += (
            f" (it keeps the state of their queues in {paths.queue.parent}).\n"
            f"put your queue's state in a folder of yours: export {STATE_DIR_ENV}="
            "~/.local/state/gtui (for every gtui command on this queue; its logs go there "
            "too, unless log_dir in [settings] is an absolute path)"
        )
    raise GtuiError(text)


def read_only_hint(paths: QueuePaths, e: OSError) -> str:
    """What to do when the queue's state cannot be made where it goes (a shared, read-only
    folder): where the state goes, and how to put it elsewhere."""
    folder = paths.queue.parent
    return (
        f"cannot create {paths.state_dir} ({e.strerror}): gtui keeps a queue's state (its "
        f"database, lock, exit statuses) beside the queue file, and {folder} is read-only for "
        "you.\n"
        f"put the state in a folder of yours: export {STATE_DIR_ENV}=~/.local/state/gtui (for "
        "every gtui command on this queue; its logs go there too, unless log_dir in [settings] "
        "is an absolute path); or copy the queue file to a folder you can write"
    )


def queue_paths(queue: str | Path) -> QueuePaths:
    """The paths of ``queue``, under the key its state directory knows it by (read-only)."""
    paths = QueuePaths(Path(queue).expanduser().resolve())
    return QueuePaths(paths.queue, _resolve_key(paths, _read_registry(paths.registry)))


def register_queue(paths: QueuePaths) -> QueuePaths:
    """Record ``paths.queue`` (its name and inode) under its key, and return the paths under
    that key. A scheduler calls this before it takes the lock, so that a renamed file (same
    inode) and an atomically saved one (same name) both stay the same queue."""
    from gtui.core.flock import locked

    ensure_state_dir(paths)
    with locked(paths.registry.with_suffix(".lock")):
        entries = _read_registry(paths.registry)
        key = _resolve_key(paths, entries)
        try:
            st = paths.queue.stat()
        except OSError:
            return QueuePaths(paths.queue, key)
        entry = {"name": paths.queue.name, "dev": st.st_dev, "ino": st.st_ino}
        if entries.get(key) != entry:
            entries[key] = entry
            _write_registry(paths.registry, entries)
    return QueuePaths(paths.queue, key)


def _resolve_key(paths: QueuePaths, entries: dict[str, dict[str, object]]) -> str:
    """Same inode first (a rename), then the same name (an editor's save replaces the inode),
    else a new key: the stem, or the stem and a digest of the name when the stem is taken."""
    try:
        st = paths.queue.stat()
        ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
    except OSError:
        ident = None
    name = paths.queue.name
    if ident is not None:
        for key, e in entries.items():
            if (e.get("dev"), e.get("ino")) == ident:
                return key
    for key, e in entries.items():
        if e.get("name") == name:
            return key
    stem = paths.queue.stem
    if stem not in entries:
        return stem
    return f"{stem}-{sha1_hex(name)[:6]}"


def _read_registry(path: Path) -> dict[str, dict[str, object]]:
    """The registry's entries; an absent, foreign, oversized or garbled one reads as empty."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_size > _REGISTRY_MAX:
            return {}
        raw = os.read(fd, _REGISTRY_MAX)
    finally:
        os.close(fd)
    try:
        doc = json.loads(raw)
    except ValueError:
        return {}
    queues = doc.get("queues") if isinstance(doc, dict) else None
    if not isinstance(queues, dict):
        return {}
    return {k: v for k, v in queues.items() if isinstance(k, str) and isinstance(v, dict)}


def _write_registry(path: Path, entries: dict[str, dict[str, object]]) -> None:
    from gtui.core.atomic import write_atomically

    text = json.dumps({"version": 1, "queues": entries}, indent=1, sort_keys=True)
    write_atomically(path, text + "\n", mode=0o600)
