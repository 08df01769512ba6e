"""Real GPUs through NVML (the ``pynvml`` module of nvidia-ml-py).

NVML is initialised once and its handles and static facts (name, UUID) are kept. Drivers differ,
so every call that may be missing has a fallback and every field that may be unsupported becomes
None (shown as n/a). Nothing here raises out of ``read``:

- NVML missing, the driver not loaded, or a driver/library version mismatch: a snapshot with no
  GPUs and a plain ``error``; init is tried again at a later read (at most every ``retry_s``).
- A GPU that stops answering (GPU is lost, unknown error, its handle cannot be had) is reported as
  ``lost`` with the reason, and its handle is acquired afresh at a later read.

Memory: with memory info v2, ``used`` leaves out what the driver reserves for itself, so an idle
GPU reads about 0 used (the idle test, "used under 3 %", needs that) and the reported
total is ``used + free`` (the memory jobs can have; a little less than the marketing size).
Without v2, NVML's v1 ``total`` and ``used`` are used as they are. In both, total - used = free.

MIG: a GPU in MIG mode shows as its instances, each with its own memory, processes
and ``MIG-...`` UUID (index ``mig_index(gpu, slot)``, shown ``gpu:slot``); NVML gives no
utilization or temperature per instance (n/a). The mode is read when the GPU's handle is taken
(changing it needs a GPU reset, after which the handle is taken again).

``read`` may block while the driver is slow; call it from a thread (``asyncio.to_thread``).

Size: one wrapper per NVML call (NOT_SUPPORTED becomes n/a, a lost GPU a state) is most of it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, Literal

from gtui.core.gpus.health import GpuHealth
from gtui.core.gpus.nvmlenergy import read_power
from gtui.core.gpus.nvmlhealth import NvmlHealth
from gtui.core.gpus.snapshot import (
    GpuInfo,
    GpuProcess,
    GpuSnapshot,
    GpuStaticInfo,
    JobUsage,
    mig_index,
)

MIB = 1024 * 1024
RETRY_S = 10.0
# A GPU that answers GPU_IS_LOST this long without a break has fallen off the bus: a fault for
# the health watch. A shorter loss (a driver hiccup) is only shown and retried.
LOST_FAULT_S = 60.0
NOT_AVAILABLE_U64 = 2**64 - 1
PID_MAX_LIMIT = 2**22  # Linux's largest possible pid_max

# NVML return codes (stable across NVML versions; read from the module when it has them).
_CODES = {
    "UNINITIALIZED": 1,
    "INVALID_ARGUMENT": 2,
    "NOT_SUPPORTED": 3,
    "NO_PERMISSION": 4,
    "NOT_FOUND": 6,
    "DRIVER_NOT_LOADED": 9,
    "TIMEOUT": 10,
    "LIBRARY_NOT_FOUND": 12,
    "FUNCTION_NOT_FOUND": 13,
    "GPU_IS_LOST": 15,
    "RESET_REQUIRED": 16,
    "LIB_RM_VERSION_MISMATCH": 18,
    "ARGUMENT_VERSION_MISMATCH": 25,
    "GPU_NOT_FOUND": 28,
    "UNKNOWN": 999,
}
_ONLY_CPU = "only CPU jobs (gpus = 0) can run"
_TRY_FAKE = "Use --fake-gpus 4x80G to try gtui without GPUs."
_PROCESS_KINDS = ("Compute", "Graphics", "MPSCompute")


class _NvmlDown(Exception):
    """NVML as a whole stopped working (driver unloaded or replaced): re-init later."""


class _GpuLost(Exception):
    """One GPU stopped answering."""


@dataclass
class _Lost:
    reason: str
    retry_at: float
    since: float = 0.0  # when it first answered GPU_IS_LOST (``gone``) without a break
    gone: bool = False  # the error was GPU_IS_LOST, not a timeout or an unknown error


def _lost_health(lost: _Lost, now: float) -> GpuHealth | None:
    """A GPU lost (GPU_IS_LOST) for :data:`LOST_FAULT_S` without a break has fallen off the
    bus: that is its health; a shorter loss is none (n/a)."""
    return GpuHealth(lost=True) if lost.gone and now - lost.since >= LOST_FAULT_S else None


def _gpu_is_lost(nv: ModuleType, e: BaseException) -> bool:
    """Whether the error (or the one it was raised from) is NVML's GPU_IS_LOST."""
    lost = _code(nv, "GPU_IS_LOST")
    return lost in (getattr(e, "value", None), getattr(e.__cause__, "value", None))


def _code(nv: ModuleType, name: str) -> int:
    value = getattr(nv, f"NVML_ERROR_{name}", _CODES[name])
    return value if isinstance(value, int) else _CODES[name]


def _text(e: BaseException) -> str:
    try:
        s = str(e)
    except Exception:
        s = ""
    return s or type(e).__name__


def _mib(value: Any) -> int | None:
    """Bytes to MiB; None where NVML says "not available"."""
    if value is None or not isinstance(value, int) or value < 0 or value >= NOT_AVAILABLE_U64:
        return None
    return (value + MIB // 2) // MIB


def _plausible(proc: Any, total_mib: int | None) -> bool:
    """Whether a process entry looks like one (see ``_process_list``)."""
    pid = getattr(proc, "pid", None)
    if not isinstance(pid, int) or not 0 < pid <= PID_MAX_LIMIT:
        return False
    used = _mib(getattr(proc, "usedGpuMemory", None))
    return used is None or total_mib is None or used <= total_mib + 1024


def _str(value: Any) -> str:
    """Old bindings return bytes, new ones str."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


class NvmlBackend:
    """A ``GpuBackend`` over NVML. ``nvml`` is the module to use (tests pass a fake)."""

    source: Literal["nvml"] = "nvml"

    def __init__(
        self,
        nvml: ModuleType | None = None,
        *,
        retry_s: float = RETRY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._module = nvml
        self._nv: ModuleType | None = None
        self.retry_s = retry_s
        self._clock = clock
        self._lock = threading.Lock()
        self._ok = False
        self._inited = False  # nvmlInit succeeded and needs a matching nvmlShutdown
        self._error: str | None = None
        self._next_init = 0.0
        self._count = 0
        self.driver: str | None = None
        self._handles: dict[int, Any] = {}
        self._static: dict[int, GpuStaticInfo] = {}
        self._lost: dict[int, _Lost] = {}
        self._mig: dict[int, bool] = {}  # GPU index -> in MIG mode (read with its handle)
        self._health: NvmlHealth | None = None  # per init: Xid event sets and health fields
        self._reset_fallbacks()
        with self._lock:
            self._try_init(self._clock())

    # ----- public -------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        """True while NVML is initialised and sees at least one GPU."""
        return self._ok

    def read(self, ours: Sequence[JobUsage] = ()) -> GpuSnapshot:
        """All GPUs now; ``ours`` is not needed (NVML sees our processes itself)."""
        with self._lock:
            try:
                return self._read(self._clock())
            except Exception as e:  # a bug or a binding we do not know: report, never crash
                return GpuSnapshot(
                    gpus=self._known_as_lost(f"cannot read the GPUs ({_text(e)})"),
                    taken_at=time.time(),
                    source="nvml",
                    error=f"cannot read the GPUs ({_text(e)}); retrying",
                    driver=self.driver,
                )

    def close(self) -> None:
        """Release NVML (it keeps a reference count per init)."""
        with self._lock:
            self._shutdown()

    # ----- init ---------------------------------------------------------------------------

    def _reset_fallbacks(self) -> None:
        """What the driver lacks is learnt per init: a new driver may have it."""
        self._proc_fns: dict[str, list[str]] = {
            kind: [
                f"nvmlDeviceGet{kind}RunningProcesses_v3",
                f"nvmlDeviceGet{kind}RunningProcesses_v2",
                f"nvmlDeviceGet{kind}RunningProcesses",
            ]
            for kind in _PROCESS_KINDS
        }
        self._mem_v2 = True
        self._temp_v = True

    def _try_init(self, now: float) -> None:
        self._next_init = now + self.retry_s
        nv = self._module
        if nv is None:
            try:
                import pynvml

                nv = pynvml
            except Exception as e:
                self._error = (
                    f"no NVIDIA GPU found (NVML: library not found; cannot import pynvml: "
                    f"{_text(e)}); {_ONLY_CPU}. {_TRY_FAKE}"
                )
                return
        self._nv = nv
        try:
            nv.nvmlInit()
        except Exception as e:
            self._error = self._init_message(nv, e)
            return
        self._inited = True
        try:
            count = int(nv.nvmlDeviceGetCount())
        except Exception as e:
            self._error = self._init_message(nv, e)
            self._shutdown()
            return
        if count <= 0:
            self._error = f"no NVIDIA GPU found (NVML sees 0 GPUs); {_ONLY_CPU}. {_TRY_FAKE}"
            self._shutdown()
            return
        try:
            self.driver = _str(nv.nvmlSystemGetDriverVersion())
        except Exception:
            self.driver = None
        self._ok = True
        self._error = None
        absent = (_code(nv, "NOT_SUPPORTED"), _code(nv, "FUNCTION_NOT_FOUND"))
        self._health = NvmlHealth(nv, self._raise_if_fatal, absent, _code(nv, "TIMEOUT"))
        self._count = count
        self._handles.clear()
        self._lost.clear()
        self._reset_fallbacks()

    def _init_message(self, nv: ModuleType, e: BaseException) -> str:
        """A sentence a person can act on, from why NVML would not start."""
        value = getattr(e, "value", None)
        why = _text(e)
        if value == _code(nv, "LIBRARY_NOT_FOUND"):
            return f"no NVIDIA GPU found (NVML: library not found); {_ONLY_CPU}. {_TRY_FAKE}"
        if value == _code(nv, "DRIVER_NOT_LOADED"):
            return (
                f"no NVIDIA GPU found (NVML: the NVIDIA driver is not loaded); {_ONLY_CPU}. "
                f"{_TRY_FAKE}"
            )
        if value == _code(nv, "LIB_RM_VERSION_MISMATCH"):
            return (
                "the NVIDIA driver and its library do not match (NVML: driver/library version "
                f"mismatch; a reboot or reloading the nvidia kernel modules fixes it); {_ONLY_CPU} "
                f"until then. gtui keeps retrying every {self.retry_s:g}s."
            )
        if value == _code(nv, "NO_PERMISSION"):
            return f"cannot read the GPUs (NVML: {why}); {_ONLY_CPU}."
        return f"cannot read the GPUs (NVML: {why}); {_ONLY_CPU}. gtui keeps retrying."

    def _shutdown(self) -> None:
        if self._health is not None:
            self._health.close()
            self._health = None
        self._ok = False
        self._handles.clear()
        if self._nv is not None and self._inited:
            self._inited = False
            try:
                self._nv.nvmlShutdown()
            except Exception:
                pass

    # ----- reading ------------------------------------------------------------------------

    def _read(self, now: float) -> GpuSnapshot:
        if not self._ok and now >= self._next_init:
            self._try_init(now)
        if not self._ok:
            known = self._known_as_lost(self._error or "NVML is not available")
            return GpuSnapshot(
                gpus=known,
                taken_at=time.time(),
                source="nvml" if known else "none",
                error=self._error,
                driver=self.driver,
            )
        try:
            gpus = tuple(info for i in range(self._count) for info in self._read_gpu_or_mig(i, now))
        except _NvmlDown as e:
            self._shutdown()
            self._next_init = now + self.retry_s
            self._error = (
                f"lost contact with the NVIDIA driver (NVML: {e}); {_ONLY_CPU} until it is back. "
                f"gtui keeps retrying every {self.retry_s:g}s."
            )
            return GpuSnapshot(
                gpus=self._known_as_lost(self._error),
                taken_at=time.time(),
                source="nvml",
                error=self._error,
                driver=self.driver,
            )
        return GpuSnapshot(gpus=gpus, taken_at=time.time(), source="nvml", driver=self.driver)

    def _known_as_lost(self, reason: str) -> tuple[GpuInfo, ...]:
        """GPUs seen before NVML went away, shown as lost so the UI keeps their rows."""
        return tuple(self._lost_info(i, reason) for i in sorted(self._static))

    def _lost_info(self, index: int, reason: str, health: GpuHealth | None = None) -> GpuInfo:
        static = self._static.get(index)
        return GpuInfo(
            index=index,
            name=static.name if static else f"GPU {index}",
            uuid=static.uuid if static else "",
            mem_total_mib=static.mem_total_mib if static else None,
            mem_used_mib=None,
            util=None,
            temperature=None,
            lost=True,
            error=reason,
            health=health,
        )

    def _raise_if_down(self, e: BaseException) -> None:
        """Errors that mean NVML as a whole is gone (driver unloaded or replaced)."""
        nv = self._nv_or_fail()
        if getattr(e, "value", None) in (
            _code(nv, "UNINITIALIZED"),
            _code(nv, "DRIVER_NOT_LOADED"),
            _code(nv, "LIBRARY_NOT_FOUND"),
            _code(nv, "LIB_RM_VERSION_MISMATCH"),
        ):
            raise _NvmlDown(_text(e)) from e

    def _raise_if_fatal(self, e: BaseException) -> None:
        """Turn an NVML error into "NVML is down" or "this GPU is lost" where it means that."""
        self._raise_if_down(e)
        nv = self._nv_or_fail()
        if getattr(e, "value", None) in (
            _code(nv, "INVALID_ARGUMENT"),  # our kept handle went bad
            _code(nv, "GPU_IS_LOST"),
            _code(nv, "UNKNOWN"),
            _code(nv, "RESET_REQUIRED"),
            _code(nv, "GPU_NOT_FOUND"),
            _code(nv, "TIMEOUT"),
        ):
            raise _GpuLost(_text(e)) from e

    def _is_nvml_error(self, e: BaseException) -> bool:
        cls = getattr(self._nv, "NVMLError", None)
        return isinstance(cls, type) and isinstance(e, cls)

    def _read_gpu(self, index: int, now: float) -> GpuInfo:
        lost = self._lost.get(index)
        if lost is not None and now < lost.retry_at:
            return self._lost_info(index, lost.reason, _lost_health(lost, now))
        try:
            info = self._read_gpu_fields(index)
        except _NvmlDown:
            raise
        except Exception as e:
            # _GpuLost, a handle that cannot be had, or anything unexpected from this GPU.
            self._handles.pop(index, None)
            if self._health is not None:
                self._health.forget(index)
            reason = (
                f"GPU {index} is not answering (NVML: {_text(e)}); retrying every {self.retry_s:g}s"
            )
            gone = _gpu_is_lost(self._nv_or_fail(), e)
            since = lost.since if lost is not None and lost.gone and gone else now
            self._lost[index] = entry = _Lost(reason, now + self.retry_s, since, gone)
            return self._lost_info(index, reason, _lost_health(entry, now))
        self._lost.pop(index, None)
        return info

    def _handle(self, index: int) -> Any:
        nv = self._nv
        assert nv is not None
        handle = self._handles.get(index)
        if handle is not None:
            return handle
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
        except Exception as e:
            self._raise_if_down(e)
            raise _GpuLost(_text(e)) from e
        ignored: list[str] = []
        name = self._optional("name", lambda: _str(nv.nvmlDeviceGetName(handle)), ignored)
        uuid = self._optional("uuid", lambda: _str(nv.nvmlDeviceGetUUID(handle)), ignored)
        name = name or f"GPU {index}"
        uuid = uuid or ""
        old = self._static.get(index)
        total = old.mem_total_mib if old and old.uuid == uuid else None
        self._static[index] = GpuStaticInfo(index=index, name=name, uuid=uuid, mem_total_mib=total)
        self._handles[index] = handle
        mode = self._optional("MIG mode", lambda: nv.nvmlDeviceGetMigMode(handle), [])
        enabled = getattr(nv, "NVML_DEVICE_MIG_ENABLE", 1)
        self._mig[index] = isinstance(mode, (list, tuple)) and bool(mode) and mode[0] == enabled
        if self._health is not None:
            self._health.register(index, handle)
        return handle

    def _read_gpu_or_mig(self, index: int, now: float) -> list[GpuInfo]:
        """The GPU, or its MIG instances when it is in MIG mode (and answers)."""
        info = self._read_gpu(index, now)
        if info.lost or not self._mig.get(index) or index not in self._handles:
            return [info]
        instances = self._read_mig(index, self._handles[index])
        if instances is None:
            return [info]
        return [replace(i, health=info.health) for i in instances]  # the GPU's health is theirs

    def _read_mig(self, index: int, handle: Any) -> list[GpuInfo] | None:
        """A GPU in MIG mode as its instances; None when they cannot be read (the whole
        GPU's row then shows what it can)."""
        nv = self._nv_or_fail()
        notes: list[str] = []
        out: list[GpuInfo] = []
        try:
            slots = int(nv.nvmlDeviceGetMaxMigDeviceCount(handle))
            for slot in range(slots):
                try:
                    mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                except Exception as e:
                    self._raise_if_fatal(e)
                    continue  # an empty slot (NOT_FOUND)
                out.append(self._mig_info(index, slot, mig, notes))
        except _NvmlDown:
            raise
        except Exception:
            return None  # the whole-GPU read says what is wrong
        return out

    def _mig_info(self, parent: int, slot: int, mig: Any, notes: list[str]) -> GpuInfo:
        """One MIG instance: its name, UUID, memory and processes."""
        nv = self._nv_or_fail()
        name = self._optional("name", lambda: _str(nv.nvmlDeviceGetName(mig)), notes)
        uuid = self._optional("uuid", lambda: _str(nv.nvmlDeviceGetUUID(mig)), notes)
        mem = self._optional("memory", lambda: nv.nvmlDeviceGetMemoryInfo(mig), notes)
        total = _mib(getattr(mem, "total", None)) if mem is not None else None
        used = _mib(getattr(mem, "used", None)) if mem is not None else None
        return GpuInfo(
            index=mig_index(parent, slot),
            name=name or f"MIG {slot} of GPU {parent}",
            uuid=uuid or "",
            mem_total_mib=total,
            mem_used_mib=used,
            util=None,
            temperature=None,
            processes=self._processes(mig, total, notes),
            error="; ".join(notes) or None,
            mig_parent=parent,
        )

    def _read_gpu_fields(self, index: int) -> GpuInfo:
        handle = self._handle(index)
        notes: list[str] = []
        total, used = self._memory(handle, notes)
        static = self._static[index]
        if total is not None and total != static.mem_total_mib:
            self._static[index] = GpuStaticInfo(
                index=index, name=static.name, uuid=static.uuid, mem_total_mib=total
            )
        util_obj = self._optional(
            "utilization", lambda: self._call("nvmlDeviceGetUtilizationRates", handle), notes
        )
        util = getattr(util_obj, "gpu", None) if util_obj is not None else None
        temperature = self._temperature(handle, notes)
        processes = self._processes(handle, total, notes)
        health = self._health.read(index, handle, notes) if self._health is not None else None
        nv = self._nv_or_fail()
        absent = (_code(nv, "NOT_SUPPORTED"), _code(nv, "FUNCTION_NOT_FOUND"))
        power = read_power(nv, handle, self._raise_if_fatal, absent, notes)
        return GpuInfo(
            index=index,
            name=static.name,
            uuid=static.uuid,
            mem_total_mib=total,
            mem_used_mib=used,
            util=int(util) if isinstance(util, int) else None,
            temperature=temperature,
            processes=processes,
            error="; ".join(notes) or None,
            health=health,
            power_w=power.power_w,
            power_limit_w=power.power_limit_w,
            energy_mj=power.energy_mj,
        )

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self._nv, name)
        return fn(*args, **kwargs)

    def _optional(self, what: str, fn: Callable[[], Any], notes: list[str]) -> Any:
        """A field the GPU may not support: None (n/a) unless the error means more."""
        try:
            return fn()
        except Exception as e:
            self._raise_if_fatal(e)
            if getattr(e, "value", None) != _code(self._nv_or_fail(), "NOT_SUPPORTED"):
                notes.append(f"{what}: {_text(e)}")
            return None

    def _nv_or_fail(self) -> ModuleType:
        assert self._nv is not None
        return self._nv

    def _memory(self, handle: Any, notes: list[str]) -> tuple[int | None, int | None]:
        """Memory info v2 where it works, else v1. A v2 that fails where v1 works (an old
        driver, WSL's "unknown error") is not asked again."""
        nv = self._nv_or_fail()
        version = getattr(nv, "nvmlMemory_v2", None)
        v2_failed = False
        if self._mem_v2 and version is not None:
            try:
                mem = nv.nvmlDeviceGetMemoryInfo(handle, version=version)
            except TypeError:  # a binding without the version argument
                self._mem_v2 = False
            except Exception as e:
                self._raise_if_down(e)
                v2_failed = True
            else:
                free, used = _mib(getattr(mem, "free", None)), _mib(getattr(mem, "used", None))
                if free is not None and used is not None:
                    return free + used, used
                v2_failed = True
        mem = self._optional("memory", lambda: nv.nvmlDeviceGetMemoryInfo(handle), notes)
        if mem is None:
            return None, None
        if v2_failed:
            self._mem_v2 = False
        return _mib(getattr(mem, "total", None)), _mib(getattr(mem, "used", None))

    def _temperature(self, handle: Any, notes: list[str]) -> int | None:
        """``nvmlDeviceGetTemperatureV`` where the driver has it, else the older call."""
        nv = self._nv_or_fail()
        sensor = getattr(nv, "NVML_TEMPERATURE_GPU", 0)
        v_failed = False
        if self._temp_v and hasattr(nv, "nvmlDeviceGetTemperatureV"):
            try:
                value = nv.nvmlDeviceGetTemperatureV(handle, sensor)
                return int(value) if isinstance(value, int) else None
            except TypeError:
                self._temp_v = False
            except Exception as e:
                self._raise_if_down(e)
                if getattr(e, "value", None) == _code(nv, "NOT_SUPPORTED"):
                    return None
                v_failed = True
        value = self._optional(
            "temperature", lambda: nv.nvmlDeviceGetTemperature(handle, sensor), notes
        )
        if v_failed and value is not None:
            self._temp_v = False
        return int(value) if isinstance(value, int) else None

    def _process_list(
        self, kind: str, handle: Any, total_mib: int | None, notes: list[str]
    ) -> list[Any]:
        """The first process function this driver has, newest struct version first.

        A version whose entries make no sense (pid 0 or beyond any pid_max, more memory than the
        GPU has) is one whose struct layout the driver does not share with the binding (as with
        some R535 drivers): it is dropped for the next older one.
        """
        nv = self._nv_or_fail()
        candidates = self._proc_fns[kind]
        while candidates:
            name = candidates[0]
            fn = getattr(nv, name, None)
            if fn is None:
                candidates.pop(0)
                continue
            try:
                procs = list(fn(handle) or [])
            except Exception as e:
                self._raise_if_fatal(e)
                value = getattr(e, "value", None)
                if not self._is_nvml_error(e) or value in (
                    _code(nv, "FUNCTION_NOT_FOUND"),
                    _code(nv, "ARGUMENT_VERSION_MISMATCH"),
                ):
                    # Missing in this driver (NVMLLibraryMismatchError for the unversioned
                    # wrapper, FunctionNotFound for a versioned one): try the older one.
                    candidates.pop(0)
                    continue
                if value != _code(nv, "NOT_SUPPORTED") and kind != "MPSCompute":
                    notes.append(f"{kind.lower()} processes: {_text(e)}")
                return []
            if all(_plausible(p, total_mib) for p in procs):
                return procs
            if len(candidates) > 1:
                candidates.pop(0)
                continue
            notes.append(f"{kind.lower()} processes: some entries unreadable (driver mismatch)")
            return [p for p in procs if _plausible(p, total_mib)]
        if kind == "Compute":
            notes.append("this driver does not list processes")
        return []

    def _processes(
        self, handle: Any, total_mib: int | None, notes: list[str]
    ) -> tuple[GpuProcess, ...]:
        """Compute, graphics and MPS processes, one entry per pid."""
        mem: dict[int, int | None] = {}
        for kind in _PROCESS_KINDS:
            for p in self._process_list(kind, handle, total_mib, notes):
                pid = getattr(p, "pid", None)
                if not isinstance(pid, int):
                    continue
                used = _mib(getattr(p, "usedGpuMemory", None))
                if pid not in mem:
                    mem[pid] = used
                elif used is not None:
                    before = mem[pid]
                    mem[pid] = used if before is None else max(before, used)
        return tuple(GpuProcess(pid=pid, mem_mib=m) for pid, m in mem.items())
