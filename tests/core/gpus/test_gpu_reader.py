"""The GPU reader alone: over the fake backend, with an event bus, no Engine.

A backend that may block is read in a thread, so a hanging driver never holds up the event
loop: the reader says so once, schedules on the last reading meanwhile, and says once when it
answers again. Problems in a reading are told once, never at every poll.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from gtui.core.api import Event, Notice
from gtui.core.bus import EventBus
from gtui.core.gpus import reader as reader_module
from gtui.core.gpus.fake import FakeBackend
from gtui.core.gpus.reader import GpuReader
from gtui.core.gpus.snapshot import GpuSnapshot, JobUsage

OURS = (JobUsage(pid=4242, gpus=(1,), mem_mib=10_000, name="train"),)


def bus_and_notices() -> tuple[EventBus, list[Notice]]:
    said: list[Notice] = []

    def sink(event: Event) -> None:
        assert isinstance(event, Notice)
        said.append(event)

    bus = EventBus()
    bus.subscribe(sink, (Notice,))
    return bus, said


class Hanging(FakeBackend):
    """A fake backend whose reads hang until released, as a driver with a GPU falling off the
    bus does; ``may_block`` asks the reader for a thread, as a Ray cluster's backend does."""

    may_block = True

    def __init__(self, spec: str) -> None:
        super().__init__(spec)
        self.release = threading.Event()
        self.hang = False
        self.closed = False

    def read(self, ours: Sequence[JobUsage] = ()) -> GpuSnapshot:
        if self.hang:
            self.release.wait(10)  # a bound: a reader that blocked would fail, not hang
        return super().read(ours)

    def close(self) -> None:
        self.closed = True


class Losing(FakeBackend):
    """A fake backend whose GPU 0 is lost while ``lost`` is set."""

    lost = False

    def read(self, ours: Sequence[JobUsage] = ()) -> GpuSnapshot:
        snap = super().read(ours)
        if not self.lost:
            return snap
        gpus = tuple(
            dataclasses.replace(g, lost=True, error="fell off the bus") if g.index == 0 else g
            for g in snap.gpus
        )
        return dataclasses.replace(snap, gpus=gpus)


async def test_fake_backend_is_read_and_our_job_shows_on_its_gpu() -> None:
    bus, said = bus_and_notices()
    gpus = GpuReader(FakeBackend("2x80G"), bus)
    assert gpus.source == "fake"
    snap = gpus.read_now(OURS)
    assert [g.index for g in snap.gpus] == [0, 1]
    assert snap.gpus[1].mem_used_mib == 10_000
    assert [p.pid for p in snap.gpus[1].processes] == [4242]
    assert await gpus.read(()) is True
    assert gpus.snapshot.gpus[1].mem_used_mib == 0
    assert said == []


async def test_a_hanging_backend_does_not_block_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(reader_module, "NVML_WAIT_S", 0.05)
    bus, said = bus_and_notices()
    backend = Hanging("2x80G")
    gpus = GpuReader(backend, bus)
    first = gpus.read_now(())
    backend.hang = True
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.005)

    tick = asyncio.create_task(ticker())
    try:
        started = time.monotonic()
        assert await asyncio.wait_for(gpus.read(OURS), 5) is False
        assert time.monotonic() - started < 2  # waited NVML_WAIT_S, not for the driver
        assert ticks > 1  # the loop ran on while the backend hung
        assert gpus.snapshot is first  # placement goes on with the last reading
        assert [n.level for n in said] == ["warning"]
        assert "has not answered" in said[0].text
        # Known to be slow: the next poll does not wait at all, and says nothing new. The wait
        # grows to a minute here, so one that waited would be caught by the 5 s bound whatever
        # the machine's load, where a bound on a few milliseconds would not hold under load.
        monkeypatch.setattr(reader_module, "NVML_WAIT_S", 60.0)
        assert await asyncio.wait_for(gpus.read(OURS), 5) is False
        assert len(said) == 1
        gpus.close()
        assert not backend.closed  # the hanging thread still holds the backend
        # The driver answers: its reading is taken, and that is said once.
        backend.release.set()
        deadline = time.monotonic() + 5
        while not await gpus.read(OURS):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        assert gpus.snapshot is not first
        assert gpus.snapshot.gpus[1].mem_used_mib == 10_000
        assert [n.level for n in said] == ["warning", "info"]
        gpus.close()
        assert backend.closed
    finally:
        backend.release.set()
        tick.cancel()


def test_a_lost_gpu_is_told_once_and_once_when_back() -> None:
    bus, said = bus_and_notices()
    backend = Losing("2x80G")
    gpus = GpuReader(backend, bus)
    gpus.read_now(())
    backend.lost = True
    gpus.read_now(())
    gpus.read_now(())
    assert [n.text for n in said] == ["GPU 0 is lost: fell off the bus"]
    backend.lost = False
    gpus.read_now(())
    gpus.read_now(())
    assert [n.text for n in said][1:] == ["GPU 0 answers again"]


def test_a_broken_fake_spec_is_told_once(tmp_path: Path) -> None:
    spec = tmp_path / "gpus.txt"
    spec.write_text("2x80G\n")
    bus, said = bus_and_notices()
    gpus = GpuReader(FakeBackend(f"@{spec}"), bus)
    gpus.read_now(())
    spec.write_text("2x\n")
    gpus.read_now(())
    gpus.read_now(())
    assert len(said) == 1 and said[0].level == "warning"
    assert "using the last good one" in said[0].text
    assert len(gpus.snapshot.gpus) == 2  # the last good spec
