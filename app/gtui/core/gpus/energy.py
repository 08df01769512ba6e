"""What one attempt's GPUs drew, from the GPU readings: pure rules, no state.

An attempt's energy on a GPU is its total-energy counter's rise between the reading taken at
the attempt's start and the one at its end; where the GPU has no counter (or it went back:
a driver reloaded, a simulated GPU's scheduler restarted), the power samples of the polls the
attempt ran through, integrated by the trapezoid rule. The attempt's energy is the sum over
its GPUs. It is the GPU's energy over the attempt's time: when anything else ran on the GPU
meanwhile (another job of ours, another user's process) the attempt is marked ``shared``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from gtui.core.gpus.snapshot import GpuInfo

MJ_PER_KWH = 3.6e9  # millijoules in a kilowatt-hour
J_PER_KWH = 3.6e6
# Memory in use on a GPU beyond its job's own processes that makes it shared: above what a
# driver or a CUDA context keeps without anyone else there.
SHARED_MIB = 1024


@dataclass(frozen=True)
class AttemptEnergy:
    """One attempt's energy: kWh summed over its GPUs (None: no GPU could say), whether a GPU
    was shared during it, and how it was measured ("counter", "power", or "counter+power"
    when its GPUs differed)."""

    kwh: float | None
    shared: bool = False
    source: str = ""


def counter_kwh(start_mj: int | None, end_mj: int | None) -> float | None:
    """The counter's rise in kWh; None when either reading is n/a or the counter went back."""
    if start_mj is None or end_mj is None or end_mj < start_mj:
        return None
    return (end_mj - start_mj) / MJ_PER_KWH


def trapezoid_j(last: tuple[float, float] | None, now: float, watts: float) -> float:
    """Joules drawn between the last sample ``(when, watts)`` and this one."""
    if last is None or now <= last[0]:
        return 0.0
    return (last[1] + watts) / 2 * (now - last[0])


def shared_use(info: GpuInfo, job: str, our_jobs: Collection[str]) -> bool:
    """Did anything but ``job`` use this GPU at this reading? ``our_jobs``: our running jobs
    given this GPU. Another of ours, a process that is not the job's, or memory in use beyond
    the job's own processes (another user whose processes cannot be seen) all count."""
    if any(other != job for other in our_jobs):
        return True
    if any(p.job != job for p in info.processes):
        return True
    own = [p.mem_mib for p in info.processes]
    if info.mem_used_mib is None or any(m is None for m in own):
        return False
    return info.mem_used_mib - sum(m for m in own if m is not None) > SHARED_MIB
