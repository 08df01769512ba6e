"""Claims: the memory each gtui scheduler has promised its running jobs, published for every
local user.

CUDA allocates lazily: for the first seconds, sometimes minutes, of a job, the GPU it was given
still looks free to everyone else, and a colleague's scheduler that sees only NVML puts a second
job there; both fail with OOM. gtui already counts its own jobs' declared-but-not-yet-allocated
memory; a claim is how it tells the other users' gtui schedulers about it, with no daemon.

**The board.** A directory every local user can read and write, sticky like /tmp (only a file's
owner may replace or remove it): ``$GTUI_CLAIMS_DIR``, else ``/dev/shm/gtui-claims`` (tmpfs: a
reboot clears it), else ``/tmp/gtui-claims``. The first gtui creates it, mode 1777. One that is a
symlink, not a directory, or writable by others without the sticky bit is not used, and a note
says why. In it, one file per user, ``<uid>.json``, mode 0644, replaced atomically (a temp file
in the same directory, then rename) under a lock every user can take (``.lock``, flock, waited
for at most ``LOCK_WAIT_S``: a hostile holder only delays, never stops, a scheduler)::

    {"gtui_claims": 1, "uid": 1000, "claims": [
      {"gpu": "GPU-8c1d...", "index": 1, "mem_mib": 61440, "pid": 4242, "start": 1716912345.67,
       "job": "train-vit", "since": 1716912345.70, "queue": "3f2a9c0b1d2e4f50"}]}

``gpu`` is the GPU's UUID (simulated GPUs: see ``gpu_keys``), ``mem_mib`` the memory the job
declared on it, ``pid`` / ``start`` its process (the wrapper gtui launched, the leader of the
job's session) and that process's start time, ``since`` when the job started, ``queue`` a hash
of the queue's state path: it tells one user's queues apart without showing where they live.
A user's several queues share the file; each rewrites only its own entries and drops the
entries whose process has ended (stale entries are pruned; a file left empty is removed).

**Idle GPUs**. The file may also say, per queue, since when each GPU that
queue's scheduler polls has read 0 % utilization without a break::

    "idle": [{"gpu": "GPU-8c1d...", "since": 1716900000.0, "pid": 4100, "start": 1716890000.1,
              "queue": "3f2a9c0b1d2e4f50"}]

``pid`` / ``start`` are the scheduler's own process. ``gtui gpus`` reads the GPUs once and so
cannot know how long one has idled; it takes, for a GPU at 0 % in its own reading, the oldest
``since`` any live scheduler on the board says (``published_idle``), and calls a holder of it
idle that long. The word only colours what ``gtui gpus`` shows (who looks stale): nothing is
placed, killed or withheld on it. A scheduler rewrites its marks when a GPU starts or stops
idling, not at every poll; a mark whose scheduler has ended counts for nothing.

**Reading** (``ClaimBoard.read``): files named ``<uid>.json`` only, at most ``MAX_FILES``,
opened without following symlinks and without blocking (a FIFO is not read), at most
``MAX_FILE_BYTES`` each, ignored unless a regular file owned by the uid it names and holding
that uid. Each claim's fields are checked for type and range; the job name is cut to
``MAX_JOB_CHARS`` printable characters. The user shown is the file owner's name from the
password database, never a name the file gives. Nothing read can raise.

**Trust** (``judge``): a claim can only make a scheduler more careful, and even that is bounded.
It counts only while its process lives (pid and start time, as gtui re-adopts its own jobs) and
belongs to the claim's user; one larger than its GPU, or whose process has allocated nothing on
that GPU ``UNALLOCATED_LIMIT_S`` (10 minutes) after it started, is ignored with a note. The
memory it has allocated (``observed``) is that of the GPU processes in its process tree or its
session, as for our own jobs, so a claim counts ``max(0, declared - observed)``.

Size: the board (directory, lock, reading, writing) and the trust rules are one contract with
the other users' gtui; kept in one module, it says in one place all that a claim is and may do.

Host cores and memory: a job asking ``cpus`` / ``ram`` is also published in the file's
``host`` list (``{"cpus": 8, "ram_mib": 16384, "pid", "start", "job", "since", "queue"}``),
which an older gtui does not read (a file without it reads as none). Read, an entry is a
``Claim`` on ``HOST_KEY`` (``mem_mib`` its ram), which no GPU's key equals;
gtui.core.gpus.hostclaims judges them.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import pwd
import re
import secrets
import stat
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import psutil

from gtui.core.flock import open_lock, try_lock
from gtui.core.gpus.snapshot import GpuInfo, GpuSnapshot
from gtui.core.procstat import CLOCK_TICKS, boot_time, owner_of, read_stat, stat_of
from gtui.core.units import format_mib

ENV_DIR = "GTUI_CLAIMS_DIR"
SHM_DIR = Path("/dev/shm/gtui-claims")
FORMAT = 1
UNALLOCATED_LIMIT_S = 600.0  # a claim whose process allocated nothing this long after its start
MAX_FILE_BYTES = 256 * 1024
MAX_CLAIMS_PER_FILE = 512
MAX_FILES = 256
MAX_JOB_CHARS = 80
LOCK_NAME = ".lock"
LOCK_WAIT_S = 1.0
LOCK_BACKOFF_S = 60.0  # after a lock wait ran out, try without waiting for this long
START_TOLERANCE_S = 0.05  # psutil's create_time has clock-tick resolution
HOST_KEY = "host"  # the key of a claim of host cores and memory (never a GPU's)
MAX_CORES = 1 << 16
_FILE_RE = re.compile(r"(\d{1,10})\.json")
_MAX_MIB = 1 << 30
_MAX_PID = 1 << 22


_FileRead = tuple[list["Claim"], list["IdleMark"], str | None]  # a file's claims, marks, note


class ClaimsError(Exception):
    """The board cannot be used (a note for a person says why)."""


def claims_dir() -> Path:
    """Where claims live: ``$GTUI_CLAIMS_DIR``, else on tmpfs, else in /tmp."""
    env = os.environ.get(ENV_DIR, "").strip()
    if env:
        return Path(env).expanduser()
    if SHM_DIR.parent.is_dir():
        return SHM_DIR
    # Not $TMPDIR: that differs from one user to the next, and every user must find the board.
    return Path("/tmp/gtui-claims")


def queue_id(state_path: Path | str) -> str:
    """A queue's name on the board: a hash of its state path (the path itself stays private)."""
    return hashlib.sha256(os.fsencode(os.path.realpath(state_path))).hexdigest()[:16]


def gpu_keys(snapshot: GpuSnapshot, fake_file: Path | str | None = None) -> dict[int, str]:
    """GPU index -> the key claims name it by: the UUID of a real GPU. Simulated GPUs are shared
    only through a ``@FILE`` spec (the same file is the same simulated GPUs, for every user who
    reads it); a plain spec's GPUs belong to one scheduler alone and have no key."""
    if snapshot.source == "nvml":
        return {g.index: g.uuid for g in snapshot.gpus if g.uuid}
    if snapshot.source == "fake" and fake_file is not None:
        where = hashlib.sha256(os.fsencode(os.path.realpath(fake_file))).hexdigest()[:12]
        return {g.index: f"fake-{where}-{g.index}" for g in snapshot.gpus}
    return {}


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return f"uid {uid}"


@dataclass(frozen=True)
class Claim:
    """One published claim. ``uid`` and ``user`` come from the file's owner, not its content."""

    uid: int
    user: str
    gpu: str  # the GPU's key (gpu_keys)
    mem_mib: int  # declared on that GPU
    pid: int
    start: float  # the process's start time (psutil create_time)
    job: str
    since: float
    queue: str = ""
    index: int | None = None  # the GPU's index where it was published (informational)
    cpus: int = 0  # a claim of the host (gpu HOST_KEY): its cores; mem_mib is then its ram

    def to_json(self) -> dict[str, Any]:
        if self.gpu == HOST_KEY:
            return {
                "cpus": self.cpus,
                "ram_mib": self.mem_mib,
                "pid": self.pid,
                "start": self.start,
                "job": self.job,
                "since": self.since,
                "queue": self.queue,
            }
        return {
            "gpu": self.gpu,
            "index": self.index,
            "mem_mib": self.mem_mib,
            "pid": self.pid,
            "start": self.start,
            "job": self.job,
            "since": self.since,
            "queue": self.queue,
        }


@dataclass(frozen=True)
class NeighbourClaim:
    """A neighbour's live claim on one of our GPUs, as placement counts it (policy.place)."""

    gpu: int  # index in our snapshot
    mem_mib: int  # declared
    observed_mib: int  # what its processes use on that GPU now
    user: str
    job: str
    since: float  # when its process started

    @property
    def promised_mib(self) -> int:
        """Declared but not yet allocated: what ``available`` loses."""
        return max(0, self.mem_mib - max(0, self.observed_mib))


@dataclass(frozen=True)
class Judged:
    """A claim on one of our GPUs and what it counts for: ``counted``, ``ignored`` (with
    ``note``: a trust rule) or ``ended`` (its process is gone: it counts for nothing)."""

    claim: Claim
    gpu: int
    observed_mib: int
    status: Literal["counted", "ignored", "ended"]
    note: str = ""
    since: float = 0.0

    def placement(self) -> NeighbourClaim:
        c = self.claim
        return NeighbourClaim(self.gpu, c.mem_mib, self.observed_mib, c.user, c.job, self.since)

    def to_json(self) -> dict[str, Any]:
        c = self.claim
        return {
            "user": c.user,
            "uid": c.uid,
            "job": c.job,
            "pid": c.pid,
            "mem_mib": c.mem_mib,
            "observed_mib": self.observed_mib,
            "promised_mib": max(0, c.mem_mib - self.observed_mib)
            if self.status == "counted"
            else 0,
            "since": self.since or c.since,
            "status": self.status,
            "note": self.note or None,
        }


@dataclass(frozen=True)
class IdleMark:
    """A scheduler's word that GPU ``gpu`` (its key, as claims name it) has read 0 % at each of
    its polls since ``since``. ``uid`` and ``user`` come from the file's owner."""

    uid: int
    user: str
    gpu: str
    since: float
    pid: int  # the scheduler's process
    start: float  # its start time (psutil create_time)
    queue: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "since": self.since,
            "pid": self.pid,
            "start": self.start,
            "queue": self.queue,
        }


def own_start() -> float | None:
    """This process's start time, as a reader checks a mark's scheduler by (None: unknown)."""
    try:
        return psutil.Process().create_time()
    except psutil.Error:
        return None


def published_idle(marks: Sequence[IdleMark], now: float) -> dict[str, float]:
    """GPU key -> the oldest ``since`` among the marks whose scheduler still runs (as its
    user), none in the future."""
    out: dict[str, float] = {}
    procs: dict[int, _ProcState] = {}
    boot = _boot_time() if marks else None
    for m in marks:
        if m.since > now:
            continue
        proc = procs.get(m.pid)
        if proc is None:
            proc = procs[m.pid] = _process(m.pid, boot)
        state, started, owner = proc
        if state == "gone" or (started is not None and abs(started - m.start) > START_TOLERANCE_S):
            continue
        if owner is not None and owner != m.uid:
            continue
        if m.gpu not in out or m.since < out[m.gpu]:
            out[m.gpu] = m.since
    return out


# ---------------------------------------------------------------------------------- parsing


def _is_int(v: object, low: int, high: int) -> bool:
    return type(v) is int and low <= v <= high


def _is_time(v: object) -> bool:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return False
    return math.isfinite(v) and v > 0


def _printable(text: str, limit: int) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text[:limit])


def _is_key(v: object) -> bool:
    """A GPU's key as a file may give it."""
    return isinstance(v, str) and 0 < len(v) <= 128 and v.isascii() and v.isprintable()


def _idle(item: object, uid: int, user: str) -> IdleMark | None:
    """One idle mark of a file, checked field by field; None if anything is off."""
    if not isinstance(item, dict):
        return None
    gpu, since, pid, start, queue = (item.get(k) for k in ("gpu", "since", "pid", "start", "queue"))
    if not (_is_key(gpu) and _is_time(since) and _is_int(pid, 1, _MAX_PID) and _is_time(start)):
        return None
    if not isinstance(queue, str) or len(queue) > 64:
        return None
    return IdleMark(
        uid=uid,
        user=user,
        gpu=str(gpu),
        since=float(since),  # type: ignore[arg-type]
        pid=int(pid),  # type: ignore[arg-type]
        start=float(start),  # type: ignore[arg-type]
        queue=_printable(queue, 64),
    )


def _claim(item: object, uid: int, user: str) -> Claim | None:
    """One entry of a file, checked field by field; None if anything is off."""
    if not isinstance(item, dict):
        return None
    gpu, job, queue, index = item.get("gpu"), item.get("job"), item.get("queue", ""), None
    if not (isinstance(gpu, str) and _is_key(gpu)) or gpu == HOST_KEY:
        return None
    if not (isinstance(job, str) and job) or not isinstance(queue, str) or len(queue) > 64:
        return None
    mem, pid, start, since = (
        item.get("mem_mib"),
        item.get("pid"),
        item.get("start"),
        item.get("since"),
    )
    if not (_is_int(mem, 1, _MAX_MIB) and _is_int(pid, 1, _MAX_PID)):
        return None
    if not (_is_time(start) and _is_time(since)):
        return None
    if _is_int(item.get("index"), 0, 4095):
        index = item["index"]
    return Claim(
        uid=uid,
        user=user,
        gpu=gpu,
        mem_mib=int(mem),  # type: ignore[arg-type]
        pid=int(pid),  # type: ignore[arg-type]
        start=float(start),  # type: ignore[arg-type]
        job=_printable(job, MAX_JOB_CHARS),
        since=float(since),  # type: ignore[arg-type]
        queue=_printable(queue, 64),
        index=index,
    )


def _host_claim(item: object, uid: int, user: str) -> Claim | None:
    """One entry of a file's ``host`` list, as a Claim on HOST_KEY; None if anything is off."""
    if not isinstance(item, dict):
        return None
    cpus, ram = item.get("cpus", 0), item.get("ram_mib", 0)
    if not (_is_int(cpus, 0, MAX_CORES) and _is_int(ram, 0, _MAX_MIB)) or not (cpus or ram):
        return None
    claim = _claim({**item, "gpu": "-", "mem_mib": 1}, uid, user)  # the common fields' checks
    if claim is None:
        return None
    return replace(claim, gpu=HOST_KEY, mem_mib=int(ram), cpus=int(cpus))


def parse_claims(raw: bytes, uid: int, user: str) -> tuple[list[Claim], str | None]:
    """A claims file's bytes -> its claims and a note on what was wrong (None: nothing)."""
    claims, _idle_marks, note = parse_board_file(raw, uid, user)
    return claims, note


def parse_board_file(
    raw: bytes, uid: int, user: str
) -> tuple[list[Claim], list[IdleMark], str | None]:
    """A claims file's bytes -> its claims, its idle marks and a note on what was wrong."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return [], [], "not valid JSON"
    if not isinstance(doc, dict) or doc.get("gtui_claims") != FORMAT:
        return [], [], f"not a gtui claims file (format {FORMAT})"
    if doc.get("uid") != uid:
        return [], [], f"it names uid {str(doc.get('uid'))[:20]} inside, not uid {uid}"
    items = doc.get("claims")
    if not isinstance(items, list):
        return [], [], "no list of claims"
    notes = []
    if len(items) > MAX_CLAIMS_PER_FILE:
        notes.append(f"{len(items)} claims: only the first {MAX_CLAIMS_PER_FILE} are read")
        items = items[:MAX_CLAIMS_PER_FILE]
    claims = [c for c in (_claim(item, uid, user) for item in items) if c is not None]
    bad = len(items) - len(claims)
    host_in = doc.get("host", [])  # an older gtui writes none
    if isinstance(host_in, list):
        host_in = host_in[:MAX_CLAIMS_PER_FILE]
        host = [c for c in (_host_claim(item, uid, user) for item in host_in) if c is not None]
        bad += len(host_in) - len(host)
        claims += host
    else:
        notes.append("its host claims are not a list")
    if bad:
        notes.insert(0, f"{bad} malformed claim(s) ignored")
    marks_in = doc.get("idle", [])  # an older gtui writes none
    if not isinstance(marks_in, list):
        notes.append("its idle marks are not a list")
        marks_in = []
    marks_in = marks_in[:MAX_CLAIMS_PER_FILE]
    idle = [m for m in (_idle(item, uid, user) for item in marks_in) if m is not None]
    if len(marks_in) > len(idle):
        notes.append(f"{len(marks_in) - len(idle)} malformed idle mark(s) ignored")
    return claims, idle, "; ".join(notes) or None


# ------------------------------------------------------------------------------------ board


@dataclass
class BoardRead:
    """What one read of the board found: every claim but this queue's own, and notes on files
    that were ignored (each in words, stable from one read to the next)."""

    claims: list[Claim]
    notes: list[str]
    idle: list[IdleMark] = field(default_factory=list)  # schedulers' word on idle GPUs


class ClaimBoard:
    """The shared directory of claims, for one scheduler (``queue``) or a reader (None)."""

    def __init__(self, directory: Path | str | None = None, queue: str | None = None) -> None:
        self.directory = Path(directory) if directory is not None else claims_dir()
        self.queue = queue
        self.uid = os.geteuid()
        self.user = user_name(self.uid)
        self.written: frozenset[Claim] | None = None  # our entries as last written
        self.written_idle: frozenset[IdleMark] = frozenset()  # our idle marks, likewise
        self.stale = False  # the file on the board does not hold what we last wrote
        self._cache: dict[str, tuple[tuple[int, ...], _FileRead]] = {}
        self._held = 0
        self._no_wait_until = 0.0
        self.lock_note: str | None = None

    # -------------------------------------------------------------- the directory
    def _open_dir(self, create: bool) -> int:
        """An fd on the board's directory, checked; raises ClaimsError with a note."""
        path = self.directory
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            if not create:
                raise ClaimsError(f"{path} does not exist (no gtui has published yet)") from None
            try:
                os.mkdir(path, 0o1777)
            except FileExistsError:
                pass
            except OSError as e:
                raise ClaimsError(f"cannot create {path}: {e.strerror or e}") from None
            try:
                fd = os.open(path, flags)
            except OSError as e:
                raise ClaimsError(f"cannot open {path}: {e.strerror or e}") from None
            st = os.fstat(fd)
            if st.st_uid == self.uid and stat.S_IMODE(st.st_mode) != 0o1777:
                with contextlib.suppress(OSError):
                    os.fchmod(fd, 0o1777)  # the umask took some bits: shared by every user
        except OSError as e:
            why = "a symlink" if e.errno in (errno.ELOOP, errno.ENOTDIR) else e.strerror
            raise ClaimsError(f"{path} is not usable ({why or e})") from None
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o022 and not mode & stat.S_ISVTX:
            os.close(fd)
            raise ClaimsError(
                f"{path} is writable by others but not sticky (mode {mode:04o}): anyone could "
                "replace a claim; not used (chmod 1777 it, or set GTUI_CLAIMS_DIR)"
            )
        return fd

    # -------------------------------------------------------------- the lock
    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the board's lock (re-entrant) while reading, starting jobs and publishing, so
        that two schedulers never both find a GPU free. Waited for at most LOCK_WAIT_S; on
        trouble the block runs without it (``lock_note`` says why)."""
        if self._held:
            self._held += 1
            try:
                yield
            finally:
                self._held -= 1
            return
        fd = self._take_lock()
        self._held = 1
        try:
            yield
        finally:
            self._held = 0
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)  # closing the last fd releases the flock

    def _take_lock(self) -> int | None:
        try:
            dfd = self._open_dir(create=True)
        except ClaimsError as e:
            self.lock_note = str(e)
            return None

        # Read-only (every user locks the one file), non-blocking (a FIFO in its place).
        def open_it(create: bool) -> int:
            return open_lock(
                LOCK_NAME,
                exclusive=create,
                create=create,
                write=False,
                nonblock=True,
                mode=0o644,
                dir_fd=dfd,
            )

        try:
            try:  # not O_CREAT on one that exists: fs.protected_regular refuses that in /dev/shm
                fd = open_it(create=False)
            except FileNotFoundError:
                try:
                    fd = open_it(create=True)
                except FileExistsError:
                    fd = open_it(create=False)
        except OSError as e:
            self.lock_note = f"cannot open {self.directory / LOCK_NAME}: {e.strerror or e}"
            return None
        finally:
            os.close(dfd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            self.lock_note = f"{self.directory / LOCK_NAME} is not a regular file"
            return None
        if st.st_uid == self.uid and stat.S_IMODE(st.st_mode) & 0o444 != 0o444:
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o644)  # made under a strict umask: every user must open it
        now = time.monotonic()
        deadline = now + (0.0 if now < self._no_wait_until else LOCK_WAIT_S)
        while True:
            try:
                if try_lock(fd):
                    self.lock_note = None
                    return fd
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.002)
            except OSError as e:
                os.close(fd)
                self.lock_note = f"cannot lock {self.directory / LOCK_NAME}: {e.strerror or e}"
                return None
        os.close(fd)
        self._no_wait_until = time.monotonic() + LOCK_BACKOFF_S
        self.lock_note = (
            f"{self.directory / LOCK_NAME} stayed locked for {LOCK_WAIT_S:g}s (another user's "
            "gtui, or a stuck process): placing without it for a minute"
        )
        return None

    # -------------------------------------------------------------- reading
    def read(self) -> BoardRead:
        """Every claim on the board but this queue's own; never raises."""
        try:
            dfd = self._open_dir(create=False)
        except ClaimsError as e:
            missing = not self.directory.exists() and not self.directory.is_symlink()
            return BoardRead([], [] if missing else [str(e)])
        claims: list[Claim] = []
        idle: list[IdleMark] = []
        notes: list[str] = []
        seen: set[str] = set()
        try:
            with os.scandir(dfd) as entries:
                names = []
                for entry in entries:
                    if _FILE_RE.fullmatch(entry.name):
                        names.append(entry.name)
                        if len(names) >= MAX_FILES:
                            notes.append(
                                f"{self.directory}: more than {MAX_FILES} files; "
                                "the rest are not read"
                            )
                            break
            for name in sorted(names):
                seen.add(name)
                found, marks, note = self._read_file(dfd, name)
                if note:
                    notes.append(f"{self.directory / name}: {note}; ignored")
                if int(name[:-5]) == self.uid and self.queue is not None:
                    mine = frozenset(c for c in found if c.queue == self.queue)
                    my_marks = frozenset(m for m in marks if m.queue == self.queue)
                    self.stale = (
                        self.written is not None and mine != self.written
                    ) or my_marks != self.written_idle
                    found = [c for c in found if c.queue != self.queue]
                    marks = [m for m in marks if m.queue != self.queue]
                claims.extend(found)
                idle.extend(marks)
        except OSError as e:
            notes.append(f"cannot read {self.directory}: {e.strerror or e}")
        finally:
            os.close(dfd)
        if self.queue is not None and f"{self.uid}.json" not in seen:
            self.stale = bool(self.written) or bool(self.written_idle)
        for name in list(self._cache):
            if name not in seen:
                del self._cache[name]
        return BoardRead(claims, notes, idle)

    def _read_file(self, dfd: int, name: str) -> _FileRead:
        uid = int(name[:-5])
        try:
            fd = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd
            )
        except FileNotFoundError:
            return [], [], None  # removed meanwhile
        except OSError as e:
            if e.errno == errno.ELOOP:
                return [], [], "a symlink"
            return [], [], f"cannot be read ({e.strerror or e})"
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return [], [], "not a regular file"
            if st.st_uid != uid:
                who = user_name(st.st_uid)
                return [], [], f"owned by {who}, not by the user it names (uid {uid})"
            if st.st_size > MAX_FILE_BYTES:
                return [], [], f"{st.st_size} bytes, more than {MAX_FILE_BYTES}"
            key = (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            hit = self._cache.get(name)
            if hit is not None and hit[0] == key:
                return hit[1]
            raw = b""
            while len(raw) <= MAX_FILE_BYTES:
                chunk = os.read(fd, MAX_FILE_BYTES + 1 - len(raw))
                if not chunk:
                    break
                raw += chunk
        except OSError as e:
            return [], [], f"cannot be read ({e.strerror or e})"
        finally:
            os.close(fd)
        if len(raw) > MAX_FILE_BYTES:
            return [], [], f"more than {MAX_FILE_BYTES} bytes"
        got = parse_board_file(raw, uid, user_name(uid))
        self._cache[name] = (key, got)
        return got

    # -------------------------------------------------------------- writing
    def publish(self, mine: Sequence[Claim], idle: Sequence[IdleMark] = ()) -> str | None:
        """Make this queue's entries in the user's file ``mine`` and its idle marks ``idle``
        (under the lock); keep the user's other queues' entries and marks whose process still
        runs. Returns a note on trouble."""
        assert self.queue is not None, "a reader does not publish"
        ours, our_marks = list(mine), list(idle)
        with self.lock():
            try:
                dfd = self._open_dir(create=bool(ours or our_marks))
            except ClaimsError as e:
                if not ours and not our_marks and not self.directory.exists():
                    self.written, self.written_idle, self.stale = frozenset(), frozenset(), False
                    return None
                return f"cannot publish claims: {e}"
            try:
                name = f"{self.uid}.json"
                others, other_marks, _ = self._read_file(dfd, name)
                boot = _boot_time() if others or other_marks else None
                keep = [c for c in others if c.queue != self.queue and _alive(c.pid, c.start, boot)]
                keep_marks = [
                    m for m in other_marks if m.queue != self.queue and _alive(m.pid, m.start, boot)
                ]
                entries, marks = keep + ours, keep_marks + our_marks
                if not entries and not marks:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=dfd)
                else:
                    self._write(dfd, name, entries, marks)
            except OSError as e:
                return f"cannot publish claims in {self.directory}: {e.strerror or e}"
            finally:
                os.close(dfd)
        self.written, self.written_idle, self.stale = frozenset(ours), frozenset(our_marks), False
        return None

    def _write(
        self, dfd: int, name: str, entries: list[Claim], marks: Sequence[IdleMark] = ()
    ) -> None:
        host = [c.to_json() for c in entries if c.gpu == HOST_KEY][:MAX_CLAIMS_PER_FILE]
        entries = [c for c in entries if c.gpu != HOST_KEY]
        doc: dict[str, Any] = {
            "gtui_claims": FORMAT,
            "uid": self.uid,
            "claims": [c.to_json() for c in entries],
        }
        if marks:  # only then: the file reads as an older gtui wrote it
            doc["idle"] = [m.to_json() for m in marks[:MAX_CLAIMS_PER_FILE]]
        if host:  # likewise
            doc["host"] = host
        raw = json.dumps(doc, separators=(",", ":")).encode()
        while len(raw) > MAX_FILE_BYTES and entries:  # readers would ignore all of it
            entries = entries[: len(entries) * 3 // 4]
            doc["claims"] = [c.to_json() for c in entries]
            raw = json.dumps(doc, separators=(",", ":")).encode()
        tmp = f".{self.uid}.{secrets.token_hex(6)}.tmp"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o644,
            dir_fd=dfd,
        )
        try:
            try:
                os.fchmod(fd, 0o644)
                view = memoryview(raw)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise


# ------------------------------------------------------------------------------------ trust


_ProcState = tuple[Literal["alive", "gone", "hidden"], float | None, int | None]
# The boot time (gtui.core.procstat): psutil's ``create_time`` is a process's start + this.
_boot_time = boot_time


def _process(pid: int, boot: float | None = None) -> _ProcState:
    """Whether ``pid`` runs: (state, its start time as psutil gives it, its owner's uid).
    ``hidden``: it exists but this user may not look at it (/proc mounted with hidepid).
    Read from /proc through gtui.core.procstat (one small file: psutil took 15 times longer,
    and a scheduler judges every claim at every poll and before every start); psutil where
    that fails."""
    if boot is not None:
        try:
            st = stat_of(pid)
            owner = owner_of(pid)
            if st.state in ("Z", "X"):
                return "gone", None, None
            return "alive", boot + st.start / CLOCK_TICKS, owner
        except FileNotFoundError:
            return _exists(pid)
        except PermissionError:
            return "hidden", None, None
        except (OSError, ValueError, IndexError):
            pass
    try:
        p = psutil.Process(pid)
        with p.oneshot():
            if p.status() == psutil.STATUS_ZOMBIE:
                return "gone", None, None
            return "alive", p.create_time(), p.uids().real
    except psutil.NoSuchProcess:
        return _exists(pid)
    except psutil.Error:
        return "hidden", None, None


def _exists(pid: int) -> _ProcState:
    """No /proc entry: gone, or hidden from us (hidepid) though it runs."""
    try:
        os.kill(pid, 0)  # no signal is sent: only whether the pid exists
    except ProcessLookupError:
        return "gone", None, None
    except OSError:
        pass
    return "hidden", None, None


def process_state(pid: int, boot: float | None = None) -> _ProcState:
    """Whether ``pid`` runs, its start time and its owner (see ``_process``), for the judge of
    host claims (gtui.core.gpus.hostclaims)."""
    return _process(pid, boot)


def _alive(pid: int, start: float, boot: float | None) -> bool:
    state, started, _ = _process(pid, boot)
    if state == "gone":
        return False
    return started is None or abs(started - start) <= START_TOLERANCE_S


def _ppid(pid: int) -> int:
    """``pid``'s parent (0: unknown), from /proc, else psutil."""
    st = read_stat(pid)
    if st is not None:
        return st.ppid
    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return 0


def _belongs(pid: int, root: int, parents: dict[int, int]) -> bool:
    """Is ``pid`` in the tree or the session of ``root`` (a job's wrapper, its session leader)?"""
    if pid == root:
        return True
    with contextlib.suppress(OSError):
        if os.getsid(pid) == root:
            return True
    for _ in range(64):
        ppid = parents.get(pid)
        if ppid is None:
            ppid = parents[pid] = _ppid(pid)
        if ppid == root:
            return True
        if ppid <= 1:
            return False
        pid = ppid
    return False


def judge(
    claims: Sequence[Claim],
    snapshot: GpuSnapshot,
    keys: Mapping[int, str],
    *,
    now: float,
    limit_s: float = UNALLOCATED_LIMIT_S,
) -> list[Judged]:
    """The claims on our GPUs (``keys``: gpu_keys), each with what it counts for (module doc)."""
    gpus: dict[str, GpuInfo] = {}
    by_index = snapshot.by_index()
    for index, key in keys.items():
        if index in by_index:
            gpus[key] = by_index[index]
    out: list[Judged] = []
    procs: dict[int, _ProcState] = {}
    parents: dict[int, int] = {}
    boot = _boot_time() if claims else None
    for c in claims:
        g = gpus.get(c.gpu)
        if g is None:
            continue  # not one of our GPUs
        proc = procs.get(c.pid)
        if proc is None:
            proc = procs[c.pid] = _process(c.pid, boot)
        state, started, puid = proc
        if state == "gone" or (started is not None and abs(started - c.start) > START_TOLERANCE_S):
            out.append(Judged(c, g.index, 0, "ended", since=c.start))
            continue
        since = started if started is not None else min(c.start, now)
        what = f"{c.user}'s {c.job} claims {format_mib(c.mem_mib)} on GPU {g.index}"
        if puid is not None and puid != c.uid:
            note = f"{what}: ignored, its process {c.pid} belongs to {user_name(puid)}"
            out.append(Judged(c, g.index, 0, "ignored", note, since))
            continue
        total = g.mem_total_mib
        if total is not None and c.mem_mib > total:
            note = f"{what}: ignored, more than the GPU has ({format_mib(total)})"
            out.append(Judged(c, g.index, 0, "ignored", note, since))
            continue
        observed = sum(
            max(0, p.mem_mib or 0) for p in g.processes if _belongs(p.pid, c.pid, parents)
        )
        if observed == 0 and now - since > limit_s:
            note = (
                f"{what}: ignored, its process has allocated nothing there "
                f"{_minutes(limit_s)} after it started"
            )
            out.append(Judged(c, g.index, 0, "ignored", note, since))
            continue
        out.append(Judged(c, g.index, observed, "counted", since=since))
    return out


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def counted(judged: Sequence[Judged]) -> tuple[NeighbourClaim, ...]:
    """The claims placement counts, as ``policy.place`` takes them."""
    return tuple(j.placement() for j in judged if j.status == "counted")
