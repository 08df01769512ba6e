"""The job book: the scheduler's one source of truth for job records, in queue order.

It joins the queue file (specs, order) with the state store (records), commits every change
before anyone is told of it, and keeps the few lists that every pass needs (the running jobs)
current through commits instead of re-deriving them from every job. Records of jobs the file no
longer names are retired, never deleted: a finished job put back is never run again.

The store is the one source of truth: a job that ended is kept in memory as its state only,
once saved, and its record read back when asked (``gtui.core.state.records``); the objects here
are the live jobs' (waiting, held, running, suspended).

Size: about 460 lines, as the queue-file side (apply, extend, edits of running jobs) and the
saving side (commit, deferred, unsaved, reasons) share the same few structures and version.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable

from gtui.core.api import JobView, freeze
from gtui.core.bus import EventBus
from gtui.core.errors import GtuiError, did_you_mean
from gtui.core.gcpause import paused_gc
from gtui.core.model import ACTIVE_STATES, FINAL_STATES, JobRecord, JobSpec, JobState
from gtui.core.queue.queuefile import QueueFile, derive_name
from gtui.core.state.records import Records
from gtui.core.state.store import Store, StoreError

Follower = Callable[..., None]  # (committed record or appended records, new version)


class JobBook:
    def __init__(self, store: Store, bus: EventBus, queue_name: str) -> None:
        self.store = store
        self._bus = bus
        self._queue_name = queue_name
        self.specs: dict[str, JobSpec] = {}
        self.order: list[str] = []  # the jobs the file names, in its order
        self.names: list[str] = []  # ... then the running ones it no longer names
        self.index: dict[str, int] = {}
        self.records = Records(store)
        # Records of ended jobs the file no longer names: kept as history, so a job put back
        # (or a file that was empty for a moment) never runs a finished job again.
        self.retired = Records(store)
        self.edits: dict[str, str] = {}  # running job -> the held job that is its edit
        self.pending_specs: dict[str, JobSpec] = {}  # edits of running jobs: next attempt
        self.next_entry = 0  # the [[jobs]] index a job appended to the file gets
        self.version = 0  # bumped by every commit and queue change: see active_names
        self._active_at = -1
        self._active: list[str] = []
        self.followers: list[Follower] = []
        self.appenders: list[Follower] = []  # told of jobs appended (see extend)
        self.respecifiers: list[Follower] = []  # told of one job's edited spec (replace_spec)
        self.unsaved: dict[str, JobRecord] = {}  # changes the store refused (locked, full)
        self.deferred: list[JobRecord] = []  # new records saved after the first pass
        self.store_error: str | None = None
        # Waiting reasons change at every pass and are not worth a commit each; they are saved
        # at most every REASON_SAVE_S and at shutdown.
        self.reasons_dirty: set[str] = set()
        self.reasons_saved = 0.0

    # ------------------------------------------------------------------ reading
    def all_names(self) -> list[str]:
        return self.names

    def index_of(self, name: str) -> int:
        return self.index.get(name, len(self.order))

    def view(self, name: str, order: int | None = None) -> JobView:
        return freeze(
            self.specs[name], self.records[name], self.index_of(name) if order is None else order
        )

    def views(self, *, copies: bool = True) -> list[JobView]:
        """Every job's view, in order. ``copies=False``: the live records, for a reader that
        is done with them before the engine runs again (a status answer).

        The garbage collector waits while they are made: 100,000 new objects among as many live
        ones set off its full passes, which found nothing and were most of the 2.3 s that
        `gtui status` spent here at 100,000 jobs."""
        specs, names, live = self.specs, self.names, self.records.live()
        with paused_gc():
            # The ended jobs' records, from the store in a few queries (none kept after).
            ended = self.records.get_many(n for n in names if n not in live)
            if not copies:
                return [JobView(specs[n], live.get(n) or ended[n], i) for i, n in enumerate(names)]
            return [freeze(specs[n], live.get(n) or ended[n], i) for i, n in enumerate(names)]

    def names_in(self, states: Iterable[JobState]) -> list[tuple[str, JobState]]:
        """The jobs in one of ``states``, by name and state in queue order: one walk over the
        states, no view made (``views`` makes one per job: seconds at 100,000). The garbage
        collector waits, as in ``views``: 100,000 new pairs would set off its full passes."""
        wanted, state = frozenset(states), self.records.state
        with paused_gc():
            return [(n, st) for n in self.names if (st := state(n)) is not None and st in wanted]

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in JobState}
        state = self.records.state
        for name in self.names:
            st = state(name)
            if st is not None:
                out[st.value] += 1
        return out

    def require(self, name: str) -> JobRecord:
        rec = self.records.get(name)
        if rec is None:
            known = ", ".join(self.order[:8]) + (", ..." if len(self.order) > 8 else "")
            hint = did_you_mean(name, self.order)
            raise GtuiError(
                f"no job named {name!r} in {self._queue_name}"
                + (hint or (f" (jobs: {known})" if known else " (the queue is empty)"))
            )
        return rec

    def invalidate(self) -> None:
        """Have every cache keyed on ``version`` worked out again (the active list here, the
        planner's candidates and blocked check): for a change no commit tells of, such as a
        start undone after its commit or a back-off that is over."""
        self.version += 1

    def active_names(self) -> list[str]:
        """The running and suspended jobs, in queue order; worked out again only after a
        commit or a queue change (every state change is committed first). With 10,000 jobs,
        the per-poll walks over every job for the few running ones were a third of an idle
        dashboard's CPU (benchmarks/dashboard.py). Callers still check ``rec.active``."""
        if self._active_at != self.version:
            live = self.records.live()
            self._active = [
                n for n in self.names if (r := live.get(n)) is not None and r.state in ACTIVE_STATES
            ]
            self._active_at = self.version
        return self._active

    def idle(self, gpus_known: int) -> bool:
        """Nothing runs and no waiting job can start without a person. ``gpus_known`` counts
        lost GPUs too: they may come back."""
        if self.unsaved:
            return False  # exit only once every end is saved (a full disk: until space frees)
        if self.active_names():
            return False
        state = self.records.state
        for name in self.order:
            if state(name) != JobState.QUEUED or self.waits_on_held(name, set()):
                continue
            if self.specs[name].gpus > gpus_known:
                continue  # can never run here (e.g. GPU jobs on a machine without GPUs)
            return False
        return True

    def waits_on_held(self, name: str, seen: set[str]) -> bool:
        """True if ``name`` can never start without a person: it waits on a held job."""
        if name in seen:
            return False
        seen.add(name)
        for dep in self.specs[name].after:
            state = self.records.state(dep)
            if state is None:
                continue
            if state == JobState.HELD or self.waits_on_held(dep, seen):
                return True
        return False

    # ------------------------------------------------------------------ the queue file
    def apply(
        self, queue: QueueFile, *, initial: bool = False
    ) -> tuple[list[str], list[JobRecord]]:
        """Take a newly loaded queue: new jobs join, changed waiting jobs change, removed
        waiting jobs retire; running jobs are never touched. Returns the names that left and
        the ended jobs the file names again."""
        new_specs = {j.name: j for j in queue.jobs}
        if initial:
            live, ended = self.store.load_split()
        else:
            live, ended = dict(self.records.live()), dict(self.records.ended())
        records = Records(self.store)
        changed: list[JobRecord] = []
        back: list[JobRecord] = []  # ended jobs the file names again
        # The jobs new in this version were all queued now: one float for them all (24 bytes
        # a job of a 100,000-job sweep, and as many once read back from the store).
        now = time.time()
        for spec in queue.jobs:
            name = spec.name
            rec = live.get(name)
            if rec is not None and initial:
                rec.name = name  # the spec's string: the store's is a copy (~60 bytes a job)
            if rec is None and name in ended:
                records.put_saved_end(name, ended[name])  # ended: its record stays stored
                continue
            if rec is None and not initial:
                was = self.retired.state(name)
                if was is not None:
                    rec = self.retired.pop(name)
                    if was in FINAL_STATES and rec is not None:
                        back.append(rec)
                        if name in self.unsaved:
                            records.put(rec)
                        else:
                            records.put_saved_end(name, was)
                        continue
            if rec is None:
                rec = JobRecord(name=name, mem_mib=spec.mem_mib, queued_since=now)
                changed.append(rec)
            elif rec.waiting and not initial:
                old = self.specs.get(name)
                if old is not None and old.mem_mib != spec.mem_mib:
                    rec.mem_mib = spec.mem_mib
                    changed.append(rec)
            records.put(rec)
        removed: list[str] = []
        for name, rec in live.items():
            if name in new_specs:
                continue
            if rec.active:
                # Still running: keep following it until it ends, then it leaves.
                records.put(rec)
                new_specs[name] = self.specs.get(name) or JobSpec(
                    name=name,
                    cmd="(removed from the queue file)",
                    gpus=len(rec.gpus),
                    mem_mib=rec.mem_mib,
                )
            else:
                # Retired, never deleted: its history stays in the store.
                self.retired.put(rec)
                if not initial:
                    removed.append(name)
        for name, state in ended.items():
            if name not in new_specs:
                self.retired.put_saved_end(name, state)
                if not initial:
                    removed.append(name)
        # A running job keeps the spec it was started with; an edit applies to its next attempt.
        self.pending_specs = {}
        for name, rec in records.live().items():
            old = self.specs.get(name)
            if rec.active and old is not None and new_specs.get(name) != old:
                self.pending_specs[name] = new_specs[name]
                new_specs[name] = old
        self.specs = new_specs
        self.next_entry = max((j.entry for j in queue.jobs), default=-1) + 1
        self.order = [j.name for j in queue.jobs]
        self.records = records
        in_file = set(self.order)
        self.names = self.order + [n for n in records if n not in in_file]
        self.index = {n: i for i, n in enumerate(self.order)}
        self.version += 1
        if initial:  # links made by an earlier scheduler (after_edit_of is saved)
            self.edits = {r.after_edit_of: n for n, r in records.live().items() if r.after_edit_of}
        else:
            self._link_edits_of_running_jobs(changed)
        if changed and initial:
            # Records of jobs that never ran, made now from the file: saved after the first
            # placement pass (save_deferred), not before it. A 100,000-job sweep's first start
            # spent 1 s of its "up and placing" here; lost in a crash, they are made again.
            self.deferred.extend(changed)
        elif changed:
            self.store.save_many(changed)
        return removed, back

    def replace_spec(self, spec: JobSpec) -> None:
        """One job's table edited in the file (its name kept), as ``apply`` would take it: a
        waiting job changes now, a running one at its next attempt, an ended one's spec
        changes (a retry runs it)."""
        name = spec.name
        old = self.specs[name]
        rec = self.records.get(name)
        self.version += 1
        if self._active_at == self.version - 1:
            self._active_at = self.version  # an edit starts and stops nothing
        if rec is not None and rec.active:
            if spec != old:
                self.pending_specs[name] = spec
            else:
                self.pending_specs.pop(name, None)
        else:
            self.specs[name] = spec
            self.pending_specs.pop(name, None)
            if rec is not None and rec.waiting and old.mem_mib != spec.mem_mib:
                rec.mem_mib = spec.mem_mib
                self.store.save_many([rec])
        for told in self.respecifiers:
            told(name, self.version)

    def save_deferred(self, limit: int | None = None) -> bool:
        """Save the records ``apply`` put off (one transaction; ``limit``: at most that many
        now), unless saved since. True when some are left. A saved record carries its waiting
        reason: it is not saved again for it (at 100,000 jobs, a second 2 s write)."""
        if not self.deferred or self.unsaved:
            return False
        n = len(self.deferred) if limit is None else limit
        recs, self.deferred = self.deferred[:n], self.deferred[n:]
        try:
            self.store.save_many(recs)
        except StoreError as e:
            self.deferred = recs + self.deferred
            self._store_failed(e)
            return False
        self.reasons_dirty.difference_update(r.name for r in recs)
        if not self.reasons_dirty:
            self.reasons_dirty = set()  # a set keeps its table when emptied: 4 MB at 100,000
        return bool(self.deferred)

    def extend(self, specs: Iterable[JobSpec]) -> list[JobRecord]:
        """Jobs appended to the file (``gtui add`` into a running queue): they join at the
        end without the file being read again. Returns the ended ones put back (a retired
        record: not run again, as after a reload).

        One name, one record: a job the book holds already is never made again. One the file
        names already (a reload read it first) is left as it is; a running job the file had
        stopped naming joins again with its own record, running on (an edit of its spec is
        for its next attempt, as in ``apply``)."""
        new: list[JobRecord] = []
        back: list[JobRecord] = []
        joined: list[JobRecord] = []
        extra = self.names[len(self.order) :]  # running jobs the file no longer names
        now = time.time()  # when they were all queued (see apply)
        rejoined = False
        for spec in specs:
            name = spec.name
            if name in self.index:
                continue
            self.next_entry = max(self.next_entry, spec.entry + 1)
            if name in extra:
                rec = self.records[name]
                extra.remove(name)
                rejoined = True
                if spec != self.specs[name]:
                    self.pending_specs[name] = spec
            else:
                rec = self._record_for_new(spec, now, new, back)
                self.specs[name] = spec
            joined.append(rec)
            self.index[name] = len(self.order)
            self.order.append(name)
        self.names = self.order + extra
        self.version += 1
        if self._active_at == self.version - 1 and not rejoined:
            self._active_at = self.version  # nothing appended runs yet
        for appended in self.appenders:
            appended(joined, self.version)
        if new:
            self.store.save_many(new)
        return back

    def _record_for_new(
        self, spec: JobSpec, now: float, new: list[JobRecord], back: list[JobRecord]
    ) -> JobRecord:
        """The record of a job ``extend`` takes in, the book holding none for its name: the
        retired one (an ended job put back is not run again), else a new one (in ``new``)."""
        name = spec.name
        rec = self.retired.pop(name, None)
        if rec is None:
            rec = JobRecord(name=name, mem_mib=spec.mem_mib, queued_since=now)
            new.append(rec)
            self.records.put(rec)
            return rec
        if rec.final:
            back.append(rec)
        if rec.final and name not in self.unsaved:
            self.records.put_saved_end(name, rec.state)  # retired: saved already
        else:
            self.records.put(rec)
        return rec

    def _link_edits_of_running_jobs(self, new: list[JobRecord]) -> None:
        """A job with no ``name`` is named after its command, so editing a running one's command
        looks like a new job beside it. Find those (same ``[[jobs]]`` entry, both names derived)
        and hold the new one until the old run ends: never a second copy."""
        running_gone = {
            self.specs[n].entry: n
            for n in self.active_names()
            if n not in self.index and self.records[n].active and derived(self.specs[n])
        }
        if not running_gone:
            return
        for rec in new:
            spec = self.specs.get(rec.name)
            if spec is None or not derived(spec) or rec.state != JobState.QUEUED:
                continue
            old = running_gone.pop(spec.entry, None)
            if old is None:
                continue
            rec.state = JobState.HELD
            rec.after_edit_of = old
            self.edits[old] = rec.name
            rec.reason = (
                f"edit of {old}, which is still running: applies from its next attempt "
                "(runs if that one fails; done if it succeeds)"
            )
            rec.reason_at = time.time()

    def take_over_from_edit(self, old: JobRecord) -> JobRecord | None:
        """``old`` ended: the job that is its edit goes on from there (a dict lookup: this is
        on every job's end). Returns the edit's record if it changed."""
        name = self.edits.pop(old.name, None)
        rec = self.records.get(name) if name is not None else None
        if rec is None or rec.after_edit_of != old.name or rec.state != JobState.HELD:
            return None
        rec.after_edit_of = None
        if old.state in (JobState.QUEUED, JobState.HELD):
            old.state = JobState.FAILED  # its retry is the edit's first run
            self.commit(old)
        if old.state == JobState.DONE:
            rec.state = JobState.DONE
            rec.ended_at = old.ended_at
            rec.warnings = [f"done as {old.name}, before its command was edited"]
        else:
            rec.state = JobState.QUEUED
            rec.queued_since = time.time()
        rec.reason = ""
        self.commit(rec)
        return rec

    # ------------------------------------------------------------------ saving
    def commit(self, rec: JobRecord) -> bool:
        """Save a change before it is shown. When the store refuses (locked by another process,
        disk full) the change is kept, the user told, no job started, and it is saved again at
        every poll; the jobs' exit-status files cover a crash meanwhile. False: not saved."""
        self.version += 1  # every transition passes here: see active_names
        self.records.changed(rec)
        self._follow(rec)
        if not self.unsaved:
            try:
                self.store.save(rec)
                self.records.saved(rec)  # an ended job leaves memory once saved
                return True
            except StoreError as e:
                self._store_failed(e)
        self.unsaved[rec.name] = rec
        return False

    def _follow(self, rec: JobRecord) -> None:
        """Keep the running list current through a commit of ``rec`` alone, where that is
        cheap, instead of redoing it over every job: a job's start, pid and end are three
        commits, and at 2,000 jobs each redo cost ~0.3 ms (benchmarks/throughput.py)."""
        version, name = self.version, rec.name
        if self._active_at == version - 1:
            active = self._active
            if rec.active and name not in active:
                at = self.index_of(name)
                pos = next((i for i, n in enumerate(active) if self.index_of(n) > at), len(active))
                self._active = [*active[:pos], name, *active[pos:]]
            elif not rec.active and name in active:
                self._active = [n for n in active if n != name]
            self._active_at = version
        for follow in self.followers:
            follow(rec, version)

    def _store_failed(self, e: StoreError) -> None:
        if str(e) != self.store_error:
            self.store_error = str(e)
            self._bus.notice(
                "error",
                f"cannot save the job states: {e}\nno job starts until they are saved; "
                "gtui tries again at every poll (running jobs go on)",
            )

    def save_reasons(self) -> None:
        """Save the waiting reasons that changed since the last save (one transaction)."""
        self.reasons_saved = time.monotonic()
        if not self.reasons_dirty:
            return
        live = self.records.live()
        recs = [live[n] for n in self.reasons_dirty if n in live]
        self.reasons_dirty = set()
        with contextlib.suppress(StoreError):  # only words: the next save has them again
            self.store.save_many(r for r in recs if r.waiting)

    def save_unsaved(self) -> None:
        if not self.unsaved:
            return
        try:
            self.store.save_many(list(self.unsaved.values()))
        except StoreError as e:
            self._store_failed(e)
            return
        self.records.saved_many(self.unsaved.values())
        self.unsaved.clear()
        self.store_error = None
        self._bus.notice("info", "job states saved again; jobs start again")

    def save_many(self, recs: Iterable[JobRecord]) -> None:
        self.store.save_many(recs)


def derived(spec: JobSpec) -> bool:
    """Whether the job's name was made from its command (no ``name``, no matrix)."""
    return not spec.matrix and spec.name == derive_name(spec.cmd)
