"""Who holds each GPU's memory: the processes NVML lists, named from the process
table (user, short command, running time, gtui job), and whether a holder looks stale.

A holder looks stale when it is a zombie (it died and its parent never reaped it: the driver
may still hold its memory), or when it holds memory on a GPU that has sat at 0 % utilization
for ``STALE_IDLE_S`` or more (a notebook kernel left open, a debugger stopped at a breakpoint),
or for ``PARENT_GONE_IDLE_S`` when what started it is gone too. A parent gone alone is
information, not staleness: a nohup'd training or a service at 90 % has none either. The idle
time is the GPU's: a process's own utilization is not read, so two holders on an idle GPU are
both idle.

Its parent is gone when it was adopted: by init or by a subreaper (``systemd --user``,
``PR_SET_CHILD_SUBREAPER``). Linux keeps no record of the first parent, and an adopter is
always older than the orphan (it is one of its ancestors), so start times cannot tell; the
session does. A child starts in its parent's session; a process that does not lead its own
session and whose parent is in another one was started by someone else, now gone (a shell that
ran ``python train.py &`` and logged out). A session leader is taken as started that way on
purpose, as services are. Not seen: an orphan adopted by a subreaper in its own session.

The fake GPU layer declares holders with these facts already set (pids beyond any pid_max, so
never a real process); NVML's pids are described here with psutil. The static facts of a pid
(user, command, start, job) are cached by pid and start time, so a poll asks the process table
only for what can change (parent, state).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Iterable, Mapping

import psutil

from gtui.core.gpus.snapshot import GpuInfo, GpuProcess, GpuSnapshot
from gtui.core.units import format_mib

PID_MAX_LIMIT = 1 << 22  # a larger pid is made up (the fake layer, the memory executor)
REFRESH_S = 2.0  # a pid's parent and state are read again at most this often
STALE_IDLE_S = 15 * 60  # a GPU at 0 % this long while a holder keeps memory on it: stale
PARENT_GONE_IDLE_S = 5 * 60  # ...this long when the holder's parent is gone too
COMMAND_CHARS = 40  # a holder's command is shortened to this many characters
_INTERPRETERS = ("python", "python3", "bash", "sh", "torchrun", "accelerate", "deepspeed")
_CACHE_MAX = 4096


def short_command(argv: Iterable[str], limit: int = COMMAND_CHARS) -> str:
    """``/usr/bin/python3.11 /home/a/train.py --lr 0.1`` -> ``python3.11 train.py --lr 0.1``:
    program and script by their base names, cut to ``limit`` characters with an ellipsis."""
    parts = [a for a in argv if a]
    if not parts:
        return ""
    words = [os.path.basename(parts[0]) or parts[0]]
    rest = parts[1:]
    if rest and words[0].startswith(_INTERPRETERS) and not rest[0].startswith("-"):
        words.append(os.path.basename(rest[0]) or rest[0])
        rest = rest[1:]
    text = " ".join([*words, *rest]).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


AGE_STEP_S = 5 * 60  # under an hour an age is said in these steps; STALE_IDLE_S is a whole one


def coarse_age(seconds: float) -> str:
    """An age that changes seldom (a waiting reason made of it must not change every second):
    ``<5 min``, ``45 min``, ``3 h``, ``2 d``. Rounded down, never up, in steps that
    ``STALE_IDLE_S`` is a multiple of: a holder flagged idle says at least that long
    (``idle at 0 % for 15 min``), never less than what flagged it."""
    s = max(0.0, seconds)
    step = AGE_STEP_S // 60
    if s < AGE_STEP_S:
        return f"<{step} min"
    if s < 3600:
        return f"{int(s // AGE_STEP_S) * step} min"
    if s < 48 * 3600:
        return f"{int(s // 3600)} h"
    return f"{int(s // 86400)} d"


def idle_for(gpu: GpuInfo, p: GpuProcess, now: float) -> float | None:
    """How long ``p`` has held memory on ``gpu`` while the GPU read 0 % (None: not idle or
    not known)."""
    if gpu.idle_since is None or gpu.util != 0 or not p.mem_mib:
        return None
    since = gpu.idle_since if p.started is None else max(gpu.idle_since, p.started)
    return max(0.0, now - since)


def stale_reasons(gpu: GpuInfo, p: GpuProcess, now: float) -> list[str]:
    """Why ``p`` looks stale, in words; [] when it does not."""
    out = []
    if p.zombie:
        out.append("zombie")
    idle = idle_for(gpu, p, now)
    if idle is None:
        return out
    if p.parent_gone and idle >= PARENT_GONE_IDLE_S:
        out.append("parent gone")
    if idle >= STALE_IDLE_S or (p.parent_gone and idle >= PARENT_GONE_IDLE_S):
        out.append(f"idle at 0 % for {coarse_age(idle)}")
    return out


def holder_notes(gpu: GpuInfo, p: GpuProcess, now: float) -> list[str]:
    """What is worth knowing about ``p`` that does not make it stale: its parent gone while
    its GPU works (a service, a nohup'd training)."""
    if p.parent_gone and "parent gone" not in stale_reasons(gpu, p, now):
        return ["parent gone"]
    return []


def who(p: GpuProcess) -> str:
    """``alice's python train.py`` (``pid 4242`` where the process table says nothing)."""
    if p.command:
        return f"{p.user}'s {p.command}" if p.user else p.command
    return f"{p.user}'s pid {p.pid}" if p.user else f"pid {p.pid}"


def held_text(gpu: GpuInfo, p: GpuProcess, now: float) -> str:
    """``GPU 2: 61G held by alice's python train.py, 3 h`` (and ``, stale: zombie``)."""
    text = f"GPU {gpu.label}: {format_mib(p.mem_mib)} held by {who(p)}"
    if p.started is not None:
        text += f", {coarse_age(now - p.started)}"
    stale = stale_reasons(gpu, p, now)
    return text + (f" (stale: {', '.join(stale)})" if stale else "")


def holders(gpu: GpuInfo, ours: Iterable[str] = ()) -> list[GpuProcess]:
    """The processes on ``gpu`` that are not our jobs (``ours``: our running jobs' names),
    largest memory first."""
    mine = set(ours)
    procs = [p for p in gpu.processes if p.job is None or p.job not in mine]
    return sorted(procs, key=lambda p: -(p.mem_mib or 0))


def process_json(gpu: GpuInfo, p: GpuProcess, now: float) -> dict[str, object]:
    """A holder in ``gtui gpus --json``: its facts, running time and staleness."""
    doc: dict[str, object] = {
        "pid": p.pid,
        "mem_mib": p.mem_mib,
        "user": p.user,
        "command": p.command,
        "started": p.started,
        "running_s": None if p.started is None else round(max(0.0, now - p.started), 1),
        "parent_gone": p.parent_gone,
        "zombie": p.zombie,
        "job": p.job,
        "stale": stale_reasons(gpu, p, now),
    }
    return doc


def adopted(pid: int, ppid: int) -> bool:
    """Was ``pid`` adopted (by init or a subreaper): what started it has ended? (module doc)"""
    if ppid <= 0:
        return False  # its parent is outside this pid namespace, or unknown
    try:
        sid = os.getsid(pid)
        return sid != pid and os.getsid(ppid) != sid
    except OSError:
        return False


@dataclasses.dataclass
class _Known:
    started: float
    user: str | None
    command: str | None
    job: str | None
    read_at: float = 0.0  # when parent and state were last read
    zombie: bool = False
    parent_gone: bool = False


class HolderReader:
    """Names the processes of GPU readings from the process table, and keeps since when each
    GPU has read 0 % (a backend that knows it, the fake one, says so itself)."""

    def __init__(self) -> None:
        self._known: dict[int, _Known] = {}
        self._idle_since: dict[int, float] = {}
        self._me = os.getuid()

    def describe(
        self,
        snapshot: GpuSnapshot,
        now: float | None = None,
        ours: Mapping[int, str] | None = None,
    ) -> GpuSnapshot:
        """``snapshot`` with its processes named and each GPU's ``idle_since`` set. ``ours``:
        our jobs' root pids and names, named without asking the process table."""
        now = time.time() if now is None else now
        ours = ours or {}
        gpus = []
        seen: set[int] = set()
        for g in snapshot.gpus:
            procs = tuple(
                dataclasses.replace(p, job=ours[p.pid])
                if p.pid in ours and p.job is None
                else self._process(p, seen, now)
                for p in g.processes
            )
            idle_since = g.idle_since
            if idle_since is None and g.util == 0 and not g.lost:
                idle_since = self._idle_since.setdefault(g.index, now)
            elif g.util != 0:
                self._idle_since.pop(g.index, None)
            if procs != g.processes or idle_since != g.idle_since:
                g = dataclasses.replace(g, processes=procs, idle_since=idle_since)
            gpus.append(g)
        if len(self._known) > len(seen) + _CACHE_MAX:  # pids no GPU lists any more
            self._known = {pid: k for pid, k in self._known.items() if pid in seen}
        return dataclasses.replace(snapshot, gpus=tuple(gpus))

    def _process(self, p: GpuProcess, seen: set[int], now: float) -> GpuProcess:
        if p.user is not None or p.command is not None or not 0 < p.pid <= PID_MAX_LIMIT:
            return p  # declared (the fake layer), or made up (the memory executor)
        seen.add(p.pid)
        known = self._known.get(p.pid)
        if known is None or now - known.read_at >= REFRESH_S:
            known = self._read(p.pid, known, now)
            if known is None:
                self._known.pop(p.pid, None)
                return p  # another pid namespace (a container), or gone since NVML listed it
            self._known[p.pid] = known
        return dataclasses.replace(
            p,
            user=known.user,
            command=known.command,
            started=known.started,
            zombie=known.zombie,
            parent_gone=known.parent_gone,
            job=known.job,
        )

    def _read(self, pid: int, known: _Known | None, now: float) -> _Known | None:
        """The process table's facts on ``pid``; the static ones only for a new process."""
        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                started = proc.create_time()
                if known is None or abs(known.started - started) > 0.05:  # a new process
                    known = self._read_static(proc, started)
                known.zombie = proc.status() == psutil.STATUS_ZOMBIE
                known.parent_gone = adopted(pid, proc.ppid())
        except (psutil.Error, OSError):
            return None
        known.read_at = now
        return known

    def _read_static(self, proc: psutil.Process, started: float) -> _Known:
        user = command = job = None
        with contextlib.suppress(psutil.Error, OSError, KeyError):
            user = proc.username()
        with contextlib.suppress(psutil.Error, OSError):
            command = short_command(proc.cmdline()) or proc.name()
        with contextlib.suppress(psutil.Error, OSError):
            if proc.uids().real == self._me:  # only our own processes' environments are readable
                job = proc.environ().get("GTUI_JOB")
        return _Known(started=started, user=user, command=command, job=job)
