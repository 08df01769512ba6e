"""The health watch: at every poll, each GPU's health reading (gpus/health.py) is judged; a
fault takes the GPU out of placement (the quarantine), stops the jobs on it and queues them
again without a retry spent (``JobRunner.requeue``), and says so plainly on the bus (banner,
events, `gtui status`) and through ``[notify]``. With ``health_recheck`` set, a quarantined GPU
whose health reads clean that long after it was taken out is given back.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from gtui.core.bus import EventBus
from gtui.core.gpus.health import fault_words, judge
from gtui.core.gpus.reader import GpuReader
from gtui.core.gpus.snapshot import GpuInfo
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.notifying import Notifying
from gtui.core.sched.quarantine import Quarantine
from gtui.core.sched.runs import JobRunner
from gtui.core.state.book import JobBook

WATCH = "the health watch"  # who quarantined a GPU, where a job's name would stand


class HealthWatch:
    """Judges each poll's health readings and acts on a fault (see the module)."""

    def __init__(
        self,
        *,
        book: JobBook,
        bus: EventBus,
        reader: GpuReader,
        quarantine: Quarantine,
        runner: JobRunner,
        notifying: Notifying,
        config: QueueConfig,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._book = book
        self._bus = bus
        self._reader = reader
        self._quarantine = quarantine
        self._runner = runner
        self._notifying = notifying
        self._config = config
        self._clock = clock
        self.notes: dict[int, tuple[str, ...]] = {}  # GPU -> this poll's notes (throttling...)

    def check(self) -> None:
        """Judge the last reading: quarantine what failed, then give back what recovered."""
        gpus = self._reader.snapshot.gpus
        self.notes = {}
        for info in gpus:
            verdict = judge(info.health)
            if verdict.notes:
                self.notes[info.index] = verdict.notes
            if verdict.fault is not None and info.index not in self._quarantine.gpus:
                self._fault(info, verdict.fault)
        self._recheck(gpus)

    def _fault(self, info: GpuInfo, fault: str) -> None:
        """Take the GPU out, queue its jobs again, and say so."""
        book = self._book
        jobs = [
            n
            for n in book.active_names()
            if book.records[n].active and info.index in book.records[n].gpus
        ]
        words = fault_words(info.label, fault, bool(jobs))
        self._quarantine.add([info.index], words, WATCH)
        for name in jobs:
            self._runner.spawn(self._runner.requeue(name, words))
        queue = self._notifying.queue_path.name
        self._bus.notice(
            "error",
            f"{words} (`gtui quarantine {queue} --clear {info.label}` gives it back)",
        )
        self._notifying.gpu_fault(words, info.label, jobs)

    def _recheck(self, gpus: tuple[GpuInfo, ...]) -> None:
        """``health_recheck``: a GPU out that long whose health now reads clean comes back."""
        after = self._config.settings.health_recheck_s
        if after is None or not self._quarantine.gpus:
            return
        by_index = {g.index: g for g in gpus}
        now = self._clock()
        back = []
        for index, entry in list(self._quarantine.gpus.items()):
            since = entry.get("since")
            info = by_index.get(index)
            if not isinstance(since, (int, float)) or now - since < after or info is None:
                continue
            if not info.lost and judge(info.health).fault is None:
                back.append(index)
        if back and self._quarantine.clear(back):
            listed = ",".join(map(str, back))
            self._bus.notice(
                "info", f"GPU {listed} read clean at its health check: back in placement"
            )
