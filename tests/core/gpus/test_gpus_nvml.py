"""The NVML backend driven by the fake pynvml module in tests/fake_pynvml."""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gtui.core.gpus.nvml import NvmlBackend
from tests.conftest import TESTS

FAKE_FILE = TESTS / "fake_pynvml" / "pynvml" / "__init__.py"
G = 1024


def _load_fake() -> ModuleType:
    """Load the fake under its own name, so the real pynvml stays importable beside it."""
    name = "gtui_tests_fake_pynvml"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FAKE_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


nv: Any = _load_fake()


class Clock:
    """A hand-moved clock for the retry intervals: no sleeping in tests."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(autouse=True)
def fresh_driver() -> Iterator[None]:
    nv.fake_reset([nv.FakeGpu(), nv.FakeGpu(name="NVIDIA GeForce RTX 4090", total_mib=24 * G)])
    yield
    nv.fake_reset()


def backend(clock: Clock, retry_s: float = 10.0) -> NvmlBackend:
    return NvmlBackend(nvml=nv, retry_s=retry_s, clock=clock)


def calls(name: str) -> int:
    return nv.fake_state.calls.count(name)


# ----- the fake mirrors the real module -------------------------------------------------------


def test_fake_module_mirrors_the_real_pynvml() -> None:
    real = pytest.importorskip("pynvml")
    assert real is not nv
    public = [n for n in dir(nv) if n.startswith(("nvml", "NVML", "c_nvml"))]
    assert len(public) > 40
    missing = [n for n in public if not hasattr(real, n)]
    assert missing == [], f"the fake has names the real pynvml lacks: {missing}"
    for n in public:
        if n.startswith("NVML_ERROR_") or n in ("nvmlMemory_v2", "NVML_TEMPERATURE_GPU"):
            assert getattr(nv, n) == getattr(real, n), n
        if n.startswith("NVML_ERROR_"):
            # NVML_ERROR_GPU_IS_LOST -> NVMLError_GpuIsLost, raised for that code in both.
            cls = "NVMLError_" + n[11:].title().replace("_", "")
            assert type(nv.NVMLError(getattr(nv, n))).__name__ == cls
            assert type(real.NVMLError(getattr(real, n))).__name__ == cls
    for struct in ("c_nvmlMemory_t", "c_nvmlMemory_v2_t", "c_nvmlUtilization_t"):
        fields = [f[0] for f in getattr(nv, struct)._fields_]
        assert fields == [f[0] for f in getattr(real, struct)._fields_], struct
    assert [f[0] for f in real.c_nvmlProcessInfo_v2_t._fields_][:2] == ["pid", "usedGpuMemory"]
    assert (
        real.NVML_VALUE_NOT_AVAILABLE_ulonglong.value == nv.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
    )
    assert type(nv.NVMLError(nv.NVML_ERROR_GPU_IS_LOST)) is nv.NVMLError_GpuIsLost
    assert isinstance(nv.NVMLError_GpuIsLost(), nv.NVMLError)


# ----- reading --------------------------------------------------------------------------------


def test_reads_memory_v2_util_temperature_and_driver(clock: Clock) -> None:
    nv.fake_state.gpus[0].used_mib = 20 * G
    nv.fake_state.gpus[0].util = 71
    nv.fake_state.gpus[0].temperature = 54
    snap = backend(clock).read()
    assert snap.source == "nvml" and snap.error is None and snap.driver == "550.54.15"
    a, b = snap.gpus
    # v2: the driver's reserved 512 MiB is neither used nor usable.
    assert (a.index, a.name, a.mem_total_mib, a.mem_used_mib) == (
        0,
        "NVIDIA A800 80GB PCIe",
        80 * G - 512,
        20 * G,
    )
    assert (a.util, a.temperature, a.lost, a.error) == (71, 54, False, None)
    assert a.uuid.startswith("GPU-") and a.uuid != b.uuid
    assert (b.name, b.mem_total_mib, b.mem_used_mib) == ("NVIDIA GeForce RTX 4090", 24 * G - 512, 0)


def test_init_once_handles_and_names_kept(clock: Clock) -> None:
    b = backend(clock)
    for _ in range(5):
        assert len(b.read().gpus) == 2
    assert calls("nvmlInit") == 1
    assert calls("nvmlDeviceGetHandleByIndex") == 2
    assert calls("nvmlDeviceGetName") == calls("nvmlDeviceGetUUID") == 2
    assert calls("nvmlDeviceGetMemoryInfo") == 10
    b.close()
    assert nv.fake_state.refcount == 0


def test_memory_v1_when_the_driver_has_no_v2(clock: Clock) -> None:
    nv.fake_state.missing.add("nvmlDeviceGetMemoryInfo_v2")
    nv.fake_state.gpus[0].used_mib = 10 * G
    b = backend(clock)
    a = b.read().gpus[0]
    # v1: used counts the driver's reservation, total is the whole memory.
    assert (a.mem_total_mib, a.mem_used_mib, a.error) == (80 * G, 10 * G + 512, None)
    b.read()
    # v2 tried once (GPU 0), then v1 only: 1 + 2 GPUs x 2 reads.
    assert calls("nvmlDeviceGetMemoryInfo") == 1 + 4


def test_memory_v2_broken_but_v1_working(clock: Clock) -> None:
    nv.fake_state.failing["nvmlDeviceGetMemoryInfo_v2"] = nv.NVML_ERROR_UNKNOWN  # as under WSL
    b = backend(clock)
    a = b.read().gpus[0]
    assert not a.lost and (a.mem_total_mib, a.mem_used_mib) == (80 * G, 512)
    b.read()
    assert calls("nvmlDeviceGetMemoryInfo") == 1 + 4


def test_memory_v1_with_an_old_binding(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(nv, "nvmlMemory_v2")
    assert backend(clock).read().gpus[0].mem_total_mib == 80 * G
    monkeypatch.undo()
    original = nv.nvmlDeviceGetMemoryInfo
    monkeypatch.setattr(nv, "nvmlDeviceGetMemoryInfo", lambda handle: original(handle))
    assert backend(clock).read().gpus[0].mem_used_mib == 512  # no version= argument: v1


def test_not_supported_fields_are_none(clock: Clock) -> None:
    nv.fake_state.gpus[1].util = None
    nv.fake_state.gpus[1].temperature = None
    b = backend(clock)
    g = b.read().gpus[1]
    assert (g.util, g.temperature, g.lost, g.error) == (None, None, False, None)
    assert g.mem_total_mib == 24 * G - 512
    nv.fake_state.gpus[1].memory_error = nv.NVML_ERROR_NOT_SUPPORTED
    g = b.read().gpus[1]
    assert (g.mem_total_mib, g.mem_used_mib, g.lost) == (None, None, False)


def test_other_field_errors_are_noted_not_fatal(clock: Clock) -> None:
    nv.fake_state.gpus[0].process_error = nv.NVML_ERROR_NO_PERMISSION
    g = backend(clock).read().gpus[0]
    assert not g.lost and g.processes == ()
    assert g.error is not None and "Insufficient Permissions" in g.error


def test_temperature_falls_back_to_the_old_call(clock: Clock) -> None:
    nv.fake_state.missing.add("nvmlDeviceGetTemperatureV")
    b = backend(clock)
    assert [g.temperature for g in b.read().gpus] == [35, 35]
    b.read()
    assert calls("nvmlDeviceGetTemperatureV") == 1
    assert calls("nvmlDeviceGetTemperature") == 4


def test_temperature_v_broken_but_the_old_call_working(clock: Clock) -> None:
    nv.fake_state.failing["nvmlDeviceGetTemperatureV"] = nv.NVML_ERROR_UNKNOWN
    b = backend(clock)
    assert [(g.temperature, g.lost) for g in b.read().gpus] == [(35, False), (35, False)]
    assert calls("nvmlDeviceGetTemperatureV") == 1


# ----- processes ------------------------------------------------------------------------------


def test_compute_graphics_and_mps_processes_one_entry_per_pid(clock: Clock) -> None:
    gpu = nv.fake_state.gpus[0]
    gpu.compute = [(100, 1000), (200, 3000)]
    gpu.graphics = [(200, 2000), (300, 50)]
    gpu.mps = [(400, 700)]
    procs = backend(clock).read().gpus[0].processes
    assert sorted((p.pid, p.mem_mib) for p in procs) == [
        (100, 1000),
        (200, 3000),
        (300, 50),
        (400, 700),
    ]


@pytest.mark.parametrize(
    ("missing", "used"),
    [
        (set(), "_v3"),
        ({"_v3"}, "_v2"),
        ({"_v3", "_v2"}, ""),
    ],
)
def test_process_functions_fall_back_v3_v2_v1(clock: Clock, missing: set[str], used: str) -> None:
    base = "nvmlDeviceGetComputeRunningProcesses"
    nv.fake_state.missing.update(base + m for m in missing)
    nv.fake_state.gpus[0].compute = [(100, 1000)]
    b = backend(clock)
    for _ in range(3):
        g = b.read().gpus[0]
        assert [(p.pid, p.mem_mib) for p in g.processes] == [(100, 1000)]
        assert g.error is None
    assert calls(base + used) == 6  # the working version, every read, both GPUs
    for m in missing:
        assert calls(base + m) == 1  # a missing version is tried once, then remembered


def test_process_function_absent_from_an_old_binding(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(nv, "nvmlDeviceGetComputeRunningProcesses_v3")
    nv.fake_state.gpus[0].compute = [(100, 1000)]
    assert [p.pid for p in backend(clock).read().gpus[0].processes] == [100]
    assert calls("nvmlDeviceGetComputeRunningProcesses_v2") == 2


def test_no_process_function_at_all(clock: Clock) -> None:
    for kind in ("Compute", "Graphics", "MPSCompute"):
        for v in ("_v3", "_v2", ""):
            nv.fake_state.missing.add(f"nvmlDeviceGet{kind}RunningProcesses{v}")
    g = backend(clock).read().gpus[0]
    assert g.processes == () and not g.lost and g.mem_used_mib == 0
    assert g.error is not None and "process" in g.error


def test_process_memory_not_available_is_none(clock: Clock) -> None:
    nv.fake_state.missing.update(
        {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"}
    )
    nv.fake_state.gpus[0].compute = [(100, None), (101, nv.FAKE_RAW_NOT_AVAILABLE), (102, 0)]
    procs = backend(clock).read().gpus[0].processes
    assert [(p.pid, p.mem_mib) for p in procs] == [(100, None), (101, None), (102, 0)]


def _pid_not_running() -> int:
    pid = int(Path("/proc/sys/kernel/pid_max").read_text()) - 1
    while Path(f"/proc/{pid}").exists():
        pid -= 1
    return pid


def test_pids_that_vanish_between_reads(clock: Clock) -> None:
    gone = _pid_not_running()  # NVML may list a process that has just ended: keep what it says
    nv.fake_state.gpus[0].compute = [(gone, 500), (100, 1000)]
    b = backend(clock)
    assert [p.pid for p in b.read().gpus[0].processes] == [gone, 100]
    nv.fake_state.gpus[0].compute = [(100, 1000)]
    assert [p.pid for p in b.read().gpus[0].processes] == [100]
    nv.fake_state.gpus[0].compute = []
    assert b.read().gpus[0].processes == ()


def test_process_struct_layout_mismatch_falls_back(clock: Clock) -> None:
    base = "nvmlDeviceGetComputeRunningProcesses"
    nv.fake_state.garbled.add(base + "_v3")
    nv.fake_state.gpus[0].compute = [(100, 1000), (200, 2000), (300, 3000)]
    b = backend(clock)
    for _ in range(2):
        g = b.read().gpus[0]
        assert [(p.pid, p.mem_mib) for p in g.processes] == [(100, 1000), (200, 2000), (300, 3000)]
        assert g.error is None
    assert calls(base + "_v3") == 1  # its nonsense seen once, it is not asked again
    nv.fake_state.garbled.update({base + "_v2", base})  # nothing readable: keep what is sane
    g = backend(clock).read().gpus[0]
    assert [p.pid for p in g.processes] == [100]
    assert g.error is not None and "unreadable" in g.error


# ----- a lost GPU -----------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["GPU_IS_LOST", "UNKNOWN"])
def test_lost_gpu_is_reported_then_reacquired_when_back(clock: Clock, code: str) -> None:
    b = backend(clock)
    before = b.read().gpus[1]
    nv.fake_set_lost(1, code=getattr(nv, f"NVML_ERROR_{code}"))
    snap = b.read()
    good, lost = snap.gpus
    assert not good.lost and good.mem_total_mib is not None
    assert lost.lost and lost.error is not None and "GPU 1" in lost.error
    assert (lost.name, lost.uuid, lost.mem_total_mib) == (
        before.name,
        before.uuid,
        before.mem_total_mib,
    )
    assert (lost.mem_used_mib, lost.util, lost.temperature) == (None, None, None)
    assert snap.error is None  # the others go on

    handles = calls("nvmlDeviceGetHandleByIndex")
    clock.now += 5
    assert b.read().gpus[1].lost
    assert calls("nvmlDeviceGetHandleByIndex") == handles  # not retried before retry_s
    clock.now += 6
    assert b.read().gpus[1].lost
    assert calls("nvmlDeviceGetHandleByIndex") == handles + 1  # retried, still lost

    nv.fake_set_lost(1, lost=False)  # back, with a new handle (the old one stays dead)
    clock.now += 11
    back = b.read().gpus[1]
    assert not back.lost and back.error is None and back.mem_used_mib == 0
    assert calls("nvmlDeviceGetHandleByIndex") == handles + 2
    assert calls("nvmlInit") == 1


def test_gpu_lost_from_the_start_has_a_placeholder_name(clock: Clock) -> None:
    nv.fake_set_lost(0)
    g = backend(clock).read().gpus[0]
    assert (g.index, g.name, g.lost) == (0, "GPU 0", True)


def test_stale_handle_means_lost_then_a_fresh_handle(clock: Clock) -> None:
    b = backend(clock)
    b.read()
    nv.fake_set_lost(0)
    nv.fake_set_lost(0, lost=False)  # the GPU was reset: the kept handle is dead
    assert b.read().gpus[0].lost
    clock.now += 10
    assert not b.read().gpus[0].lost


def test_gpu_gone_from_the_bus_and_back(clock: Clock) -> None:
    b = backend(clock)
    b.read()
    nv.fake_state.gpus.pop()  # GPU 1's handle and index are now invalid
    g = b.read().gpus[1]
    assert g.lost and g.error is not None and "Invalid Argument" in g.error
    clock.now += 10
    assert b.read().gpus[1].lost  # taking a new handle fails too
    assert calls("nvmlDeviceGetHandleByIndex") == 3
    nv.fake_state.gpus.append(nv.FakeGpu(name="NVIDIA H100 80GB HBM3", uuid="GPU-new"))
    clock.now += 10
    g = b.read().gpus[1]
    assert not g.lost and (g.name, g.uuid) == ("NVIDIA H100 80GB HBM3", "GPU-new")


def test_unexpected_exception_from_the_binding_is_contained(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("binding bug")

    b = backend(clock)
    monkeypatch.setattr(nv, "nvmlDeviceGetUtilizationRates", boom)
    g = b.read().gpus[0]
    assert g.util is None and not g.lost and g.error is not None and "binding bug" in g.error
    monkeypatch.setattr(nv, "nvmlDeviceGetHandleByIndex", boom)
    clock.now += 1
    b._handles.clear()
    snap = b.read()
    assert all(g.lost for g in snap.gpus)
    monkeypatch.setattr(b, "_count", "not a number")  # a bug above the binding
    snap = b.read()
    assert snap.error is not None and "cannot read the GPUs" in snap.error


# ----- NVML as a whole missing or broken ------------------------------------------------------


def test_library_not_found_then_retried_not_too_often(clock: Clock) -> None:
    nv.fake_state.init_error = nv.NVML_ERROR_LIBRARY_NOT_FOUND
    b = backend(clock)
    snap = b.read()
    assert snap.gpus == () and snap.source == "none" and not b.available
    assert snap.error is not None
    assert "no NVIDIA GPU found" in snap.error and "library not found" in snap.error
    assert "gpus = 0" in snap.error and "--fake-gpus" in snap.error
    assert calls("nvmlInit") == 1
    clock.now += 5
    b.read()
    assert calls("nvmlInit") == 1  # not more often than retry_s
    nv.fake_state.init_error = None  # the driver is installed meanwhile
    clock.now += 5
    snap = b.read()
    assert calls("nvmlInit") == 2
    assert len(snap.gpus) == 2 and snap.error is None and snap.source == "nvml" and b.available


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("DRIVER_NOT_LOADED", "driver is not loaded"),
        ("LIB_RM_VERSION_MISMATCH", "version mismatch"),
        ("NO_PERMISSION", "Insufficient Permissions"),
        ("UNKNOWN", "Unknown Error"),
    ],
)
def test_init_failures_say_why(clock: Clock, code: str, words: str) -> None:
    nv.fake_state.init_error = getattr(nv, f"NVML_ERROR_{code}")
    snap = backend(clock).read()
    assert snap.gpus == () and snap.error is not None
    assert words in snap.error and "CPU jobs" in snap.error
    assert "\n" not in snap.error


def test_no_gpu_at_all(clock: Clock) -> None:
    nv.fake_reset([])
    b = backend(clock)
    snap = b.read()
    assert snap.gpus == () and snap.error is not None and "0 GPUs" in snap.error
    assert nv.fake_state.refcount == 0  # NVML released while there is nothing to read


def test_version_mismatch_mid_run_shows_gpus_lost_and_recovers(clock: Clock) -> None:
    b = backend(clock)
    assert len(b.read().gpus) == 2
    nv.fake_state.broken = nv.NVML_ERROR_LIB_RM_VERSION_MISMATCH  # the driver was upgraded
    nv.fake_state.init_error = nv.NVML_ERROR_LIB_RM_VERSION_MISMATCH
    snap = b.read()
    assert snap.error is not None and "driver" in snap.error and not b.available
    assert [(g.index, g.lost) for g in snap.gpus] == [(0, True), (1, True)]
    assert snap.gpus[0].name == "NVIDIA A800 80GB PCIe"
    clock.now += 10
    snap = b.read()
    assert snap.error is not None and "version mismatch" in snap.error
    nv.fake_state.broken = nv.fake_state.init_error = None  # rebooted into the new driver
    clock.now += 10
    snap = b.read()
    assert snap.error is None and not any(g.lost for g in snap.gpus)
    assert calls("nvmlInit") == 3


def test_pynvml_not_importable(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    b = NvmlBackend(retry_s=10, clock=clock)
    snap = b.read()
    assert snap.gpus == () and snap.error is not None and "library not found" in snap.error
    monkeypatch.setitem(sys.modules, "pynvml", nv)  # installed meanwhile
    clock.now += 10
    assert len(b.read().gpus) == 2


def test_real_pynvml_never_raises() -> None:
    """On this machine, whatever it has: GPUs, or no GPU and a sentence why."""
    pytest.importorskip("pynvml")
    b = NvmlBackend()
    try:
        snap = b.read()
    finally:
        b.close()
    if snap.gpus:
        assert all(g.mem_total_mib for g in snap.gpus if not g.lost)
    else:
        assert snap.error and "CPU jobs" in snap.error


def test_not_available_constant_matches_ctypes() -> None:
    assert nv.NVML_VALUE_NOT_AVAILABLE_ulonglong.value == ctypes.c_ulonglong(-1).value == 2**64 - 1
