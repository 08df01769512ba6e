"""Power and energy through the NVML backend, on the fake pynvml, and an attempt's energy from
them: the total-energy counter read at the attempt's start and end, and, where the GPU has no
counter (NOT_SUPPORTED), the power samples of the readings it ran through. A real job (a real
process) runs through the job runner with its energy meter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gtui.core.bus import EventBus, Topic
from gtui.core.exec.local import LocalExecutor
from gtui.core.gpus.energy import MJ_PER_KWH
from gtui.core.gpus.nvml import NvmlBackend
from gtui.core.gpus.reader import GpuReader
from gtui.core.gpus.snapshot import GpuSnapshot
from gtui.core.paths import ensure_state_dir, queue_paths
from gtui.core.queue.queuefile import load_queue
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.energymeter import EnergyMeter
from gtui.core.sched.planner import Planner
from gtui.core.sched.quarantine import Quarantine
from gtui.core.sched.runs import JobRunner, RunEnded
from gtui.core.state.book import JobBook
from gtui.core.state.history import attempts
from gtui.core.state.store import Store
from tests.conftest import write_queue
from tests.core.gpus.test_gpus_nvml import Clock, nv
from tests.waiting import until


@pytest.fixture(autouse=True)
def driver() -> Iterator[None]:
    nv.fake_reset([nv.FakeGpu(), nv.FakeGpu()])
    yield
    nv.fake_reset()


def test_power_limit_and_counter_are_read_in_watts_and_millijoules() -> None:
    gpu = nv.fake_state.gpus[0]
    gpu.power_mw, gpu.power_limit_mw, gpu.energy_mj = 212_345, 400_000, 9_000_000
    g0, g1 = NvmlBackend(nvml=nv, clock=Clock()).read().gpus
    assert (g0.power_w, g0.power_limit_w, g0.energy_mj) == (212.345, 400.0, 9_000_000)
    assert g0.to_json()["power_w"] == 212.345 and g0.to_json()["power_limit_w"] == 400.0
    # NOT_SUPPORTED: n/a, silently, and out of the document
    assert (g1.power_w, g1.power_limit_w, g1.energy_mj) == (None, None, None)
    assert g1.error is None and "power_w" not in g1.to_json()


def test_a_driver_without_the_calls_reads_na_and_other_errors_are_noted() -> None:
    nv.fake_state.missing = {"nvmlDeviceGetTotalEnergyConsumption"}  # FUNCTION_NOT_FOUND
    nv.fake_state.failing = {"nvmlDeviceGetPowerUsage": nv.NVML_ERROR_NO_PERMISSION}
    nv.fake_state.gpus[0].energy_mj = 5
    g0, _ = NvmlBackend(nvml=nv, clock=Clock()).read().gpus
    assert g0.energy_mj is None and g0.power_w is None
    assert g0.error is not None and "power:" in g0.error and "energy" not in g0.error


QUEUE = """
[[jobs]]
name = "train"
gpus = 1
cmd = "while [ ! -f go ]; do sleep 0.05; done"
"""


def parts(tmp_path: Path) -> tuple[JobBook, GpuReader, JobRunner, list[str]]:
    """A queue's book, a GPU reader over the fake pynvml, and the job runner with its meter."""
    path = write_queue(tmp_path, QUEUE)
    ensure_state_dir(queue_paths(path))
    bus = EventBus()
    store = Store(queue_paths(path).db)
    book = JobBook(store, bus, path.name)
    queue = load_queue(path)
    config = QueueConfig(bus)
    config.settings = queue.settings
    book.apply(queue, initial=True)
    reader = GpuReader(NvmlBackend(nvml=nv, clock=Clock()), bus)
    reader.read_now(())
    ended: list[str] = []

    async def after_end(name: str) -> None:
        ended.append(name)

    runner = JobRunner(
        book=book,
        bus=bus,
        run_ends=Topic[RunEnded](bus),
        executor=LocalExecutor(),
        reader=reader,
        paths=queue_paths(path),
        queue_path=path,
        config=config,
        quarantine=Quarantine(store),
        planner=Planner(book, bus),
        kick=lambda: None,
        after_end=after_end,
        stopping=lambda: False,
        energy=EnergyMeter(book, reader),
    )
    return book, reader, runner, ended


def poll(reader: GpuReader, runner: JobRunner) -> GpuSnapshot:
    """What the engine's poll does for the meter: a reading, then the meter's sample."""
    snapshot = reader.read_now(())
    runner._energy.sample()  # type: ignore[union-attr]
    return snapshot


async def test_the_counter_is_read_at_the_attempts_start_and_end(tmp_path: Path) -> None:
    gpu = nv.fake_state.gpus[0]
    gpu.energy_mj, gpu.power_mw = 1_000_000, 300_000
    _, reader, runner, ended = parts(tmp_path)
    poll(reader, runner)
    runner.start_job("train", (0,))
    gpu.energy_mj += 7_200_000  # 7.2 kJ: 2 Wh
    poll(reader, runner)
    gpu.energy_mj += 3_600_000  # and 1 Wh more by the reading its end is measured at
    poll(reader, runner)
    (tmp_path / "go").write_text("")
    await until(lambda: ended == ["train"], what="the end recorded")
    (a,) = attempts(queue_paths(tmp_path / "q.toml").db, "train")
    assert a.energy_kwh == pytest.approx(10_800_000 / MJ_PER_KWH)  # 0.003 kWh
    assert not a.energy_shared
    await runner.close()


async def test_without_a_counter_the_power_samples_are_integrated(tmp_path: Path) -> None:
    gpu = nv.fake_state.gpus[0]
    gpu.energy_mj, gpu.power_mw = None, 300_000  # the counter NOT_SUPPORTED
    _, reader, runner, ended = parts(tmp_path)
    first = poll(reader, runner)
    runner.start_job("train", (0,))  # its first sample: the reading before it
    second = poll(reader, runner)
    gpu.power_mw = 100_000
    last = poll(reader, runner)  # no reading after: its end is measured at this one
    (tmp_path / "go").write_text("")
    await until(lambda: ended == ["train"], what="the end recorded")
    (a,) = attempts(queue_paths(tmp_path / "q.toml").db, "train")
    # 300 W from the first reading to the second, then the trapezoid down to 100 W
    joules = 300 * (second.taken_at - first.taken_at) + 200 * (last.taken_at - second.taken_at)
    assert a.energy_kwh == pytest.approx(joules / 3.6e6)
    assert a.energy_kwh > 0
    await runner.close()
