"""A GPU's power draw and energy counter through NVML, for the NVML backend (gpus/nvml.py),
which owns the handles and says which errors mean "this GPU is lost" (``fatal`` raises them).
A code in ``absent`` (NOT_SUPPORTED, FUNCTION_NOT_FOUND: an older GPU or driver) is n/a
(None), silently; any other error is n/a with a note.

Read at every poll: the power now (``nvmlDeviceGetPowerUsage``, milliwatts), the limit the
driver enforces (``nvmlDeviceGetEnforcedPowerLimit``, milliwatts) and the total energy since
the driver loaded (``nvmlDeviceGetTotalEnergyConsumption``, millijoules; Volta and later). A
binding without the call reads as n/a, as a GPU without the field does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class PowerReading:
    """One poll's power fields of a GPU; None: n/a."""

    power_w: float | None = None
    power_limit_w: float | None = None
    energy_mj: int | None = None


def read_power(
    nv: ModuleType,
    handle: Any,
    fatal: Callable[[BaseException], None],
    absent: tuple[int, ...],
    notes: list[str],
) -> PowerReading:
    """The GPU's power, its limit and its energy counter; each n/a on its own."""

    def field(what: str, name: str) -> int | None:
        fn = getattr(nv, name, None)
        if fn is None:
            return None  # an older binding without the call
        try:
            value = fn(handle)
        except Exception as e:
            fatal(e)
            if getattr(e, "value", None) not in absent:
                notes.append(f"{what}: {e}")
            return None
        return int(value) if isinstance(value, int) and value >= 0 else None

    power = field("power", "nvmlDeviceGetPowerUsage")
    limit = field("power limit", "nvmlDeviceGetEnforcedPowerLimit")
    energy = field("energy", "nvmlDeviceGetTotalEnergyConsumption")
    return PowerReading(
        power_w=None if power is None else power / 1000,
        power_limit_w=None if limit is None else limit / 1000,
        energy_mj=energy,
    )
