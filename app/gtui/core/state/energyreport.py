"""The energy part of ``gtui report``: kWh per attempt, per job and per queue, from the
attempts history alone (each ended attempt's GPU energy, as the scheduler's energy meter
measured it), and what it costs in grams of CO2 and money where ``[settings]`` says what a kWh
costs (``co2_g_per_kwh``, ``price_per_kwh``). Pure: attempts and settings in.

A job's or the queue's energy is the sum over its measured attempts; an attempt without a
figure (a CPU job, a GPU that reports neither energy nor power, an attempt that ended while no
scheduler ran) is counted as unmeasured, never as 0. An attempt marked shared carries its
GPU's energy over its time, which other jobs or users also drew on: summed, such attempts
count that energy more than once, so the report says how many there are.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gtui.core.state.history import Attempt


@dataclass(frozen=True)
class AttemptKwh:
    """One ended attempt's energy."""

    attempt: int
    kwh: float | None
    shared: bool


@dataclass
class JobEnergy:
    """One job's attempts and their energy."""

    name: str
    attempts: list[AttemptKwh] = field(default_factory=list)

    @property
    def kwh(self) -> float | None:
        known = [a.kwh for a in self.attempts if a.kwh is not None]
        return sum(known) if known else None

    @property
    def shared(self) -> bool:
        return any(a.shared for a in self.attempts if a.kwh is not None)


@dataclass
class EnergyReport:
    """The queue's energy; ``co2`` in grams and ``cost`` in the price's currency where the
    settings give a rate."""

    jobs: list[JobEnergy]
    co2_g_per_kwh: float | None = None
    price_per_kwh: float | None = None

    @property
    def kwh(self) -> float:
        return sum(j.kwh or 0.0 for j in self.jobs)

    @property
    def measured(self) -> int:
        return sum(1 for j in self.jobs for a in j.attempts if a.kwh is not None)

    @property
    def unmeasured(self) -> int:
        return sum(1 for j in self.jobs for a in j.attempts if a.kwh is None)

    @property
    def shared(self) -> int:
        return sum(1 for j in self.jobs for a in j.attempts if a.kwh is not None and a.shared)

    def co2_g(self, kwh: float | None) -> float | None:
        return None if kwh is None or self.co2_g_per_kwh is None else kwh * self.co2_g_per_kwh

    def cost(self, kwh: float | None) -> float | None:
        return None if kwh is None or self.price_per_kwh is None else kwh * self.price_per_kwh


def energy_report(
    attempts: Iterable[Attempt],
    co2_g_per_kwh: float | None = None,
    price_per_kwh: float | None = None,
) -> EnergyReport:
    """The energy of every job with a GPU attempt in ``attempts``, in the order of their
    first attempt's end."""
    jobs: dict[str, JobEnergy] = {}
    for a in attempts:
        if not a.gpus:
            continue  # a CPU attempt draws no GPU energy
        job = jobs.setdefault(a.name, JobEnergy(a.name))
        job.attempts.append(AttemptKwh(a.attempt, a.energy_kwh, a.energy_shared))
    for job in jobs.values():
        job.attempts.sort(key=lambda x: x.attempt)
    return EnergyReport(list(jobs.values()), co2_g_per_kwh, price_per_kwh)


def _r(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def energy_json(r: EnergyReport) -> dict[str, object]:
    """The ``energy`` block of ``gtui report --json``: kWh, grams of CO2, money."""
    return {
        "kwh": round(r.kwh, 6),
        "co2_g_per_kwh": r.co2_g_per_kwh,
        "price_per_kwh": r.price_per_kwh,
        "co2_g": _r(r.co2_g(r.kwh), 3),
        "cost": _r(r.cost(r.kwh), 4),
        "attempts_measured": r.measured,
        "attempts_unmeasured": r.unmeasured,
        "attempts_shared": r.shared,
        "jobs": [
            {
                "name": j.name,
                "kwh": _r(j.kwh, 6),
                "co2_g": _r(r.co2_g(j.kwh), 3),
                "cost": _r(r.cost(j.kwh), 4),
                "shared": j.shared,
                "attempts": [
                    {"attempt": a.attempt, "kwh": _r(a.kwh, 6), "shared": a.shared}
                    for a in j.attempts
                ],
            }
            for j in r.jobs
        ],
    }


def kwh_text(kwh: float | None) -> str:
    """``0.0123 kWh``, ``1.23 kWh``, ``123 kWh``: enough digits for a short job."""
    if kwh is None:
        return "n/a"
    if kwh < 0.1:
        return f"{kwh:.4f} kWh"
    return f"{kwh:.2f} kWh" if kwh < 100 else f"{kwh:.0f} kWh"


def energy_lines(r: EnergyReport) -> list[str]:
    """The text report's energy section: the queue's total and what it costs, then each job
    with its attempts."""
    if not r.jobs:
        return []
    total = f"energy: {kwh_text(r.kwh)} over {r.measured} measured GPU attempt(s)"
    if r.unmeasured:
        total += f" ({r.unmeasured} not measured)"
    costs = []
    if r.co2_g_per_kwh is not None:
        grams = r.co2_g(r.kwh) or 0.0
        shown = f"{grams:.1f}" if grams < 10 else f"{grams:.0f}"  # a short run's fraction
        costs.append(f"{shown} g CO2 at {r.co2_g_per_kwh:g} g/kWh")
    if r.price_per_kwh is not None:
        costs.append(f"costs {r.cost(r.kwh):.2f} at {r.price_per_kwh:g}/kWh")
    if costs:
        total += "; " + ", ".join(costs)
    out = [total]
    if r.shared:
        out.append(
            f"  * {r.shared} attempt(s) on a shared GPU: the GPU's energy over the job's time"
        )
    w = max(8, min(32, max(len(j.name) for j in r.jobs)))
    for j in r.jobs:
        tries = ", ".join(
            f"#{a.attempt} {'n/a' if a.kwh is None else f'{a.kwh:.4f}'}{'*' if a.shared else ''}"
            for a in j.attempts
        )
        out.append(f"  {j.name[:w]:<{w}}  {kwh_text(j.kwh):>12}  {tries}")
    return out
