"""GPUs taken out of placement after a hardware fault: an uncorrectable ECC error,
an Xid, a GPU fallen off the bus. A job that hit one fails with the kind ``gpu_fault``; the GPU
it names (or the job's own, when it names none) gets no new job until a person clears it
(`gtui quarantine QUEUE --clear N`, or the dashboard). The job, if it has retries left, is
retried on another GPU by the usual retry: the quarantined one is out of its reach. The health
watch (sched/healthwatch.py) quarantines a GPU whose own health reads a fault, with ``job`` its
own name; ``health_recheck`` lets it give a GPU back after a clean reading.

The set is saved in the store's meta, so a restarted scheduler keeps it; placement sees it as
``pool_exclude``, by the pool's own numbers (the policy stays the one pure function).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable

from gtui.core.diagnosis.diagnose import gpu_fault_device
from gtui.core.model import Diagnosis, JobRecord, Settings
from gtui.core.state.store import Store, StoreError

META_KEY = "quarantined"


def faulty_gpus(rec: JobRecord, diagnosis: Diagnosis, isolated: bool) -> tuple[int, ...]:
    """The physical GPUs a ``gpu_fault`` points at: the one the log names when it can be told
    (a CUDA index, in the job's own numbering when it was isolated), else all of the job's."""
    if len(rec.gpus) <= 1:
        return tuple(rec.gpus)
    ref = gpu_fault_device(diagnosis.line)
    if ref is not None and ref.index is not None:
        if isolated and 0 <= ref.index < len(rec.gpus):
            return (rec.gpus[ref.index],)
        if not isolated and ref.index in rec.gpus:
            return (ref.index,)
    return tuple(rec.gpus)  # a PCI bus id, or nothing: every GPU the job had


class Quarantine:
    """GPU index -> why and since when; read from and written to the store's meta."""

    def __init__(self, store: Store | None) -> None:
        self._store = store
        self.gpus: dict[int, dict[str, object]] = {}
        if store is not None:
            self.gpus = parse_quarantine(store.get_meta(META_KEY))

    def add(self, gpus: Iterable[int], why: str, job: str) -> list[int]:
        """Quarantine ``gpus``; returns those that were not already."""
        new = [g for g in gpus if g not in self.gpus]
        for g in new:
            self.gpus[g] = {"why": why[:300], "job": job, "since": time.time()}
        if new:
            self._save()
        return new

    def clear(self, gpus: Iterable[int] | None = None) -> list[int]:
        """Release ``gpus`` (None: every one); returns those released."""
        gone = sorted(self.gpus) if gpus is None else [g for g in gpus if g in self.gpus]
        for g in gone:
            del self.gpus[g]
        if gone:
            self._save()
        return gone

    def apply(self, settings: Settings) -> Settings:
        """``settings`` as placement must see them: quarantined GPUs excluded."""
        if not self.gpus:
            return settings
        extra = tuple(g for g in sorted(self.gpus) if g not in settings.pool_exclude)
        return dataclasses.replace(settings, pool_exclude=settings.pool_exclude + extra)

    def _save(self) -> None:
        if self._store is None:
            return
        try:
            self._store.set_meta(META_KEY, json.dumps({str(g): v for g, v in self.gpus.items()}))
        except StoreError:
            pass  # said by the commit that fails next; the quarantine holds in memory meanwhile


def parse_quarantine(text: str | None) -> dict[int, dict[str, object]]:
    try:
        raw = json.loads(text or "{}")
    except ValueError:
        return {}
    if not isinstance(raw, dict):
        return {}
    out: dict[int, dict[str, object]] = {}
    for key, value in raw.items():
        if str(key).isdigit() and isinstance(value, dict):
            out[int(key)] = value
    return out
