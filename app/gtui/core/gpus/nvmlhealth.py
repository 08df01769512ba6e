"""A GPU's health through NVML (gpus/health.py's ``GpuHealth``), for the NVML backend
(gpus/nvml.py), which owns the handles and says which errors mean "this GPU is lost".

Read at every poll, never blocking: Xid critical errors from an NVML event set per GPU (waited
on with a 0 ms timeout, where the driver offers the event), volatile uncorrectable ECC errors,
pages waiting to be retired, rows waiting to be remapped, and the clock event ("throttle")
reasons as notes. A field the GPU or the binding does not have is None (n/a), never a fault.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from gtui.core.gpus.health import GpuHealth

MAX_EVENTS = 32  # Xid events taken from one GPU's set per poll; the rest wait for the next
XID_EVENT = 8  # nvmlEventTypeXidCriticalError
UNCORRECTED, VOLATILE = 1, 0  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC
# Clock event reasons worth a note (idle, application clocks and the like are not).
THROTTLE_BITS = {
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake",
}
_THROTTLE_FNS = (
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)


class NvmlHealth:
    """One NVML init's health reading: its Xid event sets (one per GPU) and the fields.

    ``fatal`` is the backend's check that raises where an error means the GPU (or NVML) is
    gone; ``absent`` are the NVML codes that mean "not here" (NOT_SUPPORTED,
    FUNCTION_NOT_FOUND); ``timeout`` is the code of an event wait that found nothing.
    """

    def __init__(
        self,
        nv: ModuleType,
        fatal: Callable[[BaseException], None],
        absent: tuple[int, ...],
        timeout: int,
    ) -> None:
        self._nv = nv
        self._fatal = fatal
        self._absent = absent
        self._timeout = timeout
        self._sets: dict[int, Any] = {}  # GPU index -> its Xid event set

    def register(self, index: int, handle: Any) -> None:
        """An event set for the GPU's Xid critical errors, where the driver offers them."""
        self.forget(index)
        nv = self._nv
        kind = getattr(nv, "nvmlEventTypeXidCriticalError", XID_EVENT)
        try:
            events = nv.nvmlEventSetCreate()
        except Exception:
            return  # no events on this driver: the other fields still count
        try:
            nv.nvmlDeviceRegisterEvents(handle, kind, events)
        except Exception:
            self._free(events)
            return
        self._sets[index] = events

    def forget(self, index: int) -> None:
        """Drop the GPU's event set (its handle went bad, NVML shuts down)."""
        events = self._sets.pop(index, None)
        if events is not None:
            self._free(events)

    def close(self) -> None:
        for index in list(self._sets):
            self.forget(index)

    def read(self, index: int, handle: Any, notes: list[str]) -> GpuHealth:
        """This poll's reading of the GPU's health; errors other than "absent" become notes."""
        nv = self._nv
        ecc = self._field(
            "ECC errors",
            lambda: nv.nvmlDeviceGetTotalEccErrors(handle, UNCORRECTED, VOLATILE),
            notes,
        )
        retired = self._field(
            "retired pages", lambda: nv.nvmlDeviceGetRetiredPagesPendingStatus(handle), notes
        )
        remapped = self._field("remapped rows", lambda: nv.nvmlDeviceGetRemappedRows(handle), notes)
        pending = remapped[2] if isinstance(remapped, (tuple, list)) and len(remapped) > 2 else None
        return GpuHealth(
            xids=self._xids(index, notes),
            ecc_uncorrected=int(ecc) if isinstance(ecc, int) else None,
            retired_pending=bool(retired) if isinstance(retired, int) else None,
            remap_pending=bool(pending) if isinstance(pending, int) else None,
            throttle=self._throttle(handle, notes),
        )

    def _xids(self, index: int, notes: list[str]) -> tuple[int, ...]:
        """The Xid events waiting in the GPU's set, taken without waiting."""
        events = self._sets.get(index)
        if events is None:
            return ()
        nv = self._nv
        wait = getattr(nv, "nvmlEventSetWait_v2", None) or nv.nvmlEventSetWait
        out: list[int] = []
        for _ in range(MAX_EVENTS):
            try:
                data = wait(events, 0)
            except Exception as e:
                if getattr(e, "value", None) == self._timeout:
                    break  # nothing (more) happened
                self._fatal(e)
                if getattr(e, "value", None) not in self._absent:
                    notes.append(f"Xid events: {e}")
                break
            xid = getattr(data, "eventData", None)
            if isinstance(xid, int):
                out.append(xid)
        return tuple(out)

    def _throttle(self, handle: Any, notes: list[str]) -> tuple[str, ...]:
        nv = self._nv
        for name in _THROTTLE_FNS:
            fn = getattr(nv, name, None)
            if fn is None:
                continue
            mask = self._field("clock reasons", lambda fn=fn: fn(handle), notes)  # type: ignore[misc]
            if not isinstance(mask, int):
                return ()
            return tuple(words for bit, words in THROTTLE_BITS.items() if mask & bit)
        return ()

    def _field(self, what: str, fn: Callable[[], Any], notes: list[str]) -> Any:
        """A health field: None where it is absent (n/a), a note where it failed otherwise."""
        try:
            return fn()
        except AttributeError:
            return None  # an older binding without the call
        except Exception as e:
            self._fatal(e)
            if getattr(e, "value", None) not in self._absent:
                notes.append(f"{what}: {e}")
            return None

    def _free(self, events: Any) -> None:
        try:
            self._nv.nvmlEventSetFree(events)
        except Exception:
            pass
