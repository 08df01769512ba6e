"""Hardware faults on simulated GPUs: ``!xid79``, ``!ecc``, ``!lost`` after a spec's entry
(gpus/fake.py), and the health reading they make, so the health watch (sched/healthwatch.py)
runs and is tested without a GPU. A fault shows at every read while the spec says it; an
``@FILE`` spec rewritten mid-run injects one.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from gtui.core.gpus.health import GpuHealth
from gtui.core.gpus.snapshot import GpuInfo

_FAULT_RE = re.compile(r"^(?:xid\d{1,3}|ecc|lost)$")
FAULTS_HELP = "faults are !xidN such as !xid79, !ecc, !lost"


def take_faults(entry: str) -> tuple[str, tuple[str, ...]]:
    """``80G@35!xid79!ecc`` -> (``80G@35``, ("xid79", "ecc")); ValueError names a bad one."""
    head, *marks = entry.split("!")
    faults = []
    for mark in marks:
        word = mark.strip().lower()
        if not _FAULT_RE.match(word):
            raise ValueError(f"in {entry!r}, unknown fault !{mark.strip()} ({FAULTS_HELP})")
        faults.append(word)
    return head.strip(), tuple(faults)


def fake_health(faults: Sequence[str]) -> GpuHealth | None:
    """What a simulated GPU's health reads from its spec's faults; None: healthy (its fields
    read as n/a, as on a GPU that supports none of them)."""
    if not faults:
        return None
    xids = tuple(int(f[3:]) for f in faults if f.startswith("xid"))
    ecc = 1 if "ecc" in faults else None
    return GpuHealth(xids=xids, ecc_uncorrected=ecc, lost="lost" in faults)


def with_health(info: GpuInfo, faults: Sequence[str]) -> GpuInfo:
    """``info`` with its GPU's simulated faults (a MIG instance has its GPU's)."""
    health = fake_health(faults)
    if health is None:
        return info
    if health.lost:
        why = "GPU is lost (a simulated fault, !lost)"
        return dataclasses.replace(info, health=health, lost=True, error=why)
    return dataclasses.replace(info, health=health)
