"""The job records the scheduler keeps in memory: objects for live jobs, a state for ended ones.

The store (SQLite) is the one source of truth. A job that is waiting, held, running or
suspended changes often and every pass reads it, so its :class:`JobRecord` stays here. A job
that ended (done, failed, killed, blocked, unknown) changes only if a person retries it: once
its record is saved, only its state stays in memory (an enum member per name, shared), and the
whole record is read back from the store when someone asks (a status answer, a retry, the
detail screen), with a few of those kept. A queue that ran 100,000 jobs then holds 100,000
names and states, not 100,000 records with their diagnoses, warnings and reasons.

Readers that only need the state (the planner's walks, the counts) ask :meth:`state`, which never
reads the store; ``records[name]`` gives the whole record, live or read back.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, MutableMapping

from gtui.core.model import FINAL_STATES, JobRecord, JobState
from gtui.core.state.store import Store

__all__ = ["Records"]

CACHE = 256  # ended records read back and kept: a screen that pages through them reads each once


class Records(MutableMapping[str, JobRecord]):
    """Name -> record, in insertion order; ended, saved records live in the store."""

    __slots__ = ("_cache", "_ended", "_live", "_store")

    def __init__(self, store: Store) -> None:
        self._store = store
        self._live: dict[str, JobRecord] = {}
        self._ended: dict[str, JobState] = {}
        self._cache: OrderedDict[str, JobRecord] = OrderedDict()

    # -- building -----------------------------------------------------------------------------
    def put(self, rec: JobRecord) -> None:
        """Keep ``rec`` as an object (it is live, or not saved yet)."""
        name = rec.name
        self._live[name] = rec
        self._ended.pop(name, None)
        self._cache.pop(name, None)

    def put_saved_end(self, name: str, state: JobState) -> None:
        """An ended job whose record is in the store: its state only."""
        self._live.pop(name, None)
        self._cache.pop(name, None)
        self._ended[name] = state

    def changed(self, rec: JobRecord) -> None:
        """``rec`` is about to be saved: an object again until it is (a retried job, read back
        from the store, is live from here on; an end not saved yet must not be lost)."""
        if rec.name in self:
            self.put(rec)

    def saved(self, rec: JobRecord) -> None:
        """``rec`` was just saved: an ended one leaves memory (a copy stays in the cache, so
        the caller that ended it and reads it on finds the same object)."""
        name = rec.name
        if rec.state in FINAL_STATES and (name in self._live or name in self._ended):
            self._live.pop(name, None)
            self._ended[name] = rec.state
            self._remember(rec)

    def saved_many(self, recs: Iterable[JobRecord]) -> None:
        for rec in recs:
            self.saved(rec)

    # -- reading ------------------------------------------------------------------------------
    def state(self, name: str) -> JobState | None:
        """The job's state, never from the store; None if unknown."""
        rec = self._live.get(name)
        if rec is not None:
            return rec.state
        return self._ended.get(name)

    def live(self) -> Mapping[str, JobRecord]:
        """The records kept as objects: waiting, held, running, suspended (and unsaved)."""
        return self._live

    def ended(self) -> Mapping[str, JobState]:
        """The ended jobs kept as their state only."""
        return self._ended

    def get_many(self, names: Iterable[str]) -> dict[str, JobRecord]:
        """Records of ``names`` that are known, reading the ended ones in one query."""
        out: dict[str, JobRecord] = {}
        missing: list[str] = []
        for name in names:
            rec = self._live.get(name) or self._cache.get(name)
            if rec is not None:
                out[name] = rec
            elif name in self._ended:
                missing.append(name)
        if missing:
            loaded = self._read(missing)
            for name in missing:
                rec = loaded.get(name)
                out[name] = rec if rec is not None else self._lost(name)
        return out

    def __getitem__(self, name: str) -> JobRecord:
        rec = self._live.get(name)
        if rec is not None:
            return rec
        state = self._ended.get(name)
        if state is None:
            raise KeyError(name)
        rec = self._cache.get(name)
        if rec is not None:
            self._cache.move_to_end(name)
            return rec
        rec = self._read((name,)).get(name) or self._lost(name)
        self._remember(rec)
        return rec

    def __contains__(self, name: object) -> bool:
        return name in self._live or name in self._ended

    def __iter__(self) -> Iterator[str]:
        yield from self._live
        yield from self._ended

    def __len__(self) -> int:
        return len(self._live) + len(self._ended)

    # -- MutableMapping -----------------------------------------------------------------------
    def __setitem__(self, name: str, rec: JobRecord) -> None:
        self.put(rec)

    def __delitem__(self, name: str) -> None:
        if name in self._live:
            del self._live[name]
        else:
            del self._ended[name]
        self._cache.pop(name, None)

    def pop(self, name: str, default: JobRecord | None = None) -> JobRecord | None:  # type: ignore[override]
        if name not in self:
            return default
        rec = self[name]
        del self[name]
        return rec

    # -- inside -------------------------------------------------------------------------------
    def _read(self, names: Iterable[str]) -> dict[str, JobRecord]:
        """From the store; once the scheduler has closed it (after its shutdown, a screen still
        shows the jobs), from the same file opened read-only for the read."""
        if not self._store.closed:
            return self._store.get_many(names)
        with Store(self._store.path, readonly=True) as store:
            return store.get_many(names)

    def _remember(self, rec: JobRecord) -> None:
        self._cache[rec.name] = rec
        self._cache.move_to_end(rec.name)
        while len(self._cache) > CACHE:
            self._cache.popitem(last=False)

    def _lost(self, name: str) -> JobRecord:
        """The store lost a record it had (a database moved aside while running): the state
        kept here is all there is."""
        return JobRecord(name=name, state=self._ended.get(name, JobState.UNKNOWN))
