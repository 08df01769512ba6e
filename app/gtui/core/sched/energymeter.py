"""The energy meter: each running attempt's GPU energy, from the readings the scheduler takes
anyway (the counters at its start and end, the power at every poll between), by the rules of
gpus/energy.py. The runner calls ``begin`` when an attempt starts, ``resume`` when a restarted
scheduler re-adopts one, and ``end`` when it ends (its figure goes into the attempts history);
the engine calls ``sample`` after each poll's reading.

The start counters are saved in the store's meta (at the poll after a start), so an attempt
re-adopted by the next scheduler (a restart, a dashboard's successor) still gets its energy
from its counters; its power samples from before the restart are gone, so where the GPU has
no counter such an attempt's energy is not known (None) rather than understated. So is that
of an attempt that ended before the GPUs were read again after its start (shorter than a poll).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field

from gtui.core.gpus.energy import (
    J_PER_KWH,
    AttemptEnergy,
    counter_kwh,
    shared_use,
    trapezoid_j,
)
from gtui.core.gpus.reader import GpuReader
from gtui.core.gpus.snapshot import GpuInfo, GpuSnapshot
from gtui.core.state.book import JobBook

META_KEY = "energy_starts"  # job -> {"attempt": n, "start_mj": {gpu: mJ}}


@dataclass
class _Metered:
    """One running attempt: its GPUs' counters at its start, and their power integrated."""

    attempt: int
    gpus: tuple[int, ...]
    start_mj: dict[int, int | None]
    start_at: float = 0.0  # when the reading its counters come from was taken
    whole: bool = True  # its power samples cover it from its start (not re-adopted)
    joules: dict[int, float] = field(default_factory=dict)
    last: dict[int, tuple[float, float]] = field(default_factory=dict)  # GPU -> (when, W)
    shared: bool = False


class EnergyMeter:
    """Running attempts' energy (see the module)."""

    def __init__(self, book: JobBook, reader: GpuReader) -> None:
        self._book = book
        self._reader = reader
        self._runs: dict[str, _Metered] = {}
        self._dirty = False  # starts not saved to the meta yet

    def begin(self, name: str) -> None:
        """The attempt just started: its GPUs' counters now, and the first power sample."""
        rec = self._book.records[name]
        if not rec.gpus:
            return  # a CPU job
        snapshot = self._reader.snapshot
        by_index = snapshot.by_index()
        start = {g: _counter(by_index.get(g)) for g in rec.gpus}
        run = self._runs[name] = _Metered(rec.attempt, tuple(rec.gpus), start, snapshot.taken_at)
        # Power only: the reading predates the start (what it shows may be a job just gone).
        self._take(name, run, snapshot, by_index, None)
        self._dirty = True

    def resume(self, name: str) -> None:
        """A restarted scheduler re-adopted the attempt: its start counters from the meta."""
        rec = self._book.records.get(name)
        if rec is None or not rec.gpus:
            return
        saved = _load(self._book).get(name, {})
        start: dict[int, int | None] = dict.fromkeys(rec.gpus)
        if saved.get("attempt") == rec.attempt:
            counters = saved.get("start_mj")
            if isinstance(counters, dict):
                for g in rec.gpus:
                    value = counters.get(str(g))
                    start[g] = value if isinstance(value, int) else None
        # Its counters were read by the scheduler before: any reading from now on ends it.
        self._runs[name] = _Metered(rec.attempt, tuple(rec.gpus), start, whole=False)

    def sample(self) -> None:
        """A poll's reading: each running attempt's power sampled, sharing noted; the starts
        since the last poll saved."""
        if self._runs:
            snapshot = self._reader.snapshot
            by_index = snapshot.by_index()
            records = self._book.records
            on_gpu: dict[int, list[str]] = {}  # GPU -> our running jobs given it
            for n in self._book.active_names():
                if records[n].active:
                    for g in records[n].gpus:
                        on_gpu.setdefault(g, []).append(n)
            for name, run in self._runs.items():
                self._take(name, run, snapshot, by_index, on_gpu)
        if self._dirty:
            self._dirty = False
            self._save()

    def end(self, name: str) -> AttemptEnergy | None:
        """The attempt ended: its energy from the last reading (None: a CPU job, or one this
        scheduler did not watch start or re-adopt)."""
        run = self._runs.pop(name, None)
        if run is None:
            return None
        snapshot = self._reader.snapshot
        self._take(name, run, snapshot, snapshot.by_index(), None)
        by_index = snapshot.by_index()
        self._dirty = True
        if snapshot.taken_at <= run.start_at:
            return AttemptEnergy(None)  # no reading between its start and end: not measured
        total: float | None = None
        sources: set[str] = set()
        for g in run.gpus:
            kwh = counter_kwh(run.start_mj.get(g), _counter(by_index.get(g)))
            if kwh is not None:
                sources.add("counter")
            elif run.whole and g in run.joules:
                kwh = run.joules[g] / J_PER_KWH
                sources.add("power")
            if kwh is not None:
                total = (total or 0.0) + kwh
        return AttemptEnergy(total, run.shared, "+".join(sorted(sources)))

    def _take(
        self,
        name: str,
        run: _Metered,
        snapshot: GpuSnapshot,
        by_index: dict[int, GpuInfo],
        on_gpu: dict[int, list[str]] | None,
    ) -> None:
        """One reading of the attempt's GPUs: power integrated since the last; with
        ``on_gpu`` (our running jobs on each GPU), whether another used it."""
        now = snapshot.taken_at
        for g in run.gpus:
            info = by_index.get(g)
            if info is None or info.lost:
                continue
            if info.power_w is not None:
                last = run.last.get(g)
                if last is None or now > last[0]:
                    run.joules[g] = run.joules.get(g, 0.0) + trapezoid_j(last, now, info.power_w)
                    run.last[g] = (now, info.power_w)
            if on_gpu is not None and not run.shared:
                run.shared = shared_use(info, name, on_gpu.get(g, ()))

    def _save(self) -> None:
        doc = {
            name: {"attempt": run.attempt, "start_mj": {str(g): v for g, v in run.start_mj.items()}}
            for name, run in self._runs.items()
        }
        with contextlib.suppress(Exception):  # secondary: a lost start only loses a figure
            self._book.store.set_meta(META_KEY, json.dumps(doc))


def _counter(info: GpuInfo | None) -> int | None:
    return None if info is None or info.lost else info.energy_mj


def _load(book: JobBook) -> dict[str, dict[str, object]]:
    try:
        doc = json.loads(book.store.get_meta(META_KEY) or "{}")
    except Exception:
        return {}
    return doc if isinstance(doc, dict) else {}
