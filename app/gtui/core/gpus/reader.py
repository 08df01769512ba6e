"""The scheduler's GPU reader: one backend, read so that a hanging driver never stops the queue.

It keeps the last reading, tells once (through the bus) when NVML fails, is slow, or loses a
GPU, and once when it is back; never every poll.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from gtui.core.bus import EventBus
from gtui.core.exec.base import start_thread
from gtui.core.gpus.holders import HolderReader
from gtui.core.gpus.snapshot import GpuBackend, GpuSnapshot, JobUsage

NVML_WAIT_S = 2.0  # a GPU read that takes longer: schedule on the last one meanwhile


class GpuReader:
    def __init__(self, backend: GpuBackend, bus: EventBus) -> None:
        self.backend = backend
        self._bus = bus
        self.snapshot = GpuSnapshot(gpus=(), taken_at=0.0, source="none")
        self._lost: dict[int, str] = {}  # GPU index -> why it is lost, as last told
        self._in_flight: asyncio.Future[GpuSnapshot] | None = None
        self._slow = False
        self._holders = HolderReader()  # names who holds each GPU
        self._ours: dict[int, str] = {}  # our jobs' root pids -> job names (last usage)

    @property
    def source(self) -> str:
        return self.backend.source

    def read_now(self, usage: Sequence[JobUsage]) -> GpuSnapshot:
        """A synchronous read (the fake backend, and the first read at start)."""
        self._note_ours(usage)
        self.take(self.backend.read(usage))
        return self.snapshot

    async def read(self, usage: Sequence[JobUsage]) -> bool:
        """A new reading; False when NVML has not answered yet (the last one stays)."""
        self._note_ours(usage)
        # In a thread: NVML, and any backend that says it may block (a Ray cluster's nodes).
        if self.backend.source == "nvml" or getattr(self.backend, "may_block", False):
            snapshot = await self._read_nvml(usage)
            if snapshot is None:
                return False
            self.take(snapshot)
        else:
            self.take(self.backend.read(usage))
        return True

    def _note_ours(self, usage: Sequence[JobUsage]) -> None:
        """Our jobs' root pids: named as ours without asking the process table (a burst of
        short jobs would otherwise ask it once for each)."""
        self._ours = {u.pid: u.name for u in usage if u.name}

    def take(self, snapshot: GpuSnapshot) -> None:
        """Keep a new GPU reading and tell what is new in it. Every reading comes through here
        (a poll's, a job end's): one kept silently would make the next, with the same error,
        look old, and the error would never be told."""
        previous_error = self.snapshot.error
        snapshot = self._holders.describe(snapshot, snapshot.taken_at or None, self._ours)
        self.snapshot = snapshot
        if snapshot.error and snapshot.error != previous_error:
            self._bus.notice("warning", snapshot.error)
        # Tell once when a GPU is lost (or why changes) and once when it is back, not every poll;
        # NVML down as a whole was told just above.
        lost = {g.index: g.error or "" for g in snapshot.gpus if g.lost}
        for index, why in lost.items():
            if self._lost.get(index) != why and why != snapshot.error:
                self._bus.notice("error", f"GPU {index} is lost: {why}")
        for index in sorted(self._lost.keys() - lost.keys()):
            self._bus.notice("info", f"GPU {index} answers again")
        self._lost = lost

    async def _read_nvml(self, usage: Sequence[JobUsage]) -> GpuSnapshot | None:
        """Read NVML in a thread, waiting at most NVML_WAIT_S (nothing, once it is known to be
        slow): a driver call can hang for tens of seconds (a GPU falling off the bus), and jobs
        must keep starting meanwhile. The last reading stays safe to schedule on: jobs started
        since count by their declared memory, and a job that ended still counts as using its.
        None: no new reading yet. A daemon thread, so a wedged driver cannot hold up exit."""
        if self._in_flight is None:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[GpuSnapshot] = loop.create_future()
            backend = self.backend

            def work() -> None:
                snapshot = backend.read(usage)

                def deliver() -> None:
                    if not future.done():
                        future.set_result(snapshot)

                with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
                    loop.call_soon_threadsafe(deliver)

            if not start_thread(work, "gtui-nvml"):
                return None  # no thread now (the process limit): the last reading stands
            self._in_flight = future
        read = self._in_flight
        await asyncio.wait({read}, timeout=0 if self._slow else NVML_WAIT_S)
        if not read.done():
            if not self._slow:
                self._slow = True
                self._bus.notice(
                    "warning",
                    f"NVML has not answered for {NVML_WAIT_S:g}s (a GPU or the driver may be "
                    "failing); jobs keep starting on the last GPU reading until it does",
                )
            return None
        self._in_flight = None
        if self._slow:
            self._slow = False
            self._bus.notice("info", "NVML answers again")
        return read.result()

    def close(self) -> None:
        """Close the backend, but not while a read hangs in NVML: that thread holds it."""
        if self._in_flight is None or self._in_flight.done():
            with contextlib.suppress(Exception):
                self.backend.close()
