"""A stand-in for nvidia-ml-py's ``pynvml``, to drive gtui's NVML backend in tests.

Its public NVML names (functions, error classes, constants, struct classes and their fields)
mirror the real module; tests/test_gpus_nvml.py checks each exists in the installed pynvml. The
extra names start with ``fake`` / ``Fake``: ``fake_state`` is what the "driver" reports, and tests
change it between reads (GPUs, NOT_SUPPORTED fields, missing driver functions, vanishing PIDs, a
GPU lost and back, a missing library, a version mismatch). ``fake_state.calls`` records every call.

Two ways in: load this file as a module and pass it to ``NvmlBackend(nvml=...)``, or put
``tests/fake_pynvml`` first on ``PYTHONPATH`` so ``import pynvml`` finds it; then the state is
read from the JSON file named by ``FAKE_PYNVML_CONFIG`` (see ``fake_load_config``).
"""

from __future__ import annotations

import json
import os
import string
import sys
from ctypes import Structure, c_uint, c_ulonglong
from dataclasses import dataclass, field
from typing import Any

# ----- constants (the real values) -----------------------------------------------------------

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_UNKNOWN = 999

NVML_TEMPERATURE_GPU = 0
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_VALUE_NOT_AVAILABLE_ulonglong = c_ulonglong(-1)
NVML_VALUE_NOT_AVAILABLE_uint = c_uint(-1)
nvmlMemory_v2 = 0x02000028
nvmlEventTypeXidCriticalError = 0x0000000000000008
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
nvmlTemperature_v1 = 0x100000C

_MIB = 1024 * 1024


# ----- errors, built the way the real module builds them ------------------------------------


class NVMLLibraryMismatchError(Exception):
    """Raised by the unversioned wrappers when the library lacks the function."""


class NVMLError(Exception):
    _valClassMapping: dict[int, type] = {}
    _errcode_to_string = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
        NVML_ERROR_INSUFFICIENT_POWER: "Insufficient External Power",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_TIMEOUT: "Timeout",
        NVML_ERROR_IRQ_ISSUE: "Interrupt Request Issue",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        NVML_ERROR_CORRUPTED_INFOROM: "Corrupted infoROM",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
        NVML_ERROR_OPERATING_SYSTEM: "The operating system has blocked the request.",
        NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
        NVML_ERROR_MEMORY: "Insufficient Memory",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }

    value: int

    def __new__(cls, value: int) -> NVMLError:
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return self._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other: object) -> bool:
        return self.value == getattr(other, "value", None)

    __hash__ = Exception.__hash__


def nvmlExceptionClass(nvmlErrorCode: int) -> type:
    if nvmlErrorCode not in NVMLError._valClassMapping:
        raise ValueError(f"nvmlErrorCode {nvmlErrorCode} is not valid")
    return NVMLError._valClassMapping[nvmlErrorCode]


def _extractNVMLErrorsAsClasses() -> None:
    """NVML_ERROR_GPU_IS_LOST -> class NVMLError_GpuIsLost, as the real module does."""
    this_module = sys.modules[__name__]
    for err_name in [x for x in dir(this_module) if x.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(
            err_name.replace("NVML_ERROR_", ""), "_"
        ).replace("_", "")
        err_val = getattr(this_module, err_name)

        def gen_new(val: int) -> Any:
            def new(typ: type, *args: Any) -> NVMLError:
                return NVMLError.__new__(typ, val)  # type: ignore[arg-type]

            return new

        cls = type(class_name, (NVMLError,), {"__new__": gen_new(err_val)})
        cls.__module__ = __name__
        setattr(this_module, class_name, cls)
        NVMLError._valClassMapping[err_val] = cls


_extractNVMLErrorsAsClasses()


# ----- structs (same fields as the real ones) -------------------------------------------------


class c_nvmlMemory_t(Structure):
    _fields_ = [("total", c_ulonglong), ("free", c_ulonglong), ("used", c_ulonglong)]


class c_nvmlMemory_v2_t(Structure):
    _fields_ = [
        ("version", c_uint),
        ("total", c_ulonglong),
        ("reserved", c_ulonglong),
        ("free", c_ulonglong),
        ("used", c_ulonglong),
    ]


class c_nvmlUtilization_t(Structure):
    _fields_ = [("gpu", c_uint), ("memory", c_uint)]


class nvmlFriendlyObject:
    """What the process functions return: plain attributes (``pid``, ``usedGpuMemory``...)."""

    def __init__(self, dictionary: dict[str, Any]) -> None:
        for key, value in dictionary.items():
            setattr(self, key, value)

    def __str__(self) -> str:
        return str(self.__dict__)


# ----- the fake driver's state ----------------------------------------------------------------

FAKE_RAW_NOT_AVAILABLE = "raw-not-available"  # a process memory the binding did not convert


@dataclass
class FakeMig:
    """One MIG instance of a fake GPU: its own memory and processes (``(pid, MiB)``)."""

    name: str = "NVIDIA A100-SXM4-80GB MIG 3g.40gb"
    uuid: str = ""
    total_mib: int = 40192
    used_mib: int = 0
    compute: list[tuple[int, Any]] = field(default_factory=list)


@dataclass
class FakeGpu:
    """One GPU as the fake driver reports it. ``None`` for util/temperature = NOT_SUPPORTED.

    Process entries are ``(pid, MiB)``; MiB None = the binding's None (not available),
    FAKE_RAW_NOT_AVAILABLE = NVML's raw 2**64-1.
    """

    name: str = "NVIDIA A800 80GB PCIe"
    uuid: str = ""
    total_mib: int = 81920
    used_mib: int = 0  # allocated by processes
    reserved_mib: int = 512  # kept by the driver (v1 counts it as used, v2 apart)
    util: int | None = 0
    temperature: int | None = 35
    compute: list[tuple[int, Any]] = field(default_factory=list)
    graphics: list[tuple[int, Any]] = field(default_factory=list)
    mps: list[tuple[int, Any]] = field(default_factory=list)
    lost: bool = False  # every call on it (and getting its handle) fails with lost_code
    lost_code: int = NVML_ERROR_GPU_IS_LOST
    memory_error: int | None = None  # e.g. NVML_ERROR_NOT_SUPPORTED for memory info
    process_error: int | None = None  # e.g. NVML_ERROR_NO_PERMISSION for process lists
    generation: int = 0  # bumped when a lost GPU comes back: old handles stay dead
    # MIG: None = the GPU cannot do MIG (GetMigMode is NOT_SUPPORTED); a list = MIG mode on,
    # with these instances in its first slots (of MAX_MIG slots).
    mig: list[FakeMig] | None = None
    # Health. None = NOT_SUPPORTED on this GPU. ``xids`` are Xid events not yet taken from
    # its event set (each wait takes one); ``events`` False: the GPU offers no Xid events.
    xids: list[int] = field(default_factory=list)
    events: bool = True
    ecc_uncorrected: int | None = 0
    retired_pending: bool | None = False
    remap_pending: bool | None = False
    clock_reasons: int | None = 0  # the clock event ("throttle") reasons bit mask
    # Power and energy. None = NOT_SUPPORTED (the default: the documents of the tests that
    # predate them stay as they were). ``energy_mj`` is the total-energy counter.
    power_mw: int | None = None
    power_limit_mw: int | None = None
    energy_mj: int | None = None


@dataclass
class FakeState:
    gpus: list[FakeGpu] = field(default_factory=list)
    init_error: int | None = None  # nvmlInit raises this (LIBRARY_NOT_FOUND, mismatch...)
    broken: int | None = None  # after init, every call raises this (driver gone mid-run)
    driver: str = "550.54.15"
    missing: set[str] = field(default_factory=set)  # C symbols this "driver" lacks
    failing: dict[str, int] = field(default_factory=dict)  # C symbol -> error code it returns
    # Process functions whose struct layout the "driver" does not share with the binding: past
    # the first entry, the binding reads across entries (pid 0, nonsense memory), as with the
    # R535 drivers that wrote v3 structs through the v3 call that bindings read as v2.
    garbled: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    refcount: int = 0


fake_state = FakeState()


def fake_reset(gpus: list[FakeGpu] | None = None, **kwargs: Any) -> FakeState:
    """A fresh driver state (the same object, so references held by tests stay valid)."""
    fresh = FakeState(gpus=list(gpus or []), **kwargs)
    for i, gpu in enumerate(fresh.gpus):
        if not gpu.uuid:
            gpu.uuid = f"GPU-00000000-0000-0000-0000-{i:012d}"
    fake_state.__dict__.update(fresh.__dict__)
    return fake_state


def fake_set_lost(index: int, lost: bool = True, code: int = NVML_ERROR_GPU_IS_LOST) -> None:
    """A GPU falls off the bus, or comes back (handles taken before stay invalid)."""
    gpu = fake_state.gpus[index]
    if gpu.lost and not lost:
        gpu.generation += 1
    gpu.lost = lost
    gpu.lost_code = code


def fake_load_config(path: str) -> None:
    """Read the state from JSON: ``{"gpus": [{FakeGpu fields}], "init_error": 12, ...}``."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    gpus = []
    for g in data.pop("gpus", []):
        for key in ("compute", "graphics", "mps"):
            if key in g:
                g[key] = [tuple(p) for p in g[key]]
        if g.get("mig") is not None:
            g["mig"] = [
                FakeMig(**{**m, "compute": [tuple(p) for p in m.get("compute", [])]})
                for m in g["mig"]
            ]
        gpus.append(FakeGpu(**g))
    missing = set(data.pop("missing", []))
    garbled = set(data.pop("garbled", []))
    fake_reset(gpus, missing=missing, garbled=garbled, **data)


if os.environ.get("FAKE_PYNVML_CONFIG"):
    fake_load_config(os.environ["FAKE_PYNVML_CONFIG"])


# ----- the fake library -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Handle:
    index: int
    generation: int


@dataclass(frozen=True)
class _MigHandle:
    """A MIG instance's handle: the calls that take a device handle take it too."""

    index: int
    generation: int
    slot: int


MAX_MIG = 7


def _enter(name: str, symbol: str | None = None) -> None:
    fake_state.calls.append(name)
    if fake_state.refcount <= 0:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    if fake_state.broken is not None:
        raise NVMLError(fake_state.broken)
    if (symbol or name) in fake_state.missing:
        raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
    if (symbol or name) in fake_state.failing:
        raise NVMLError(fake_state.failing[symbol or name])


def _mig(handle: _MigHandle) -> FakeMig:
    gpu = _gpu(_Handle(handle.index, handle.generation))
    if gpu.mig is None or handle.slot >= len(gpu.mig):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return gpu.mig[handle.slot]


def _gpu(handle: _Handle) -> FakeGpu:
    if not isinstance(handle, _Handle) or handle.index >= len(fake_state.gpus):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    gpu = fake_state.gpus[handle.index]
    if gpu.lost:
        raise NVMLError(gpu.lost_code)
    if handle.generation != gpu.generation:
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    return gpu


def nvmlInit() -> None:
    fake_state.calls.append("nvmlInit")
    if fake_state.init_error is not None:
        raise NVMLError(fake_state.init_error)
    fake_state.refcount += 1


def nvmlShutdown() -> None:
    _enter("nvmlShutdown")
    fake_state.refcount -= 1


def nvmlSystemGetDriverVersion() -> str:
    _enter("nvmlSystemGetDriverVersion")
    return fake_state.driver


def nvmlDeviceGetCount() -> int:
    _enter("nvmlDeviceGetCount", "nvmlDeviceGetCount_v2")
    return len(fake_state.gpus)


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
    _enter("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2")
    if not 0 <= index < len(fake_state.gpus):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    gpu = fake_state.gpus[index]
    if gpu.lost:
        raise NVMLError(gpu.lost_code)
    return _Handle(index, gpu.generation)


def nvmlDeviceGetName(handle: Any) -> str:
    _enter("nvmlDeviceGetName")
    return _mig(handle).name if isinstance(handle, _MigHandle) else _gpu(handle).name


def nvmlDeviceGetUUID(handle: Any) -> str:
    _enter("nvmlDeviceGetUUID")
    return _mig(handle).uuid if isinstance(handle, _MigHandle) else _gpu(handle).uuid


def nvmlDeviceGetMigMode(handle: _Handle) -> list[int]:
    """[current, pending]; NOT_SUPPORTED on a GPU that cannot do MIG."""
    _enter("nvmlDeviceGetMigMode")
    gpu = _gpu(handle)
    if gpu.mig is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return [NVML_DEVICE_MIG_ENABLE, NVML_DEVICE_MIG_ENABLE]


def nvmlDeviceGetMaxMigDeviceCount(handle: _Handle) -> int:
    _enter("nvmlDeviceGetMaxMigDeviceCount")
    return MAX_MIG if _gpu(handle).mig is not None else 0


def nvmlDeviceGetMigDeviceHandleByIndex(device: _Handle, index: int) -> _MigHandle:
    """The instance in slot ``index``; NOT_FOUND for an empty slot, as the driver says."""
    _enter("nvmlDeviceGetMigDeviceHandleByIndex")
    gpu = _gpu(device)
    if gpu.mig is None or not 0 <= index < MAX_MIG:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    if index >= len(gpu.mig):
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return _MigHandle(device.index, device.generation, index)


def nvmlDeviceGetMemoryInfo(handle: Any, version: int | None = None) -> Any:
    symbol = "nvmlDeviceGetMemoryInfo_v2" if version else "nvmlDeviceGetMemoryInfo"
    _enter("nvmlDeviceGetMemoryInfo", symbol)
    if isinstance(handle, _MigHandle):
        mig = _mig(handle)
        if version:  # v2 is not supported on a MIG instance
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        total, used = mig.total_mib * _MIB, mig.used_mib * _MIB
        return c_nvmlMemory_t(total=total, free=total - used, used=used)
    gpu = _gpu(handle)
    if gpu.memory_error is not None:
        raise NVMLError(gpu.memory_error)
    total = gpu.total_mib * _MIB
    reserved = gpu.reserved_mib * _MIB
    used = gpu.used_mib * _MIB
    if not version:
        return c_nvmlMemory_t(total=total, free=total - reserved - used, used=reserved + used)
    if version != nvmlMemory_v2:
        raise NVMLError(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    return c_nvmlMemory_v2_t(
        version=version, total=total, reserved=reserved, free=total - reserved - used, used=used
    )


def nvmlDeviceGetUtilizationRates(handle: _Handle) -> c_nvmlUtilization_t:
    _enter("nvmlDeviceGetUtilizationRates")
    gpu = _gpu(handle)
    if gpu.util is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return c_nvmlUtilization_t(gpu=gpu.util, memory=gpu.util // 2)


def nvmlDeviceGetTemperature(handle: _Handle, sensor: int) -> int:
    _enter("nvmlDeviceGetTemperature")
    gpu = _gpu(handle)
    if gpu.temperature is None or sensor != NVML_TEMPERATURE_GPU:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return gpu.temperature


def nvmlDeviceGetTemperatureV(
    handle: _Handle, sensor: int, version: int = nvmlTemperature_v1
) -> int:
    _enter("nvmlDeviceGetTemperatureV")
    gpu = _gpu(handle)
    if version != nvmlTemperature_v1:
        raise NVMLError(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
    if gpu.temperature is None or sensor != NVML_TEMPERATURE_GPU:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return gpu.temperature


def _processes(name: str, handle: Any, kind: str, version: int) -> list[nvmlFriendlyObject]:
    _enter(name)
    if isinstance(handle, _MigHandle):
        mig = _mig(handle)
        entries = list(mig.compute) if kind == "compute" else []
    else:
        gpu = _gpu(handle)
        if gpu.process_error is not None:
            raise NVMLError(gpu.process_error)
        entries = list(getattr(gpu, kind))
    out = []
    if name in fake_state.garbled:
        entries = entries[:1] + [(0, pid) for pid, _ in entries[1:]]
    for pid, mib in entries:
        if mib is None:
            mem: Any = None
        elif mib == FAKE_RAW_NOT_AVAILABLE:
            mem = NVML_VALUE_NOT_AVAILABLE_ulonglong.value
        else:
            mem = int(mib) * _MIB
        fields: dict[str, Any] = {"pid": pid, "usedGpuMemory": mem}
        if version >= 2:
            fields.update(gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
        out.append(nvmlFriendlyObject(fields))
    return out


def _unversioned(name: str, handle: _Handle, kind: str) -> list[nvmlFriendlyObject]:
    """The real wrapper turns a missing function into NVMLLibraryMismatchError."""
    try:
        return _processes(name, handle, kind, 1)
    except NVMLError as e:
        if e.value == NVML_ERROR_FUNCTION_NOT_FOUND:
            raise NVMLLibraryMismatchError(
                f"Unversioned function called and the pyNVML version does not match the NVML "
                f"lib version. Use a versioned function such as {name}_v2"
            ) from None
        raise


def nvmlDeviceGetComputeRunningProcesses_v3(handle: _Handle) -> list[nvmlFriendlyObject]:
    return _processes("nvmlDeviceGetComputeRunningProcesses_v3", handle, "compute", 3)


def nvmlDeviceGetComputeRunningProcesses_v2(handle: _Handle) -> list[nvmlFriendlyObject]:
    return _processes("nvmlDeviceGetComputeRunningProcesses_v2", handle, "compute", 2)


def nvmlDeviceGetComputeRunningProcesses(handle: _Handle) -> list[nvmlFriendlyObject]:
    return _unversioned("nvmlDeviceGetComputeRunningProcesses", handle, "compute")


def nvmlDeviceGetGraphicsRunningProcesses_v3(handle: _Handle) -> list[nvmlFriendlyObject]:
    return _processes("nvmlDeviceGetGraphicsRunningProcesses_v3", handle, "graphics", 3)


def nvmlDeviceGetGraphicsRunningProcesses_v2(handle: _Handle) -> list[nvmlFriendlyObject]:
    return _processes("nvmlDeviceGetGraphicsRunningProcesses_v2", handle, "graphics", 2)


def nvmlDeviceGetGraphicsRunningProcesses(handle: _Handle) -> list[nvmlFriendlyObject]:
    return _unversioned("nvmlDeviceGetGraphicsRunningProcesses", handle, "graphics")


def nvmlDeviceGetMPSComputeRunningProcesses_v3(handle: _Handle) -> list[nvmlFriendlyObject]:
    return _processes("nvmlDeviceGetMPSComputeRunningProcesses_v3", handle, "mps", 3)


def nvmlDeviceGetMPSComputeRunningProcesses_v2(handle: _Handle) -> list[nvmlFriendlyObject]:
    return _processes("nvmlDeviceGetMPSComputeRunningProcesses_v2", handle, "mps", 2)


def nvmlDeviceGetMPSComputeRunningProcesses(handle: _Handle) -> list[nvmlFriendlyObject]:
    return _unversioned("nvmlDeviceGetMPSComputeRunningProcesses", handle, "mps")


# ----- health: ECC, retired pages, remapped rows, clock reasons, Xid events -------------------


def _supported(value: Any) -> Any:
    if value is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return value


def nvmlDeviceGetTotalEccErrors(handle: _Handle, errorType: int, counterType: int) -> int:
    _enter("nvmlDeviceGetTotalEccErrors")
    gpu = _gpu(handle)
    if errorType != NVML_MEMORY_ERROR_TYPE_UNCORRECTED or counterType != NVML_VOLATILE_ECC:
        return 0
    return int(_supported(gpu.ecc_uncorrected))


def nvmlDeviceGetRetiredPagesPendingStatus(handle: _Handle) -> int:
    _enter("nvmlDeviceGetRetiredPagesPendingStatus")
    pending = _supported(_gpu(handle).retired_pending)
    return NVML_FEATURE_ENABLED if pending else NVML_FEATURE_DISABLED


def nvmlDeviceGetRemappedRows(handle: _Handle) -> tuple[int, int, int, int]:
    """(corrected rows, uncorrected rows, remapping pending, remapping failed)."""
    _enter("nvmlDeviceGetRemappedRows")
    pending = _supported(_gpu(handle).remap_pending)
    return (0, 1 if pending else 0, 1 if pending else 0, 0)


def nvmlDeviceGetCurrentClocksEventReasons(handle: _Handle) -> int:
    _enter("nvmlDeviceGetCurrentClocksEventReasons")
    return int(_supported(_gpu(handle).clock_reasons))


def nvmlDeviceGetCurrentClocksThrottleReasons(handle: _Handle) -> int:
    _enter("nvmlDeviceGetCurrentClocksThrottleReasons")
    return int(_supported(_gpu(handle).clock_reasons))


# ----- power and energy ------------------------------------------------------------------------


def nvmlDeviceGetPowerUsage(handle: _Handle) -> int:
    """Milliwatts now."""
    _enter("nvmlDeviceGetPowerUsage")
    return int(_supported(_gpu(handle).power_mw))


def nvmlDeviceGetEnforcedPowerLimit(handle: _Handle) -> int:
    """Milliwatts."""
    _enter("nvmlDeviceGetEnforcedPowerLimit")
    return int(_supported(_gpu(handle).power_limit_mw))


def nvmlDeviceGetTotalEnergyConsumption(handle: _Handle) -> int:
    """Millijoules since the driver loaded."""
    _enter("nvmlDeviceGetTotalEnergyConsumption")
    return int(_supported(_gpu(handle).energy_mj))


class c_nvmlEventData_t:
    """What an event wait returns: the device, the event's type and its data (the Xid)."""

    def __init__(self, device: Any, eventType: int, eventData: int) -> None:
        self.device = device
        self.eventType = eventType
        self.eventData = eventData


@dataclass
class _EventSet:
    handles: list[_Handle] = field(default_factory=list)


def nvmlEventSetCreate() -> _EventSet:
    _enter("nvmlEventSetCreate")
    return _EventSet()


def nvmlDeviceRegisterEvents(handle: _Handle, eventTypes: int, eventSet: _EventSet) -> None:
    _enter("nvmlDeviceRegisterEvents")
    gpu = _gpu(handle)
    if not gpu.events or eventTypes & ~nvmlEventTypeXidCriticalError:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    eventSet.handles.append(handle)


def nvmlEventSetWait_v2(eventSet: _EventSet, timeoutms: int) -> c_nvmlEventData_t:
    """The next waiting Xid; TIMEOUT when there is none (this fake never waits)."""
    _enter("nvmlEventSetWait_v2")
    for handle in eventSet.handles:
        gpu = _gpu(handle)
        if gpu.xids:
            return c_nvmlEventData_t(handle, nvmlEventTypeXidCriticalError, gpu.xids.pop(0))
    raise NVMLError(NVML_ERROR_TIMEOUT)


def nvmlEventSetWait(eventSet: _EventSet, timeoutms: int) -> c_nvmlEventData_t:
    return nvmlEventSetWait_v2(eventSet, timeoutms)


def nvmlEventSetFree(eventSet: _EventSet) -> None:
    _enter("nvmlEventSetFree")
    eventSet.handles.clear()
