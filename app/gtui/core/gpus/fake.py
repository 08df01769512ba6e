"""Simulated GPUs: for tests, demos and machines without a GPU.

A spec is comma-separated entries ``[Nx]TOTAL[:USED_BY_OTHERS][@UTIL][HOLDERS]`` (``4x80G``,
``80G:16G@35,24G``), or ``@FILE``: a file holding such a spec (one entry per line allowed, ``#``
comments), read again at every poll so a test can make other users come and go.

``!FAULT`` after an entry's ``@UTIL`` (before its holders) makes the GPU report a hardware fault
to the health watch at every read while the spec says so: ``80G!xid79`` (an Xid, any number),
``80G!ecc`` (an uncorrectable ECC error), ``80G!lost`` (fallen off the bus: shown lost). Several
may follow each other (``80G!xid48!ecc``). With ``@FILE``, a rewrite of the file injects one
mid-run.

``/SIZE+SIZE...`` after TOTAL splits the GPU into MIG instances of those sizes:
``80G/40G+20G+10G`` shows as three GPUs, ``0:0`` to ``0:2`` (indices 1000 to 1002), each with its
own memory and a ``MIG-...`` UUID; jobs are placed on them as on GPUs, one job per instance.

``HOLDERS`` declares other users' processes on the GPU, in square brackets,
separated by ``;``: ``USER MEM AGE [zombie] [orphan] COMMAND``, e.g.
``80G@0[alice 61G 3h python train.py; bob 2G 20m orphan jupyter-lab]``. Their memory counts as
used by others (``USED_BY_OTHERS``, when given, must hold at least their sum). They get pids
beyond any kernel's pid_max, so they never name a real process; ``orphan`` marks one whose
parent is gone. A GPU at 0 % with holders has been idle since its oldest holder started.

How the simulation behaves, so that everything above it runs unchanged:

- Other users' memory shows only in ``mem_used_mib`` unless holders are declared (above): then
  it shows as their processes too.
- A running job of ours appears as a process with its pid on each of its GPUs, using its declared
  memory, or, when it declared none, all the memory left on that GPU. A job says what it really
  uses per GPU with ``GTUI_FAKE_USE`` in its ``env`` (or ``[settings] env``), a size such as
  ``"12G"`` (``FAKE_USE_ENV``): it then uses that, whatever it asked for, so its recorded peak,
  ``mem = "auto"`` and the notes on a ``mem`` far from use can be seen; NVML
  ignores it. Memory is capped at what the GPU has left (a real job would hit CUDA OOM
  instead), so ``used`` never exceeds ``total``.
- A GPU with a running job of ours shows at least 90 % utilization; a suspended job keeps its
  memory at 0 % utilization. The temperature follows the utilization, and so does the power
  drawn, which an energy counter integrates (gpus/fakeenergy.py).
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gtui.core.errors import GtuiError
from gtui.core.gpus.fakeenergy import FakeMeters
from gtui.core.gpus.fakefaults import take_faults, with_health
from gtui.core.gpus.snapshot import GpuInfo, GpuProcess, GpuSnapshot, JobUsage, mig_index
from gtui.core.units import UnitError, format_mib, parse_duration_s, parse_size_mib

GRAMMAR = (
    "expected comma-separated [Nx]TOTAL[:USED_BY_OTHERS][@UTIL][!FAULT][HOLDERS] entries, such "
    "as 4x80G or 80G:16G@35,24G or 80G@0[alice 61G 3h python train.py] or 80G!xid79 (faults: "
    "!xidN, !ecc, !lost), or @FILE (a file holding such a spec)"
)
MAX_FAKE_GPUS = 256
FAKE_PID_BASE = 1 << 23  # above any pid_max (2**22): a declared holder never names a real process
OUR_UTIL = 90  # what a GPU shows while a job of ours runs on it
FAKE_USE_ENV = "GTUI_FAKE_USE"  # in a job's env: what it really uses per GPU when simulated

_ENTRY_RE = re.compile(
    r"^(?:(?P<count>\d+)\s*[xX*]\s*)?(?P<total>[^:@]+?)"
    r"(?:\s*:\s*(?P<used>[^:@]+?))?(?:\s*@\s*(?P<util>\d+)\s*%?)?$"
)
_MODEL_BY_GIB = {80: "A800 80G", 40: "A100 40G", 48: "A6000 48G", 24: "RTX 4090 24G"}


@dataclass(frozen=True)
class FakeHolder:
    """Another user's process declared on a simulated GPU."""

    user: str
    mem_mib: int
    age_s: float
    command: str
    zombie: bool = False
    orphan: bool = False


@dataclass(frozen=True)
class FakeGpu:
    """One simulated GPU as the spec describes it (before our jobs are added)."""

    total_mib: int
    others_mib: int = 0
    others_util: int = 0
    holders: tuple[FakeHolder, ...] = ()
    mig: tuple[int, ...] = ()  # MIG instance sizes (MiB); () = not split
    faults: tuple[str, ...] = ()  # "xid79", "ecc", "lost": what its health reads (_health)


def _split_entries(text: str) -> list[str]:
    """Split on the commas outside ``[...]`` (a holder's command may hold commas)."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


_HOLDER = "a holder is USER MEM AGE [zombie] [orphan] COMMAND"


def _parse_holders(text: str, entry: str, spec: str, source: str) -> tuple[FakeHolder, ...]:
    """``alice 61G 3h python train.py; bob 2G 20m orphan jupyter`` -> holders."""
    out = []
    for raw in text.split(";"):
        words = raw.split()
        if not words:
            continue
        if len(words) < 4:
            raise _bad(spec, f"in {entry!r}, {raw.strip()!r}: {_HOLDER}", source)
        user, mem_text, age_text, *rest = words
        flags = set()
        while rest and rest[0] in ("zombie", "orphan"):
            flags.add(rest.pop(0))
        if not rest:
            raise _bad(spec, f"in {entry!r}, holder {raw.strip()!r} has no command", source)
        try:
            mem = parse_size_mib(mem_text)
            age = parse_duration_s(age_text)
        except UnitError as e:
            raise _bad(
                spec, f"in {entry!r}, holder {raw.strip()!r}: {e} ({_HOLDER})", source
            ) from None
        out.append(FakeHolder(user, mem, age, " ".join(rest), "zombie" in flags, "orphan" in flags))
    return tuple(out)


def _bad(spec: str, why: str, source: str) -> GtuiError:
    return GtuiError(f"{source} {spec!r}: {why}\n  {GRAMMAR}")


def parse_fake_spec(spec: str, source: str = "--fake-gpus") -> list[FakeGpu]:
    """Read ``[Nx]TOTAL[:USED_BY_OTHERS][@UTIL],...`` (not ``@FILE``: see ``FakeBackend``).

    ``source`` names where the spec came from in the error message. Errors exit 2.
    """
    text = spec.strip()
    if not text:
        raise _bad(spec, "empty", source)
    if text.startswith("@"):
        raise _bad(spec, "a spec file cannot point to another file", source)
    gpus: list[FakeGpu] = []
    for raw in _split_entries(text):
        entry = raw.strip()
        if not entry:
            raise _bad(spec, "an empty entry (two commas in a row, or a trailing comma)", source)
        held: tuple[FakeHolder, ...] = ()
        bracket = entry.find("[")
        if bracket >= 0:
            if not entry.endswith("]"):
                raise _bad(spec, f"in {entry!r}, holders end with ]", source)
            held = _parse_holders(entry[bracket + 1 : -1], entry, spec, source)
            entry = entry[:bracket].strip()
        try:
            entry, faults = take_faults(entry)
        except ValueError as e:
            raise _bad(spec, str(e), source) from None
        mig: tuple[int, ...] = ()
        if "/" in entry:
            entry, _, layout = entry.partition("/")
            try:
                mig = tuple(parse_size_mib(x) for x in layout.split("+"))
            except UnitError as e:
                raise _bad(spec, f"in {raw.strip()!r}, MIG instances: {e}", source) from None
        m = _ENTRY_RE.match(entry)
        if not m:
            raise _bad(spec, f"cannot read {entry!r}", source)
        count = int(m.group("count")) if m.group("count") else 1
        if count < 1:
            raise _bad(spec, f"{entry!r} asks for 0 GPUs", source)
        try:
            total = parse_size_mib(m.group("total"))
            used = parse_size_mib(m.group("used")) if m.group("used") else 0
        except UnitError as e:
            raise _bad(spec, f"in {entry!r}, {e}", source) from None
        util = int(m.group("util")) if m.group("util") else 0
        held_mib = sum(h.mem_mib for h in held)
        if m.group("used") and used < held_mib:
            raise _bad(spec, f"in {entry!r}, others use less than their holders hold", source)
        used = max(used, held_mib)
        if total <= 0:
            raise _bad(spec, f"in {entry!r}, a GPU needs some memory", source)
        if used > total:
            raise _bad(spec, f"in {entry!r}, others use more than the GPU has", source)
        if util > 100:
            raise _bad(spec, f"in {entry!r}, utilization is a percentage (0-100)", source)
        if mig and (used or held or sum(mig) > total):
            why = (
                "others' memory goes on a GPU, not on its MIG instances"
                if used or held
                else ("its MIG instances hold more than the GPU has")
            )
            raise _bad(spec, f"in {raw.strip()!r}, {why}", source)
        gpus.extend(FakeGpu(total, used, util, held, mig, faults) for _ in range(count))
        if len(gpus) > MAX_FAKE_GPUS:
            raise _bad(spec, f"more than {MAX_FAKE_GPUS} GPUs", source)
    return gpus


def read_spec_file(path: Path) -> str:
    """A spec file's text as one spec: ``#`` comments dropped, lines joined by commas."""
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip().strip(",")
        if line:
            lines.append(line)
    return ",".join(lines)


def fake_use_mib(env: dict[str, str]) -> int | None:
    """``GTUI_FAKE_USE`` of a job's environment in MiB; None when absent or unreadable (the
    queue file rejects an unreadable literal value; one made by a matrix is ignored)."""
    text = env.get(FAKE_USE_ENV)
    if text is None:
        return None
    try:
        return parse_size_mib(text.strip())
    except UnitError:
        return None


def fake_name(total_mib: int) -> str:
    """A readable name that says the GPU is simulated."""
    gib = total_mib / 1024
    model = _MODEL_BY_GIB.get(round(gib)) if abs(gib - round(gib)) < 0.01 else None
    return f"Fake {model}" if model else f"Fake GPU {format_mib(total_mib)}"


def fake_uuid(index: int) -> str:
    """Stable per index, shaped like a real one (``GPU-xxxxxxxx-xxxx-...``)."""
    return f"GPU-fa4e0000-0000-4000-8000-{index:012x}"


class FakeBackend:
    """A ``GpuBackend`` over simulated GPUs; ``read`` never raises."""

    source: Literal["fake"] = "fake"

    def __init__(self, spec: str, base_dir: Path | None = None) -> None:
        """Parse the spec now, so a mistake is reported at start (GtuiError, exit 2)."""
        self.spec = spec
        text = spec.strip()
        self.file: Path | None = None
        if text.startswith("@"):
            name = text[1:].strip()
            if not name:
                raise _bad(spec, "@ needs a file name", "--fake-gpus")
            path = Path(name).expanduser()
            self.file = path if path.is_absolute() else (base_dir or Path.cwd()) / path
            try:
                text = read_spec_file(self.file)
            except OSError as e:
                raise GtuiError(
                    f"--fake-gpus {spec!r}: cannot read {self.file}: {e.strerror or e}"
                ) from None
            self._gpus = parse_fake_spec(text, source=f"{self.file}: fake GPU spec")
        else:
            self._gpus = parse_fake_spec(text)
        self._lock = threading.Lock()
        # When each declared holder started, fixed at its first read: the same spec read again
        # gives the same snapshot (a holder's age grows, its start does not move).
        self._started: dict[tuple[int, int, FakeHolder], float] = {}
        self._meters = FakeMeters()  # each GPU's power and energy counter

    @property
    def gpus(self) -> list[FakeGpu]:
        """The GPUs as last read from the spec."""
        return list(self._gpus)

    def _reload(self) -> str | None:
        """Re-read the spec file; on trouble keep the last good spec and say why."""
        if self.file is None:
            return None
        try:
            text = read_spec_file(self.file)
            self._gpus = parse_fake_spec(text, source=f"{self.file}: fake GPU spec")
        except OSError as e:
            why = e.strerror or e
            return f"cannot read the fake GPU spec {self.file} ({why}); using the last good one"
        except GtuiError as e:
            first_line = str(e).split("\n", 1)[0]
            return f"{first_line}; using the last good one"
        except Exception as e:  # never let a poll crash the scheduler
            return f"cannot use the fake GPU spec {self.file} ({e}); using the last good one"
        return None

    def read(self, ours: Sequence[JobUsage] = ()) -> GpuSnapshot:
        """The simulated GPUs with our jobs placed on them."""
        with self._lock:
            error = self._reload()
            now = time.time()
            gpus = tuple(
                with_health(info, g.faults)  # a MIG instance has its GPU's faults
                for i, g in enumerate(self._gpus)
                for info in (
                    self._instances(i, g, ours)
                    if g.mig
                    else [self._meters.metered(self._gpu(i, g, ours, now), now)]
                )
            )
        return GpuSnapshot(gpus=gpus, taken_at=time.time(), source="fake", error=error)

    def _gpu(self, index: int, gpu: FakeGpu, ours: Sequence[JobUsage], now: float) -> GpuInfo:
        jobs = [j for j in ours if index in j.gpus]
        free = gpu.total_mib - gpu.others_mib
        mem: dict[int, int] = {}
        # Jobs that declared memory (or their real use, GTUI_FAKE_USE) take it first; whole-GPU
        # jobs share what is left.
        for job in jobs:
            use = job.fake_use_mib if job.fake_use_mib is not None else job.mem_mib
            if use is not None:
                take = max(0, min(use, free))
                mem[job.pid] = mem.get(job.pid, 0) + take
                free -= take
        whole = [j for j in jobs if j.mem_mib is None and j.fake_use_mib is None]
        for n, job in enumerate(whole):
            take = max(0, free // (len(whole) - n))
            mem[job.pid] = mem.get(job.pid, 0) + take
            free -= take
        util = gpu.others_util
        if any(not j.suspended for j in jobs):
            util = max(util, OUR_UTIL)
        seen: set[int] = set()
        procs: list[GpuProcess] = [
            GpuProcess(
                pid=FAKE_PID_BASE + index * 1000 + n,
                mem_mib=h.mem_mib,
                user=h.user,
                command=h.command,
                started=self._started.setdefault((index, n, h), now - h.age_s),
                parent_gone=h.orphan,
                zombie=h.zombie,
            )
            for n, h in enumerate(gpu.holders)
        ]
        idle_since = None
        if util == 0 and procs:
            idle_since = min(p.started for p in procs if p.started is not None)
        for job in jobs:
            if job.pid not in seen:
                seen.add(job.pid)
                procs.append(GpuProcess(pid=job.pid, mem_mib=mem[job.pid]))
        return GpuInfo(
            index=index,
            name=fake_name(gpu.total_mib),
            uuid=fake_uuid(index),
            mem_total_mib=gpu.total_mib,
            mem_used_mib=gpu.total_mib - free,
            util=util,
            temperature=30 + (util * 3) // 10,
            processes=tuple(procs),
            idle_since=idle_since,
        )

    def _instances(self, index: int, gpu: FakeGpu, ours: Sequence[JobUsage]) -> list[GpuInfo]:
        """A GPU split into MIG instances: one GpuInfo each (utilization is not reported per
        instance by NVML either: n/a)."""
        out = []
        for slot, size in enumerate(gpu.mig):
            as_gpu = self._gpu(mig_index(index, slot), FakeGpu(size), ours, 0.0)
            out.append(
                dataclasses.replace(
                    as_gpu,
                    name=f"Fake MIG {format_mib(size)} of GPU {index}",
                    uuid=f"MIG-fa4e0000-0000-4000-8000-{index:04x}{slot:08x}",
                    util=None,
                    temperature=None,
                    mig_parent=index,
                )
            )
        return out

    def close(self) -> None:
        """Nothing to release."""
