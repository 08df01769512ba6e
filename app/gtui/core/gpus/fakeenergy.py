"""Power and energy on simulated GPUs (gpus/fake.py), so energy per job is measured and tested
without a GPU.

The model: a GPU draws an idle floor plus the rest of its board power (its TDP) in proportion
to its utilization, ``power = floor + (TDP - floor) * util / 100`` with the floor
:data:`IDLE_SHARE` of the TDP; the TDP follows the simulated model (``TDP_BY_GIB``). Each GPU
keeps an energy counter, as NVML's total-energy counter does: millijoules since the backend
started, integrated between reads (the trapezoid of the power at the two reads), so it only
grows. A MIG instance has no power of its own (NVML reports it for the whole GPU): n/a.
"""

from __future__ import annotations

import dataclasses

from gtui.core.gpus.snapshot import GpuInfo

IDLE_SHARE = 0.15  # an idle GPU draws this share of its TDP
DEFAULT_TDP_W = 300.0
# Board power of the models fake.py names by memory size (GiB -> watts).
TDP_BY_GIB = {80: 400.0, 40: 400.0, 48: 300.0, 24: 450.0}


def fake_tdp_w(total_mib: int) -> float:
    """The simulated GPU's board power: by its model, else :data:`DEFAULT_TDP_W`."""
    gib = total_mib / 1024
    if abs(gib - round(gib)) < 0.01:
        return TDP_BY_GIB.get(round(gib), DEFAULT_TDP_W)
    return DEFAULT_TDP_W


def fake_power_w(tdp_w: float, util: int | None) -> float:
    """What the model draws at ``util`` percent (n/a reads as idle)."""
    floor = tdp_w * IDLE_SHARE
    return round(floor + (tdp_w - floor) * max(0, min(100, util or 0)) / 100, 1)


class FakeMeters:
    """Each simulated GPU's energy counter, advanced at every read."""

    def __init__(self) -> None:
        self._mj: dict[int, float] = {}  # GPU index -> energy counted so far
        self._last: dict[int, tuple[float, float]] = {}  # GPU index -> (when, watts) last read

    def metered(self, info: GpuInfo, now: float) -> GpuInfo:
        """``info`` with its power and its counter advanced to ``now``."""
        if info.mem_total_mib is None:
            return info
        tdp = fake_tdp_w(info.mem_total_mib)
        power = fake_power_w(tdp, info.util)
        last = self._last.get(info.index)
        total = self._mj.get(info.index, 0.0)
        if last is not None and now > last[0]:
            total += (last[1] + power) / 2 * (now - last[0]) * 1000
        self._mj[info.index] = total
        self._last[info.index] = (now, power)
        return dataclasses.replace(info, power_w=power, power_limit_w=tdp, energy_mj=int(total))
