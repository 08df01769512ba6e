"""The health watch's fields read through the NVML backend, on the fake pynvml: each NVML error
a health call can raise, Xid events from the event set, and the one rule (gpus/health.py) that
says which readings are faults. NOT_SUPPORTED is n/a and never a fault; a lost GPU is one once
it has stayed lost."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gtui.core.gpus.health import GpuHealth, judge
from gtui.core.gpus.nvml import LOST_FAULT_S, NvmlBackend
from gtui.core.gpus.snapshot import GpuInfo
from tests.core.gpus.test_gpus_nvml import Clock, nv

HEALTH_CALLS = (
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlEventSetWait_v2",
)


@pytest.fixture(autouse=True)
def driver() -> Iterator[None]:
    nv.fake_reset([nv.FakeGpu(), nv.FakeGpu()])
    yield
    nv.fake_reset()


def read(b: NvmlBackend) -> tuple[GpuInfo, GpuInfo]:
    gpus = b.read().gpus
    return gpus[0], gpus[1]


def test_a_healthy_gpu_reads_clean_and_is_no_fault() -> None:
    g0, _ = read(NvmlBackend(nvml=nv, clock=Clock()))
    assert g0.health == GpuHealth(
        ecc_uncorrected=0, retired_pending=False, remap_pending=False, throttle=()
    )
    assert judge(g0.health).fault is None and g0.error is None
    assert "health" not in g0.to_json()  # a clean reading leaves the document as it was
    nv.fake_state.gpus[0].ecc_uncorrected = 1
    g0, _ = read(NvmlBackend(nvml=nv, clock=Clock()))
    assert g0.to_json()["health"] == g0.health.to_json()  # type: ignore[union-attr]


def test_an_xid_comes_through_the_event_set_once() -> None:
    b = NvmlBackend(nvml=nv, clock=Clock())
    read(b)  # handles taken, event sets registered
    nv.fake_state.gpus[0].xids.append(79)
    g0, g1 = read(b)
    assert g0.health is not None and g0.health.xids == (79,)
    assert judge(g0.health).fault == "Xid 79 (fell off the bus)"
    assert g1.health is not None and g1.health.xids == ()
    assert read(b)[0].health.xids == ()  # type: ignore[union-attr]  # taken: not seen twice
    assert "nvmlEventSetWait_v2" in nv.fake_state.calls


def test_an_application_xid_is_a_note_not_a_fault() -> None:
    b = NvmlBackend(nvml=nv, clock=Clock())
    read(b)
    nv.fake_state.gpus[0].xids.extend([13, 43])
    verdict = judge(read(b)[0].health)
    assert verdict.fault is None
    assert any("Xid 13" in n for n in verdict.notes) and any("Xid 43" in n for n in verdict.notes)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("ecc_uncorrected", 2, "2 uncorrectable ECC errors"),
        ("retired_pending", True, "pages waiting to be retired"),
        ("remap_pending", True, "rows waiting to be remapped"),
    ],
)
def test_each_memory_fault_is_a_fault(field: str, value: Any, words: str) -> None:
    setattr(nv.fake_state.gpus[1], field, value)
    g0, g1 = read(NvmlBackend(nvml=nv, clock=Clock()))
    assert words in (judge(g1.health).fault or "")
    assert judge(g0.health).fault is None


def test_throttling_is_a_note_only() -> None:
    nv.fake_state.gpus[0].clock_reasons = 0x40 | 0x1  # hardware thermal slowdown, and idle
    g0, _ = read(NvmlBackend(nvml=nv, clock=Clock()))
    assert g0.health is not None and g0.health.throttle == ("thermal (hardware)",)
    verdict = judge(g0.health)
    assert verdict.fault is None and verdict.notes == ("clocks held down: thermal (hardware)",)


def test_not_supported_everywhere_is_n_a_and_never_a_fault() -> None:
    gpu = nv.fake_state.gpus[0]
    gpu.ecc_uncorrected = gpu.retired_pending = gpu.remap_pending = gpu.clock_reasons = None
    gpu.events = False
    g0, _ = read(NvmlBackend(nvml=nv, clock=Clock()))
    assert g0.health == GpuHealth()  # every field n/a
    assert judge(g0.health).fault is None and g0.error is None and not g0.lost


@pytest.mark.parametrize("call", HEALTH_CALLS)
@pytest.mark.parametrize(
    "code", ["NOT_SUPPORTED", "FUNCTION_NOT_FOUND", "NO_PERMISSION", "GPU_IS_LOST"]
)
def test_each_nvml_error_of_each_health_call(call: str, code: str) -> None:
    """NOT_SUPPORTED and a call the driver lacks are n/a; another error is a note on the GPU;
    GPU_IS_LOST makes the GPU lost, a fault only once it stays lost (a hiccup is not one)."""
    clock = Clock()
    b = NvmlBackend(nvml=nv, clock=clock, retry_s=1.0)
    read(b)
    nv.fake_state.gpus[0].xids.append(13)  # the event wait has one to read (a note)
    nv.fake_state.failing[call] = getattr(nv, f"NVML_ERROR_{code}")
    g0, g1 = read(b)
    assert judge(g1.health).fault is None, "the other GPU is untouched"
    if code == "GPU_IS_LOST":
        assert g0.lost and judge(g0.health).fault is None, "lost for a moment: no fault yet"
        clock.now += LOST_FAULT_S
        g0, _ = read(b)
        assert g0.lost and judge(g0.health).fault == "fell off the bus (GPU is lost)"
        return
    assert not g0.lost and judge(g0.health).fault is None
    if code == "NO_PERMISSION":
        assert g0.error and "Insufficient Permissions" in g0.error
    else:
        assert g0.error is None


def test_a_gpu_lost_then_back_starts_its_lost_time_again() -> None:
    clock = Clock()
    b = NvmlBackend(nvml=nv, clock=clock, retry_s=1.0)
    read(b)
    nv.fake_set_lost(0)
    assert read(b)[0].lost
    clock.now += LOST_FAULT_S - 2
    nv.fake_set_lost(0, False)
    assert not read(b)[0].lost
    nv.fake_set_lost(0)
    clock.now += 2
    g0, _ = read(b)
    assert g0.lost and judge(g0.health).fault is None
    clock.now += LOST_FAULT_S
    assert judge(read(b)[0].health).fault is not None


def test_a_binding_without_the_health_calls_reads_n_a() -> None:
    """An old nvidia-ml-py lacks some calls altogether (AttributeError): n/a, no note."""

    class Old:
        def __getattr__(self, name: str) -> Any:
            if name in HEALTH_CALLS or name.startswith(("nvmlEvent", "nvmlDeviceGetCurrentClocks")):
                raise AttributeError(name)
            return getattr(nv, name)

    g0, _ = read(NvmlBackend(nvml=Old(), clock=Clock()))  # type: ignore[arg-type]
    assert g0.health is not None and g0.health.ecc_uncorrected is None
    assert g0.error is None and judge(g0.health).fault is None


def test_mig_instances_carry_their_gpus_health() -> None:
    """A GPU in MIG mode shows as its instances: a fault of the GPU is each one's."""
    nv.fake_state.gpus[0].mig = [nv.FakeMig(uuid="MIG-a"), nv.FakeMig(uuid="MIG-b")]
    nv.fake_state.gpus[0].ecc_uncorrected = 3
    gpus = NvmlBackend(nvml=nv, clock=Clock()).read().gpus
    instances = [g for g in gpus if g.mig_parent == 0]
    assert len(instances) == 2
    assert all("3 uncorrectable ECC" in (judge(g.health).fault or "") for g in instances)
    assert judge(gpus[-1].health).fault is None
