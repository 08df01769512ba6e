"""Starting, watching and stopping job processes.

Each job runs in its own session and process group, through a small bash wrapper that runs the
user's command as a child (``bash -c "$GTUI_CMD"`` in the job's cwd), waits for it and writes its
exit status to a file. The status file is what makes a job that ends while gtui is down
recoverable: a restarted scheduler adopts the wrapper by pid + create time, waits for it with a
pidfd (no polling) and reads the file.

Why these choices:

- The command reaches the wrapper through the environment, never by interpolation into the
  wrapper script, so quotes, ``$``, backticks and newlines run exactly as written.
- The wrapper traps TERM/INT/HUP with a handler (not ``trap ''``, which the job would inherit as
  "ignored"), so the SIGTERM that :func:`kill_tree` sends to the group kills the job but lets the
  wrapper record it. The shell defers a trap while a foreground child runs, so no ``wait`` loop is
  needed and the job keeps normal SIGINT/SIGQUIT dispositions (a background ``&`` child would
  get them ignored).
- The wrapper is POSIX sh run by ``/bin/sh``; only the job gets ``bash -c``. Where /bin/sh is
  dash, it starts in 1.5 ms where bash takes 2.1: measured 0.9 ms less between a job's end and
  the next start (benchmarks/end_to_start.py). POSIX makes ``sh`` defer a trap while a
  foreground child runs, as bash does.
- The status is one ``printf`` builtin (a single ``write`` of a few bytes), not a temp file and
  ``mv``: the subshell and the ``mv`` exec cost about 4 ms between a job's end and the next
  start (benchmarks/end_to_start.py). Nothing reads the file before the wrapper has exited, and a
  wrapper killed between open and write leaves an empty file, which reads as "no status", as
  no file did before.
- A wrapper that cannot fork the job (the user's process limit reached: dash gives up at
  once, it does not retry as bash does) exits from the error, through its EXIT trap, which
  writes ``nofork``: the job never ran, and is tried again later without spending a retry.
  Only that error exit leaves ``rc`` unset; a SIGKILLed wrapper runs no trap at all.
- The job's end time is the status file's mtime, set by that one write: no ``date`` exec on
  the path between a job's end and the next start, and a scheduler that reads the file late
  (stopped, swapped out) still gets when the job really ended.
- The wrapper's own stderr goes to /dev/null: bash's "Terminated" notices stay out of the log,
  which holds the job's output only. The job's stdout and stderr both go to the log.
- Every process of a job carries ``GTUI_RUN_ID`` in its environment, so :func:`kill_tree` finds
  a daemonized grandchild that left both the tree and the process group (setsid + double fork).
  ``env -i`` drops that marker, so :func:`kill_tree` also goes by what a process cannot shed
  that way: the job's session (the wrapper's pid: a grandchild that made a group of its own is
  still in it) and, for one that left the session too, the job's log open for writing (a
  daemon inherits its stdout; reading it, as ``tail -f`` does, does not count).

Size: a job's process life on Linux (the wrapper, pidfd waits, killing trees with their
daemons) shares the /proc readers below; the why of each part is above.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import hashlib
import os
import re
import shutil
import signal as _signal
import socket
import stat as _stat
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from gtui.core import procstat
from gtui.core.errors import GtuiError
from gtui.core.exec import limits
from gtui.core.exec.base import (
    TEMPORARY_ERRNOS,
    UNKNOWN,
    ExitStatus,
    Handle,
    LaunchDeferred,
    LaunchError,
    LaunchRequest,
    in_thread,
)
from gtui.core.model import cmd_too_long
from gtui.core.paths import ensure_private_dir
from gtui.core.procstat import ProcStat, read_stat

RUN_ID_VAR = "GTUI_RUN_ID"
WRAPPER_ARG0 = "gtui-job"  # the wrapper's $0: ``sh -c WRAPPER gtui-job STATUS_FILE BASH``
CREATE_TIME_TOLERANCE_S = 0.011  # psutil create_time has clock-tick (10 ms) resolution
_NAME_MAX_BYTES = 120
# An ASCII name that safe_name keeps as it is (a start after a crash looks up every job's files).
_SAFE_AS_IS = re.compile(r"[A-Za-z0-9_+=@,%][A-Za-z0-9_.+=@,%-]*")
_MAX_LOG_VARIANTS = 10_000
_POLL_MIN_S = 0.02
_POLL_MAX_S = 0.5
_KILL_WAIT_S = 10.0  # after SIGKILL, how long to wait for the kernel to tear a tree down
_WRAPPER_LAST_WORDS_S = 2.0  # after the job is SIGKILLed, time the wrapper gets to write status
NOT_FORKED = "its wrapper could not fork it (the user's process limit, ulimit -u, is reached)"

# $1 = the status file, $2 = bash. POSIX sh (see the module's docstring); it runs in the job's
# cwd (Popen cwd=).
_WRAPPER = r"""
trap 'gtui_sig=1' TERM INT HUP
trap '[ -n "${rc+x}" ] || printf "nofork\n" > "$1"' EXIT
gtui_cmd=$GTUI_CMD
unset GTUI_CMD
"$2" -c "$gtui_cmd" 2>&1
rc=$?
if [ "$rc" -gt 128 ] && [ "$rc" -le 192 ]; then
  st="signal $((rc - 128))"
else
  st="exit $rc"
fi
umask 077
printf '%s\n' "$st" > "$1"
exit "$rc"
"""


# The executor interface's types, under the names this module has always given them (the Ray
# agent and the tests use them from here).
Launched = Handle

# Our own children, kept referenced until reaped: a dropped Popen would be reaped by
# subprocess's _cleanup() at the next Popen, stealing the wait status from us.
_children: dict[int, subprocess.Popen[bytes]] = {}
_children_lock = threading.Lock()


# ---------------------------------------------------------------------------------------------
# names and paths


def safe_name(name: str) -> str:
    """A job name made safe as one file-name component, stable and collision-free.

    Anything but letters, digits and ``-_.+=@,%`` becomes ``_``, ``..`` is broken up, a leading
    ``-`` or ``.`` is dropped and the length capped; when that changed the name, a short hash of
    the original is appended so that ``a/b`` and ``a_b`` never share a file.
    """
    if len(name) <= _NAME_MAX_BYTES and _SAFE_AS_IS.fullmatch(name) and ".." not in name:
        return name  # what the rules below give back unchanged, found at C speed
    out = "".join(c if c.isalnum() or c in "-_.+=@,%" else "_" for c in name)
    while ".." in out:
        out = out.replace("..", "_.")
    out = out.lstrip("-.")
    encoded = out.encode()
    if len(encoded) > _NAME_MAX_BYTES:
        out = encoded[:_NAME_MAX_BYTES].decode(errors="ignore")
    if out != name or not out:
        digest = hashlib.sha1(name.encode(errors="surrogatepass")).hexdigest()[:8]
        out = f"{out}-{digest}" if out else f"job-{digest}"
    return out


def _log_candidates(log_dir: Path, name: str, attempt: int) -> Iterable[Path]:
    base = f"{safe_name(name)}.{attempt}"
    yield log_dir / f"{base}.log"
    for i in range(1, _MAX_LOG_VARIANTS):
        yield log_dir / f"{base}.{i}.log"


def log_path_for(log_dir: Path, name: str, attempt: int) -> Path:
    """``log_dir/<name>.<attempt>.log``, or ``<name>.<attempt>.N.log`` if that exists already.

    Advisory: :func:`launch` creates the file with O_EXCL, so a race still never overwrites.
    """
    for p in _log_candidates(log_dir, name, attempt):
        if not os.path.lexists(p):
            return p
    raise LaunchError(f"{log_dir}: too many logs for job {name!r} attempt {attempt}")


def _status_candidates(run_dir: Path, name: str, attempt: int) -> Iterable[Path]:
    base = Path(os.path.abspath(run_dir)) / f"{safe_name(name)}.{attempt}"
    yield base.with_name(f"{base.name}.status")
    for i in range(1, _MAX_LOG_VARIANTS):
        yield base.with_name(f"{base.name}.{i}.status")


def status_path_for(run_dir: Path, name: str, attempt: int) -> Path:
    """``<name>.<attempt>.status``: where an attempt's exit status usually is (its first run)."""
    return next(iter(_status_candidates(run_dir, name, attempt)))


def free_status_path(run_dir: Path, name: str, attempt: int) -> Path:
    """Where the next launch of the attempt will have its status written: the usual name, or
    ``<name>.<attempt>.N.status`` when another run of that attempt left its file there (a
    launch never deletes nor shares another run's status). Saved in the record before the
    launch, which then creates this same file (:func:`new_status_file`)."""
    for p in _status_candidates(run_dir, name, attempt):
        if not os.path.lexists(p):
            return p
    raise LaunchError(f"{run_dir}: too many status files for job {name!r} attempt {attempt}")


def new_status_file(run_dir: Path, name: str, attempt: int) -> Path:
    """Create the attempt's status file, empty ("no status" until the wrapper writes it), with
    O_EXCL: the first free one of :func:`free_status_path`'s names, never one that is there."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    for p in _status_candidates(run_dir, name, attempt):
        try:
            os.close(os.open(p, flags, 0o600))
            return p
        except FileExistsError:
            continue
    raise LaunchError(f"{run_dir}: too many status files for job {name!r} attempt {attempt}")


def _open_new_log(log_dir: Path, name: str, attempt: int) -> tuple[int, Path]:
    log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # a new one is private, as its logs
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
    for p in _log_candidates(log_dir, name, attempt):
        try:
            return os.open(p, flags, 0o600), p
        except FileExistsError:
            continue
    raise LaunchError(f"{log_dir}: too many logs for job {name!r} attempt {attempt}")


# ---------------------------------------------------------------------------------------------
# launching


_found_bash: tuple[str | None, str | None] = (None, None)  # (PATH, bash) of the last lookup


def _bash() -> str | None:
    """bash on PATH (looked up again only when PATH changes or it went away: a launch is on the
    hot path, and a PATH scan costs 0.1 ms)."""
    global _found_bash
    path = os.environ.get("PATH")
    last = _found_bash[1]
    if _found_bash[0] != path or last is None or not os.access(last, os.X_OK):
        found = shutil.which("bash") or ("/bin/bash" if os.access("/bin/bash", os.X_OK) else None)
        _found_bash = (path, found)
    return _found_bash[1]


def _sh(bash: str) -> str:
    """The wrapper's shell: /bin/sh (dash on Debian and Ubuntu starts faster than bash), else
    bash itself (the wrapper is POSIX sh, so either runs it)."""
    return "/bin/sh" if os.access("/bin/sh", os.X_OK) else bash


def launch(req: LaunchRequest) -> Launched:
    """Start a job; synchronous and fast (a fork/exec), safe to call on the event loop."""
    bash = _bash()
    if bash is None:
        raise LaunchError(f"job {req.name}: bash not found on PATH; gtui runs every job with bash")
    too_long = cmd_too_long(req.cmd)  # what the queue file's check says: never E2BIG
    if too_long:
        raise LaunchError(f"job {req.name}: {too_long}")
    if not req.cwd.is_dir():
        what = "is not a directory" if req.cwd.exists() else "does not exist"
        raise LaunchError(f"job {req.name}: cwd {req.cwd} {what}; fix its cwd in the queue file")
    try:
        ensure_private_dir(req.run_dir)
        # A file of its own: one an earlier run of this attempt left keeps its words.
        status_path = new_status_file(req.run_dir, req.name, req.attempt)
    except OSError as e:
        raise LaunchError(f"job {req.name}: cannot use {req.run_dir}: {_oserr(e)}") from e
    try:
        log_fd, log_path = _open_new_log(req.log_dir, req.name, req.attempt)
    except OSError as e:
        _forget(status_path)
        raise LaunchError(
            f"job {req.name}: cannot create its log in {req.log_dir}: {_oserr(e)}"
        ) from e

    cmd = req.cmd
    if req.limit_cpus or req.limit_ram_mib:
        can, why = limits.probe()
        if can:
            cmd = limits.limited_cmd(cmd, bash, req.limit_cpus, req.limit_ram_mib)
        else:
            with contextlib.suppress(OSError):
                os.write(log_fd, limits.unlimited_note(why).encode())
    # In bytes, as Popen hands it to exec: the str view of os.environ decodes every variable
    # and Popen encodes it back (~0.1 ms of each start).
    env = dict(os.environb)
    for key, value in req.env.items():
        env[os.fsencode(key)] = os.fsencode(value)
    env[b"GTUI_CMD"] = os.fsencode(cmd)
    env[RUN_ID_VAR.encode()] = uuid.uuid4().hex.encode()
    try:
        with _children_lock:
            proc = subprocess.Popen(
                [_sh(bash), "-c", _WRAPPER, WRAPPER_ARG0, str(status_path), bash],
                cwd=req.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
            _children[proc.pid] = proc
    except OSError as e:
        _forget(status_path)
        os.close(log_fd)
        with contextlib.suppress(OSError):
            log_path.unlink()
        if e.errno in TEMPORARY_ERRNOS:
            raise LaunchDeferred(f"no process could be made: {_oserr(e)}") from e
        raise LaunchError(f"job {req.name}: could not start: {_oserr(e)}") from e
    os.close(log_fd)
    return Launched(proc.pid, create_time_of(proc.pid), log_path, status_path)


def _forget(path: Path) -> None:
    """Remove the status file this launch just made, for a run that did not start (its own
    only, still empty)."""
    with contextlib.suppress(OSError):
        path.unlink()


_boot_time: float | None = None


def create_time_of(pid: int) -> float:
    """The process's start time as psutil's ``create_time`` gives it (boot time + its start in
    clock ticks), from one read of /proc/PID/stat. psutil read that file twice and /proc/stat
    (one line per CPU) once for each launch: 0.3 ms of each job's start on the hot path.
    Elsewhere, or when the file cannot be read, psutil's; now if the process is gone already
    (cannot happen for an unreaped child)."""
    global _boot_time
    try:
        ticks = procstat.stat_of(pid).start
        if _boot_time is None:
            _boot_time = procstat.boot_time() or psutil.boot_time()
        return _boot_time + ticks / procstat.CLOCK_TICKS
    except (OSError, ValueError, IndexError):
        pass
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return time.time()


# For the Ray node agent (gtui.core.exec.ray.agent), which starts the same wrapper detached.
WRAPPER = _WRAPPER
bash_path = _bash
open_new_log = _open_new_log


def _oserr(e: OSError) -> str:
    if e.errno == errno.ENOSPC:
        return "no space left on the device; free some space and retry the job"
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{e.strerror} (check the directory's permissions)"
    if e.errno == errno.EAGAIN:
        return f"{e.strerror} (the user's process limit, ulimit -u, is reached)"
    return e.strerror or str(e)


# ---------------------------------------------------------------------------------------------
# exit status


def read_status_file(path: Path) -> ExitStatus | None:
    """The status the wrapper wrote ("exit 3", "signal 9"), or None if there is none / garbage.

    Its ``ended_at`` is the file's mtime: the wrapper's one write, right after the job ended,
    sets it, so the end is the job's own record even when the scheduler reads it much later."""
    try:
        with open(path, "rb") as f:
            text = f.read(64).decode(errors="replace").strip()
            ended_at = os.fstat(f.fileno()).st_mtime
    except OSError:
        return None
    if text == "nofork":
        return ExitStatus(None, None, not_started=NOT_FORKED, ended_at=ended_at)
    kind, _, num = text.partition(" ")
    if not num.isdigit():
        return None
    if kind == "exit":
        return ExitStatus(int(num), None, ended_at=ended_at)
    if kind == "signal":
        return ExitStatus(None, int(num), ended_at=ended_at)
    return None


def _from_wait_status(status: int) -> ExitStatus:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        return ExitStatus(None, -code)
    if 128 < code <= 192:  # the wrapper exits with bash's 128+n for a job killed by signal n
        return ExitStatus(None, code - 128)
    return ExitStatus(code, None)


def _reap(pid: int) -> tuple[bool, ExitStatus | None]:
    """Reap our child ``pid`` if it has ended.

    ``(False, None)``: it still runs. ``(True, status)``: it ended (status None when it is not,
    or no longer, our child to reap, e.g. someone else waited for it).
    """
    with _children_lock:
        proc = _children.get(pid)
        if proc is None:
            return True, None
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            _children.pop(pid, None)
            proc.returncode = -1
            return True, None
        if got == 0:
            return False, None
        _children.pop(pid, None)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return True, _from_wait_status(status)


def _is_our_child(launched: Launched) -> bool:
    with _children_lock:
        return launched.pid in _children


async def wait_exit(launched: Launched) -> ExitStatus:
    """Return when the job's wrapper has ended, with its exit status.

    Works for our own child (reaped here, no zombie) and for an adopted process from an earlier
    scheduler. The status file wins; then waitpid's status for our child; else unknown.
    """
    own = _is_our_child(launched)
    waited: ExitStatus | None = None
    if own:
        ended, waited = _reap(launched.pid)
        while not ended:
            await _wait_gone(launched.pid, None)
            ended, waited = _reap(launched.pid)
    elif is_alive(launched.pid, launched.create_time):
        await _wait_gone(launched.pid, launched.create_time)
    from_file = read_status_file(launched.status_path)
    if from_file is not None:
        return from_file
    return waited if waited is not None else UNKNOWN


async def _wait_gone(pid: int, create_time: float | None) -> None:
    """Wait for ``pid`` to exit: pidfd readability when available, polling otherwise.

    ``create_time`` None: pid is our unreaped child (it cannot be reused under us).
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):
        await _poll_gone(pid, create_time)
        return
    try:
        if create_time is not None and not is_alive(pid, create_time):
            return  # the pid now names another process; ours is gone
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def ready() -> None:
            if not done.done():
                done.set_result(None)

        try:
            loop.add_reader(fd, ready)
        except (NotImplementedError, RuntimeError):
            await _poll_gone(pid, create_time)
            return
        try:
            await done
        finally:
            loop.remove_reader(fd)
    finally:
        os.close(fd)


async def _poll_gone(pid: int, create_time: float | None) -> None:
    delay = _POLL_MIN_S
    while True:
        if create_time is None:
            if _reap_peek(pid):
                return
        elif not is_alive(pid, create_time):
            return
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, _POLL_MAX_S)


def _reap_peek(pid: int) -> bool:
    """True if our child ``pid`` has exited (a zombie or gone), without reaping it."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


# ---------------------------------------------------------------------------------------------
# liveness and trees


def is_alive(pid: int, create_time: float) -> bool:
    """The very process we started (pid + create time, so a reused pid does not count), not a
    zombie."""
    try:
        p = psutil.Process(pid)
        if abs(p.create_time() - create_time) > CREATE_TIME_TOLERANCE_S:
            return False
        return p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True  # it exists and its create time matched: assume alive


def process_tree(pid: int) -> set[int]:
    """``pid`` and all its descendants; empty if pid is gone. Tolerates processes vanishing."""
    try:
        root = psutil.Process(pid)
        kids = root.children(recursive=True)
    except psutil.Error:
        return set()
    return {pid, *(k.pid for k in kids)}


# A process as its stat line says it (gtui.core.procstat reads every /proc file).
_Proc = ProcStat
_read_stat = read_stat


def _environ_has(pid: int, entry: bytes) -> bool:
    """Whether the process's environment holds ``entry`` (``KEY=value``) exactly."""
    try:
        data = b"\0" + procstat.environ_of(pid)
    except OSError:
        return False
    return b"\0" + entry + b"\0" in data


_own_pids = procstat.pids_of_user


def processes_with_env(key: str, value: str) -> list[int]:
    """Live processes of this user whose environment holds ``key=value`` (e.g. the daemons a
    job left behind, found by the token the engine put in its environment)."""
    return processes_with_env_values(key, {value}).get(value, [])


def processes_with_env_values(key: str, values: Collection[str]) -> dict[str, list[int]]:
    """``processes_with_env`` for many values in one pass over /proc: value -> pids.

    One scan costs 2 ms with 80 processes, more on a busy server: the engine checks the jobs
    that ended meanwhile together (benchmarks/throughput.py: a scan per job end halved the
    throughput of short jobs)."""
    wanted = set(values)
    found: dict[str, list[int]] = {}
    if not wanted:
        return found
    marker = b"\0" + key.encode() + b"="
    for pid in _own_pids():
        try:
            env = b"\0" + procstat.environ_of(pid)
        except OSError:
            continue
        at = env.find(marker)
        if at < 0:
            continue
        start = at + len(marker)
        end = env.find(b"\0", start)
        value = env[start : end if end >= 0 else len(env)].decode(errors="replace")
        if value not in wanted:
            continue
        p = _read_stat(int(pid))
        if p is not None and p.state not in ("Z", "X", "x"):
            found.setdefault(value, []).append(p.pid)
    return found


@dataclass(frozen=True)
class Wrapper:
    """A live job wrapper found by its status file's folder (see :func:`wrappers_in`)."""

    pid: int
    create_time: float
    status_path: Path
    env: dict[str, str]  # its GTUI_* variables: the job, the attempt, the token, the GPUs


def wrappers_in(run_dir: Path) -> list[Wrapper]:
    """The live wrappers of this user whose exit-status file lies in ``run_dir``: every job of
    one queue still running, found without its record (a lost state database). The status
    file's folder is the queue's marker here: it is keyed by the queue's identity, which a
    renamed queue file keeps (its ``GTUI_QUEUE`` does not)."""
    folder = os.path.abspath(run_dir)
    out: list[Wrapper] = []
    for pid in _own_pids():
        try:
            argv = procstat.cmdline_of(pid)
            if len(argv) < 5 or argv[3] != WRAPPER_ARG0.encode():
                continue
            status = os.fsdecode(argv[4])
            if os.path.dirname(status) != folder:
                continue
            items = procstat.environ_of(pid).split(b"\0")
        except OSError:
            continue
        p = _read_stat(int(pid))
        if p is None or p.state in ("Z", "X", "x"):
            continue
        if p.sid != p.pid:
            # The wrapper leads its own session; a fork of it that has not yet exec'd the
            # job's bash shows the wrapper's arguments too, and is not it.
            continue
        env: dict[str, str] = {}
        for item in items:
            key, sep, value = item.partition(b"=")
            if sep and (key.startswith(b"GTUI_") or key == b"CUDA_VISIBLE_DEVICES"):
                env[key.decode(errors="replace")] = value.decode(errors="replace")
        out.append(Wrapper(p.pid, create_time_of(p.pid), Path(status), env))
    return out


def _run_id_of(pid: int) -> str | None:
    try:
        data = procstat.environ_of(pid)
    except OSError:
        return None
    key = RUN_ID_VAR.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(key):
            return item[len(key) :].decode(errors="replace")
    return None


@dataclass(frozen=True)
class _LogFile:
    """The job's log as its processes' fd links name it, and the file itself (dev, inode)."""

    link: str
    key: tuple[int, int]


def _log_file(pid: int, log_path: Path | None = None) -> _LogFile | None:
    """The job's log: ``log_path`` when given (the engine's record), else the wrapper's
    stdout. Only a regular file counts: a stdout of /dev/null or a pipe would name processes
    that are not the job's. The resolved path, as the kernel shows it in fd links."""
    try:
        if log_path is not None:
            where = link = os.path.realpath(log_path)
        else:
            where = procstat.fd_path(pid, 1)
            link = os.readlink(where)
        st = os.stat(where)
    except OSError:
        return None
    if _stat.S_ISREG(st.st_mode):
        return _LogFile(link, (st.st_dev, st.st_ino))
    return None


def _writes_to(pid: int, log: _LogFile) -> bool:
    """Whether ``pid`` holds the job's log open for writing (a daemon's inherited stdout)."""
    try:
        fds = procstat.fds_of(pid)
    except OSError:
        return False
    for fd in fds:
        link = procstat.fd_path(pid, fd)
        try:
            if os.readlink(link) != log.link:
                continue
            st = os.stat(link)
            if (st.st_dev, st.st_ino) != log.key:
                continue
            flags = procstat.fd_flags_of(pid, fd)
        except OSError:
            continue
        if flags is not None and flags & os.O_ACCMODE != os.O_RDONLY:
            return True
    return False


_rss_bytes = procstat.rss_bytes


def trees_rss_mib(roots: Mapping[str, int]) -> dict[str, int]:
    """Host memory (resident, MiB) of each job's processes, by job name: its root's tree, process
    group and session (the job's host memory peak). One walk of /proc for all jobs, not one each:
    it runs at every GPU poll. Shared pages count in each process (an upper bound, as ``ps``
    shows it). A job with nothing left is left out."""
    uid = os.getuid()
    procs = _own_processes(uid)
    kids: dict[int, list[int]] = {}
    groups: dict[int, list[int]] = {}
    for p in procs.values():
        kids.setdefault(p.ppid, []).append(p.pid)
        groups.setdefault(p.pgid, []).append(p.pid)
        if p.sid != p.pgid:
            groups.setdefault(p.sid, []).append(p.pid)
    out: dict[str, int] = {}
    for name, root in roots.items():
        stack = [root, *groups.get(root, ())]
        seen: set[int] = set()
        while stack:
            q = stack.pop()
            if q in seen or q not in procs:
                continue
            seen.add(q)
            stack.extend(kids.get(q, ()))
        if seen:
            out[name] = (sum(_rss_bytes(q) for q in seen) + (1 << 19)) >> 20
    return out


def _own_processes(uid: int) -> dict[int, _Proc]:
    """Every live process of user ``uid`` from /proc, zombies left out (they are already dead);
    {} where /proc cannot be read."""
    procs: dict[int, _Proc] = {}
    for pid in procstat.pids_of_user(uid):
        p = _read_stat(int(pid))
        if p is not None and not p.ended:
            procs[p.pid] = p
    return procs


def _collect(pid: int, log: _LogFile | None = None) -> dict[int, _Proc]:
    """Every live process of this user that belongs to the job rooted at ``pid``: its tree, its
    process group and session, anything carrying its run id, and anything writing to its log
    ``log`` (a daemon that left the session and dropped the run id with ``env -i``), with
    their descendants. Zombies are left out: they are already dead."""
    uid = os.getuid()
    procs = _own_processes(uid)
    if not procs:  # no /proc: psutil's view of the tree is all we have
        found: dict[int, _Proc] = {}
        for q in process_tree(pid):
            found[q] = _Proc(q, 0, 0, 0, "?")
        return found

    seeds = {q for q, p in procs.items() if pid in (q, p.pgid, p.sid)}
    run_id = None
    for q in sorted(seeds, key=lambda q: q != pid):  # the wrapper first
        run_id = _run_id_of(q)
        if run_id:
            break
    if run_id:
        entry_bytes = f"{RUN_ID_VAR}={run_id}".encode()
        seeds |= {q for q in procs if q not in seeds and _environ_has(q, entry_bytes)}
    if log is None:
        log = _log_file(pid)
    if log is not None:
        me = os.getpid()
        seeds |= {q for q in procs if q not in seeds and q != me and _writes_to(q, log)}
    kids: dict[int, list[int]] = {}
    for p in procs.values():
        kids.setdefault(p.ppid, []).append(p.pid)
    result: dict[int, _Proc] = {}
    stack = list(seeds)
    while stack:
        q = stack.pop()
        if q in result or q not in procs:
            continue
        result[q] = procs[q]
        stack.extend(kids.get(q, ()))
    return result


def _still_there(p: _Proc) -> bool:
    if p.start == 0:  # from the psutil fallback
        try:
            return psutil.Process(p.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False
    now = _read_stat(p.pid)
    return now is not None and now.start == p.start and now.state not in ("Z", "X", "x")


def _send(pid: int, procs: Iterable[_Proc], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    for p in procs:
        if p.start and not _still_there(p):
            continue  # never signal a pid that may have been reused
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, sig)


async def _wait_all_gone(procs: Iterable[_Proc], timeout_s: float) -> bool:
    pending = list(procs)
    deadline = time.monotonic() + timeout_s
    delay = _POLL_MIN_S
    while True:
        pending = [p for p in pending if _still_there(p)]
        if not pending:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 1.5, 0.2)


def _pid_reused(pid: int, create_time: float | None) -> bool:
    """True when ``pid`` now names a live process other than the one started at create_time.

    Then there is nothing of the job left to signal: the kernel never hands out a pid that is
    still in use as a process group id, so the job's group is gone too.
    """
    if create_time is None:
        return False
    try:
        p = psutil.Process(pid)
        return abs(p.create_time() - create_time) > CREATE_TIME_TOLERANCE_S
    except psutil.Error:
        return False  # gone: its group may still have members, and killpg is safe


async def kill_tree(
    pid: int,
    grace_s: float,
    *,
    create_time: float | None = None,
    log_path: Path | None = None,
    on_signalled: Callable[[], None] | None = None,
) -> None:
    """Stop a job and everything it started: SIGTERM (and SIGCONT, so a suspended job can act on
    it) to the process group and every process of the job, SIGKILL after ``grace_s`` to whatever
    is left, including daemonized grandchildren outside the group. Returns when all are gone (or,
    for a process the kernel cannot kill, after a bounded wait).

    Pass ``create_time`` (the job's) to make sure a reused pid is never signalled, and
    ``log_path`` (the job's log) to find its daemons by their stdout once the wrapper is gone.
    ``on_signalled`` is called once SIGTERM is sent: a caller that need not wait out the grace
    (``gtui kill``) answers from there."""
    if _pid_reused(pid, create_time):
        return
    log = await in_thread(functools.partial(_log_file, pid, log_path))
    procs = await in_thread(functools.partial(_collect, pid, log))
    _send(pid, procs.values(), _signal.SIGTERM)
    _send(pid, procs.values(), _signal.SIGCONT)
    if on_signalled is not None:
        on_signalled()
    await _wait_all_gone(procs.values(), max(0.0, grace_s))
    for _round in range(5):
        found = await in_thread(functools.partial(_collect, pid, log))
        found.update({q: p for q, p in procs.items() if _still_there(p)})
        if not found:
            return
        # The job first, the wrapper last: it traps TERM and can still record "signal 9".
        wrapper = found.pop(pid, None)
        if wrapper is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, _signal.SIGKILL)
        if found:
            # Freeze first: a shell must not see its children die (and exit 0) before its
            # own SIGKILL lands, and nothing frozen can fork a replacement.
            _send_each(found.values(), _signal.SIGSTOP)
            _send_each(found.values(), _signal.SIGKILL)
            await _wait_all_gone(found.values(), _KILL_WAIT_S)
        if wrapper is not None and not await _wait_all_gone([wrapper], _WRAPPER_LAST_WORDS_S):
            _send_each([wrapper], _signal.SIGKILL)
            await _wait_all_gone([wrapper], _KILL_WAIT_S)
        procs = {}


def _send_each(procs: Iterable[_Proc], sig: int) -> None:
    for p in procs:
        if p.start and not _still_there(p):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p.pid, sig)


def _group_and_tree(pid: int) -> list[_Proc]:
    return list(_collect(pid).values())


def suspend(pid: int, *, create_time: float | None = None) -> None:
    """SIGSTOP the job's process group and its processes outside it (its GPU memory stays)."""
    if not _pid_reused(pid, create_time):
        _send(pid, _group_and_tree(pid), _signal.SIGSTOP)


def signal_group(pid: int, signum: int, *, create_time: float | None = None) -> None:
    """Send ``signum`` to the job's processes (its group and those outside it), the wrapper
    (``pid``) left out: the warning before a preemption or a time limit, which the job may
    trap to save its work, would end the wrapper (it traps only TERM, INT and HUP) before it
    records the job's exit."""
    if not _pid_reused(pid, create_time):
        _send_each([p for p in _group_and_tree(pid) if p.pid != pid], _signal.Signals(signum))


def resume(pid: int, *, create_time: float | None = None) -> None:
    """SIGCONT what :func:`suspend` stopped."""
    if not _pid_reused(pid, create_time):
        _send(pid, _group_and_tree(pid), _signal.SIGCONT)


# ---------------------------------------------------------------------------------------------
# ports

_recent_ports: deque[int] = deque(maxlen=256)
_ports_lock = threading.Lock()


def free_port() -> int:
    """A TCP port nothing is bound to right now (for DDP's MASTER_PORT), avoiding ports handed
    out recently: a job given a port may not have bound it yet."""
    with _ports_lock:
        port = 0
        for _ in range(64):
            port = _bind_zero()
            if port not in _recent_ports:
                break
        _recent_ports.append(port)
        return port


def _bind_zero() -> int:
    # The wildcard address: a port free there is free on 127.0.0.1 and every other interface,
    # whichever address the job's rendezvous binds. Nothing listens; the socket closes at once.
    for host in ("0.0.0.0", "127.0.0.1"):
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((host, 0))
                return int(s.getsockname()[1])
        except OSError:
            continue
    raise GtuiError("cannot find a free TCP port: binding a socket failed")
