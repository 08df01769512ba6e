"""What our jobs hold on the GPUs: the usage the GPU reader is told, the memory each job is
seen to use (matched to its processes by the executor, DESIGN.md 8), the isolation check of
4.4, and the GpusRead event that the GPU panel shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING

from gtui.core.api import GpusRead
from gtui.core.bus import EventBus
from gtui.core.exec.base import Executor, handle_of
from gtui.core.gpus.reader import GpuReader
from gtui.core.gpus.snapshot import GpuSnapshot, JobUsage
from gtui.core.model import JobState
from gtui.core.sched.planner import Planner
from gtui.core.state.book import JobBook

FAST_POLL_FOR_S = 1.0  # after a job ends on real GPUs, poll fast this long (driver release)


class Occupancy:
    """Mixed into the Engine: the attributes below are the engine's parts."""

    _bus: EventBus
    _book: JobBook
    _executor: Executor
    _planner: Planner | None
    _observed: dict[str, dict[int, int]]
    _gpus: GpusRead | None
    _last_gpu_meta: str
    _reader: GpuReader | None
    _fast_until: float
    _fresh_pass: bool
    _wake: asyncio.Event | None

    if TYPE_CHECKING:

        @property
        def _snapshot(self) -> GpuSnapshot: ...

        def _changed(self, name: str) -> None: ...

        def _schedule(self) -> None: ...

    def _usage(self) -> list[JobUsage]:
        out = []
        for name in self._book.active_names():
            rec = self._book.records[name]
            if rec.active and rec.pid and rec.gpus:
                out.append(
                    JobUsage(
                        pid=rec.pid,
                        gpus=rec.gpus,
                        mem_mib=rec.mem_mib,
                        suspended=rec.state == JobState.SUSPENDED,
                    )
                )
        return out

    def _match_processes(self) -> None:
        """Match GPU processes to our jobs through the executor (DESIGN.md 8): memory observed
        per job and GPU, peaks, and the isolation check of 4.4."""
        self._observed = {}
        on_gpu: dict[int, list[tuple[int, int | None]]] = {}
        for gpu in self._snapshot.gpus:
            for p in gpu.processes:
                on_gpu.setdefault(p.pid, []).append((gpu.index, p.mem_mib))
        if not on_gpu:
            return
        records = self._book.records
        active = {n: records[n] for n in self._book.active_names() if records[n].active}
        handles = {n: handle_of(r) for n, r in active.items() if r.pid}
        for name, procs in self._executor.gpu_processes(handles, on_gpu).items():
            rec = active[name]
            observed: dict[int, int] = {}
            for pid, index, mem in procs:
                observed[index] = observed.get(index, 0) + mem
                if index not in rec.gpus:
                    warning = (
                        f"process {pid} runs on GPU {index}, which is not assigned to it "
                        f"(assigned: {','.join(map(str, rec.gpus)) or 'none'})"
                    )
                    if warning not in rec.warnings:
                        rec.warnings.append(warning)
                        self._book.commit(rec)
                        self._changed(name)
            self._observed[name] = observed
            peak = max(observed.values(), default=0)
            if peak and (rec.peak_mib or 0) < peak:
                rec.peak_mib = peak

    def _publish_gpus(self) -> None:
        ours: dict[int, list[str]] = {}
        ours_mib: dict[int, int] = {}
        for name in self._book.active_names():
            rec = self._book.records[name]
            if not rec.active:
                continue
            for index in rec.gpus:
                ours.setdefault(index, []).append(name)
                seen = self._observed.get(name, {}).get(index, 0)
                declared = rec.mem_mib if rec.mem_mib is not None else seen
                ours_mib[index] = ours_mib.get(index, 0) + max(seen, declared or 0)
        decision = self._planner.last if self._planner is not None else None
        if decision is None:
            return
        self._gpus = GpusRead(
            snapshot=self._snapshot,
            ours={k: tuple(v) for k, v in ours.items()},
            ours_mib=ours_mib,
            available_mib=dict(decision.available_mib),
            reserved=tuple(decision.reserved),
        )
        self._bus.publish(self._gpus)
        text = json.dumps([g.to_json() for g in self._snapshot.gpus])
        if text != self._last_gpu_meta:
            self._last_gpu_meta = text
            with contextlib.suppress(Exception):
                self._book.store.set_meta("gpus", text)

    async def _after_end(self, name: str) -> None:
        """A job ended: read the GPUs at once so the freed one is seen, and run a pass."""
        reader = self._reader
        assert reader is not None
        if reader.source != "nvml":
            # Cheap fake GPUs: read them again now. The memory seen per job must come from the
            # same read: jobs started since the last match would otherwise count twice (in
            # ``used`` and again as declared - 0 observed), and a packed GPU would take fewer
            # jobs (benchmarks/extreme.py: 5 rounds, not 4).
            reader.read_now(self._usage())
            self._match_processes()
        else:
            # Real GPUs: the driver may take a moment to release memory: poll fast a second.
            if await reader.read(self._usage()):
                self._match_processes()
            self._fast_until = time.monotonic() + FAST_POLL_FOR_S
        self._schedule()
        self._fresh_pass = True
        if self._wake is not None:
            self._wake.set()
