"""The host's cores and memory during one placement pass: which jobs asking ``cpus`` / ``ram``
fit now, and the words for why one waits. Pure, like the rest of the policy.

They are counted as a GPU's memory is: what our running jobs asked and do not use yet stays
promised to them, and so does what neighbours' claims promise. Cores are counted by what was
asked alone (a job's load swings from one second to the next; a running job asking 8 holds 8),
memory by what the machine uses now plus what was promised and is not in use yet::

    cores free = cores - our running jobs' cpus - neighbours' claimed cpus
    memory free = total - used - sum over our jobs of max(0, ram - used by it)
                  - neighbours' claimed ram not yet in use

A job that asks for neither is not counted and never waits here.
"""

from __future__ import annotations

from collections.abc import Sequence

from gtui.core.gpus.snapshot import HostHolder, HostInfo
from gtui.core.units import format_mib

__all__ = ["HostHolder", "HostPool", "host_doc"]

MAX_HOLDERS_SAID = 3


class HostPool:
    """The host during one pass, mutated as jobs start (``take``)."""

    __slots__ = ("cores", "cores_free", "holders", "ram_free", "ram_total")

    def __init__(self, host: HostInfo, holders: Sequence[HostHolder]) -> None:
        self.cores = host.cores
        self.ram_total = host.ram_total_mib
        self.holders = list(holders)
        self.cores_free = host.cores - sum(h.cpus for h in holders)
        promised = sum(h.ram_promised_mib for h in holders)
        self.ram_free = host.ram_total_mib - host.ram_used_mib - promised

    def never(self, cpus: int | None, ram: int | None) -> str | None:
        """Why the host can never run a job asking this, or None."""
        if cpus and cpus > self.cores:
            return f"needs {cpus} cores: the host has {self.cores}"
        if ram and ram > self.ram_total:
            return f"needs {format_mib(ram)} RAM: the host has {format_mib(self.ram_total)}"
        return None

    def short(self, cpus: int | None, ram: int | None) -> str | None:
        """Why a job asking this does not fit now, naming the resource and who holds it."""
        if cpus and cpus > self.cores_free:
            held = [(h.who, h.cpus, str(h.cpus)) for h in self.holders if h.cpus]
            free = max(0, self.cores_free)
            return f"needs {cpus} cores: {free} free" + _holders(held)
        if ram and ram > self.ram_free:
            held = [(h.who, h.ram_mib, format_mib(h.ram_mib)) for h in self.holders if h.ram_mib]
            free_text = format_mib(max(0, self.ram_free))
            return f"needs {format_mib(ram)} RAM: {free_text} free" + _holders(held)
        return None

    def take(self, name: str, cpus: int | None, ram: int | None) -> None:
        """A job asking this starts: what it asked is promised to it."""
        self.cores_free -= cpus or 0
        self.ram_free -= ram or 0
        self.holders.append(HostHolder(name, cpus or 0, ram or 0))


def _holders(held: list[tuple[str, int, str]]) -> str:
    """`` (train-a 16, bob's eval 8)``: the largest holders first."""
    if not held:
        return ""
    held.sort(key=lambda h: -h[1])
    said = [f"{who} {text}" for who, _, text in held[:MAX_HOLDERS_SAID]]
    if len(held) > MAX_HOLDERS_SAID:
        said.append(f"{len(held) - MAX_HOLDERS_SAID} more")
    return f" ({', '.join(said)})"


def host_doc(host: HostInfo, holders: Sequence[HostHolder]) -> dict[str, object]:
    """The host as ``gtui status --json``, ``gtui gpus --json`` and the GPU panel show it: the
    reading, what running jobs asked (ours, and neighbours' claims), and what is left free by
    the placement's count."""
    pool = HostPool(host, holders)
    return {
        **host.to_json(),
        "cores_asked": sum(h.cpus for h in holders),
        "cores_free": max(0, pool.cores_free),
        "ram_asked_mib": sum(h.ram_mib for h in holders),
        "ram_free_mib": max(0, pool.ram_free),
    }
