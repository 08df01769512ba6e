"""The client for a queue that no scheduler runs: the same operations, on the state store.

``gtui kill / pause / resume / retry`` and ``gtui status`` reach a running scheduler through its
socket (gtui.core.control.client). With none running they still work, with no scheduler built:
under the queue lock, the store's records are brought up to date (a job that ended meanwhile is
recorded, as the next scheduler would), the transition is applied by the very functions the
scheduler uses (gtui.core.sched.transitions, .outcome), and the change is committed. A job that
still runs is signalled through the local executor and left running unless it is killed.

A job on a cluster's node is out of this machine's sight: with no scheduler it is shown
as last recorded, with a note, never recorded ended nor put back in the queue (the next
scheduler re-adopts it), and a command that would signal it is refused, saying to start one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gtui.core.api import JobView
from gtui.core.bus import EventBus
from gtui.core.control.protocol import Where
from gtui.core.control.rpc import stopped_words
from gtui.core.errors import GtuiError
from gtui.core.exec.base import Executor, ExitStatus, handle_of
from gtui.core.exec.local import LocalExecutor
from gtui.core.gpus.snapshot import GpuSnapshot
from gtui.core.model import JobRecord, JobSpec, Settings
from gtui.core.paths import (
    QueuePaths,
    ensure_state_dir,
    queue_paths,
    refuse_foreign_state,
    register_queue,
)
from gtui.core.procstat import stopped_state
from gtui.core.queue.queuefile import QueueFile, check_trusted, load_queue, refuse_node_names
from gtui.core.sched import outcome, transitions
from gtui.core.sched.quarantine import Quarantine, parse_quarantine
from gtui.core.sched.recovery import rebuilt_words, recover
from gtui.core.state.backup import open_checked, write_backup
from gtui.core.state.book import JobBook
from gtui.core.state.lock import QueueLock
from gtui.core.state.status import settled, status_dict
from gtui.core.state.store import Store, StoreError, open_store_readonly


class StoreClient:
    """Operations on the saved state of ``queue`` while no scheduler runs it. Each takes the
    queue lock for its own duration: LockedError if a scheduler holds it."""

    live = False  # what it changes applies when a scheduler starts

    def __init__(self, queue: Path | QueuePaths, executor: Executor | None = None) -> None:
        self.paths = queue if isinstance(queue, QueuePaths) else queue_paths(queue)
        self.queue_path = self.paths.queue
        self._executor = executor or LocalExecutor()
        # Known once _book has read the queue: it runs on a cluster; its file says so.
        self._cluster = self._cluster_in_file = False
        self._rebuilt: list[str] = []  # what _book rebuilt, in words (gtui doctor --repair)

    # ------------------------------------------------------------------ reading
    async def status(self) -> dict[str, Any]:
        return status_from_store(self.paths.queue)

    # ------------------------------------------------------------------ operations
    async def kill(self, names: Sequence[str], *, wait: bool = True) -> None:
        with self._book() as (book, settings):
            transitions.check_kill(book.require, names)
            self._refuse_on_cluster(book, names, "kill")
            for name in names:
                rec = book.records[name]
                if not rec.active:
                    transitions.kill_waiting(rec)
                    book.commit(rec)
                    continue
                # This process sends the KILL after the grace: it always waits.
                handle = handle_of(rec)
                await self._executor.kill(handle, settings.kill_grace_s)
                status = self._executor.exit_status(handle) or ExitStatus(None, None)
                self._conclude(book, settings, name, status, killed=True)

    async def pause(self, names: Sequence[str]) -> None:
        await self._switch(names, transitions.PAUSE)

    async def resume(self, names: Sequence[str]) -> None:
        await self._switch(names, transitions.RESUME)

    async def _switch(self, names: Sequence[str], how: transitions.Switch) -> None:
        with self._book() as (book, _settings):
            transitions.check_switch(book.require, names, how)
            self._refuse_on_cluster(book, names, "pause" if how is transitions.PAUSE else "resume")
            for name in names:
                rec = book.records[name]
                if transitions.switch(rec, how):
                    if how is transitions.PAUSE:
                        self._executor.suspend(handle_of(rec))
                    else:
                        self._executor.resume(handle_of(rec))
                book.commit(rec)

    async def preempt(self, name: str, *, dry_run: bool = False) -> list[str]:
        """Refused: only a running scheduler stops jobs to make room (and starts the job)."""
        raise GtuiError(
            f"no scheduler runs {self.queue_path.name}: start one (gtui run) to make room for "
            f"{name}; it preempts by itself where the queue allows it"
        )

    async def retry(self, names: Sequence[str]) -> None:
        with self._book() as (book, _settings):
            transitions.check_retry(book.require, names)
            for name in names:
                rec = book.records[name]
                transitions.retry(rec)
                book.commit(rec)
                for drec in transitions.unblocked_by(name, book.order, book.specs, book.records):
                    book.commit(drec)

    async def clear_quarantine(self, gpus: Sequence[int] | None = None) -> list[int]:
        with self._book() as (book, _settings):
            return Quarantine(book.store).clear(gpus)

    async def pause_queue(self) -> None:
        with self._book() as (book, _settings):
            book.store.set_meta("paused", "1")

    async def resume_queue(self) -> None:
        with self._book() as (book, _settings):
            book.store.set_meta("paused", "0")

    async def add(self, fields: dict[str, object]) -> str:
        """With no scheduler, adding is writing the file; nothing else to tell."""
        from gtui.core.queue.writeback import append_job

        return append_job(self.queue_path, dict(fields))

    async def add_many(self, many: Sequence[dict[str, object]]) -> list[str]:
        """With no scheduler, adding is one edit of the file."""
        from gtui.core.queue.writeback import append_jobs

        return append_jobs(self.queue_path, [dict(f) for f in many])

    async def reload(self) -> None:
        """Nothing to tell: the next scheduler reads the queue file as it is."""

    async def edit(self, name: str, fields: dict[str, object]) -> None:
        """The job's keys changed in the file, if its saved state allows it (as a scheduler
        checks), under the queue lock so that none starts meanwhile."""
        from gtui.core.queue.writeback import update_job

        with self._book() as (book, _settings):
            transitions.check(book.require, [name], transitions.why_not_edit)
            update_job(self.queue_path, name, dict(fields))

    async def remove(self, name: str) -> None:
        from gtui.core.queue.writeback import remove_job

        with self._book() as (book, _settings):
            transitions.check(book.require, [name], transitions.why_not_remove)
            remove_job(self.queue_path, name)

    async def move(self, name: str, where: Where) -> None:
        """As a scheduler moves it: up or down past the next waiting job (the ended ones
        between stay where they are), or to the top."""
        from gtui.core.queue.writeback import Place, move_job, place_job

        with self._book() as (book, _settings):
            transitions.check(book.require, [name], transitions.why_not_move)
            if where == "top":
                move_job(self.queue_path, name, where)
                return
            live = book.records.live()
            other = transitions.move_target(
                name,
                -1 if where == "up" else 1,
                book.order,
                book.specs,
                lambda n: n in live and live[n].waiting,
            )
            if other is not None:
                place: Place = "before" if where == "up" else "after"
                place_job(self.queue_path, name, place, other)

    async def stop(self, *, kill: bool = False) -> None:
        """No scheduler runs the queue: there is none to stop."""
        raise GtuiError(f"no scheduler runs {self.queue_path.name}: nothing to stop")

    def status_chunks(self) -> Iterator[str]:
        """The status as JSON text, as a scheduler sends it."""
        yield json.dumps(status_from_store(self.paths.queue), separators=(",", ":"))

    async def repair(self) -> list[str]:
        """``gtui doctor --repair``: what a scheduler does at its start, and only that. A
        damaged database is set aside and rebuilt from its backup, the records are checked
        against the jobs' traces, and a backup of the result is written. Returns what was
        rebuilt, in words (none: nothing needed it)."""
        with self._book(repair=True):
            words = list(self._rebuilt)
        try:
            write_backup(self.paths.db)
        except StoreError as e:
            words.append(str(e))
        return words

    # ------------------------------------------------------------------ the store, locked
    @contextlib.contextmanager
    def _book(self, *, repair: bool = False) -> Iterator[tuple[JobBook, Settings]]:
        """The saved records, brought up to date, under the queue lock. ``repair``: a damaged
        database is rebuilt (gtui.core.state.backup) instead of refused."""
        check_trusted(self.queue_path)
        queue = load_queue(self.queue_path)
        _refuse_node_names_offline(queue)
        ensure_state_dir(self.paths)
        self.paths = register_queue(self.paths)
        lock = QueueLock(self.paths)
        lock.acquire()
        self._rebuilt = []
        try:
            if repair:
                opened = open_checked(self.paths.db)
                self._rebuilt += [opened.rebuilt] if opened.rebuilt else []
                store = opened.store
            else:
                store = Store(self.paths.db)
            with store:
                self._cluster = on_a_cluster(queue, store.get_meta("backend"))
                self._cluster_in_file = queue.settings.cluster_backend == "ray"
                book = JobBook(store, EventBus(), self.queue_path.name)
                book.apply(queue, initial=True)
                # What a scheduler would record first: the jobs that ended meanwhile (those on
                # a cluster's nodes are left to the cluster's scheduler).
                log_dir = self.paths.log_dir(queue.settings.log_dir)
                leave = {n for n in book.active_names() if on_node(book.records[n], self._cluster)}
                run_dir = None if self._cluster else self.paths.run_dir
                found = recover(book, self._executor, log_dir, leave, run_dir)
                for name, status in found.ended:
                    self._conclude(book, queue.settings, name, status, recovered=True)
                words = rebuilt_words(book, found.rebuilt)
                self._rebuilt += [words] if words else []
                yield book, queue.settings
        finally:
            lock.release()

    def _refuse_on_cluster(self, book: JobBook, names: Sequence[str], verb: str) -> None:
        """Before anything changes: a running job on a cluster's node is reached only through
        the scheduler that runs the queue there."""
        for name in names:
            rec = book.records[name]
            if on_node(rec, self._cluster):
                where = rec.node or "a node"
                run = f"gtui run {self.queue_path}"
                if not self._cluster_in_file:
                    run += " --backend ray"
                raise GtuiError(
                    f"{name} runs on {where} of the Ray cluster, which only the queue's "
                    f"scheduler can reach: start it with `{run}` (it re-adopts the running "
                    f"jobs), then {verb} {name} again"
                )

    def _conclude(
        self,
        book: JobBook,
        settings: Settings,
        name: str,
        status: ExitStatus,
        *,
        killed: bool = False,
        recovered: bool = False,
    ) -> None:
        rec = book.records[name]
        if name in book.pending_specs:
            book.specs[name] = book.pending_specs.pop(name)
        tail = outcome.log_tail(self._executor, rec.log)
        snapshot = GpuSnapshot(gpus=(), taken_at=0.0, source="none")
        outcome.conclude(
            rec,
            book.specs[name],
            status,
            tail,
            outcome.Rules(settings),
            snapshot,
            killed=killed,
            recovered=recovered,
        )
        book.commit(rec)
        if rec.final or name not in book.index:
            book.take_over_from_edit(rec)


def _refuse_node_names_offline(qf: QueueFile) -> None:
    """Node names need a cluster. With no scheduler to ask, only the file can say there is one
    (a `--backend ray` given to an earlier `gtui run` is not known here): refuse as `gtui run`
    and `gtui validate` do, rather than show a queue no server can place."""
    if qf.settings.cluster_backend != "ray":
        refuse_node_names(qf.path, qf.settings)


# What a command given with no scheduler says of a job on a cluster's node.
ON_CLUSTER = (
    "as last recorded, on a cluster node: only the cluster's scheduler can tell how it stands "
    "(gtui run re-adopts it)"
)


def on_a_cluster(qf: QueueFile, last_backend: str | None) -> bool:
    """Whether the queue's jobs may run on a cluster: its file says so, or the last scheduler
    ran them there (``gtui run --backend ray``, kept in the store). Either is enough: a local
    job taken for a cluster's is only left as recorded, the converse would start one twice."""
    return "ray" in (last_backend, qf.settings.cluster_backend)


def on_node(rec: JobRecord, cluster: bool) -> bool:
    """A job that runs, or may run, on a cluster's node: only the cluster's scheduler can tell
    how it stands, never this machine's executor (a pid there means nothing here)."""
    return rec.active and (cluster or rec.node is not None)


def status_from_store(queue: Path) -> dict[str, Any]:
    """What the last scheduler left: the queue file's jobs with their stored records, each as
    it really stands (a job recorded as running whose process ended is shown ended)."""
    paths = queue_paths(queue)
    qf = load_queue(paths.queue)
    _refuse_node_names_offline(qf)
    refuse_foreign_state(paths)
    store = open_store_readonly(paths.db)
    records: dict[str, JobRecord] = store.load() if store else {}
    meta = {
        k: (store.get_meta(k) if store else None)
        for k in (
            "paused",
            "gpus",
            "scheduler_pid",
            "scheduler_since",
            "scheduler_stopped",
            "quarantined",
            "backend",
        )
    }
    if store:
        store.close()
    holder = QueueLock(paths).holder()
    scheduler: dict[str, Any] = {
        "running": bool(holder),
        "pid": holder or _number(meta["scheduler_pid"], int),
        "since": _number(meta["scheduler_since"], float),
        "stopped": None if holder else _number(meta["scheduler_stopped"], float),
    }
    state = stopped_state(holder) if holder else None
    if holder and state is not None:
        # It holds the queue and runs nothing (Ctrl-Z, `kill -STOP`): the saved state is all
        # there is to show, and how to let it go on.
        scheduler["not_answering"] = stopped_words(paths, holder, state)
    cluster = on_a_cluster(qf, meta["backend"])

    def shown(rec: JobRecord) -> JobRecord:
        if holder:
            return rec
        if on_node(rec, cluster):
            return dataclasses.replace(rec, warnings=[*rec.warnings, ON_CLUSTER])
        return settled(rec)

    views = []
    for i, spec in enumerate(qf.jobs):
        rec = records.get(spec.name) or JobRecord(name=spec.name, mem_mib=spec.mem_mib)
        views.append(JobView(spec=spec, record=shown(rec), order=i))
    in_file = {s.name for s in qf.jobs}
    for name, rec in records.items():
        if rec.active and name not in in_file:
            views.append(
                JobView(spec=JobSpec(name=name, cmd=""), record=shown(rec), order=len(views))
            )
    try:
        gpus = json.loads(meta["gpus"] or "[]")
    except ValueError:
        gpus = []
    doc = status_dict(paths.queue, meta["paused"] == "1", gpus, views, scheduler)
    quarantined = Quarantine(None)
    quarantined.gpus = parse_quarantine(meta["quarantined"])
    doc["quarantined"] = {str(g): why for g, why in sorted(quarantined.gpus.items())}
    return doc


def _number(text: str | None, kind: type[int] | type[float]) -> Any:
    try:
        return kind(text) if text else None
    except ValueError:
        return None


__all__ = ["GtuiError", "StoreClient", "status_from_store"]
