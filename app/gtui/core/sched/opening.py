"""What a scheduler's start opens, once it holds the queue's lock: the store, checked whole
(and its backups), the GPUs, for a queue run on a Ray cluster the cluster, the job book; and
the re-adoption of the jobs a scheduler before it left running."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gtui.core.bus import EventBus
from gtui.core.exec.base import Executor
from gtui.core.gpus.backend import open_backend
from gtui.core.gpus.reader import GpuReader
from gtui.core.gpus.snapshot import GpuBackend, GpuSnapshot
from gtui.core.paths import QueuePaths, ensure_state_dir, register_queue
from gtui.core.queue.queuefile import QueueFile
from gtui.core.queue.source import QueueSource
from gtui.core.sched.policy import pool_totals
from gtui.core.sched.recovery import rebuilt_words, recover
from gtui.core.sched.runs import JobRunner
from gtui.core.state.backup import Backups, open_checked
from gtui.core.state.book import JobBook
from gtui.core.state.store import Store


def lock_queue(paths: QueuePaths) -> tuple[QueuePaths, Any]:
    """Take the queue's lock (LockedError when another gtui holds it). The queue's identity,
    not its file name, keys it: after `mv q.toml q2.toml`, `gtui run q2.toml` meets the
    scheduler that runs q.toml. Returns the paths under that identity, and the lock."""
    from gtui.core.state.lock import QueueLock

    ensure_state_dir(paths)
    paths = register_queue(paths)
    lock = QueueLock(paths)
    lock.acquire()
    return paths, lock


def open_store(paths: QueuePaths, bus: EventBus) -> tuple[Store, Backups]:
    """The store, checked whole before anything starts: a damaged file is set aside and
    replaced by its backup (gtui.core.state.backup), said in the event log."""
    opened = open_checked(paths.db)
    if opened.rebuilt:
        rest = "the jobs' logs, exit-status files and processes make up the rest"
        bus.notice("warning", f"{opened.rebuilt}; {rest}")
    return opened.store, Backups(opened.store)


def open_ray(
    address: str, backend: GpuBackend | None, store: Store, fake: str | None, bus: EventBus
) -> tuple[Executor, GpuBackend]:
    """Jobs on a Ray cluster: Ray is imported here and only here. ``store`` keeps the nodes'
    names and GPU numbers for the next scheduler. Returns the cluster's executor and the
    GPU backend to read (``backend`` when one was given)."""
    from gtui.core.exec.ray import open_cluster

    executor, gpus = open_cluster(address, store)
    nodes = len(executor.cluster.live())
    bus.notice("info", f"Ray cluster at {address}: {nodes} node(s)")
    if fake and backend is None:
        bus.notice(
            "warning",
            f"simulated GPUs {fake!r} (fake_gpus, --fake-gpus) are for this machine only "
            "and not used on a Ray cluster: a node's GPUs are simulated by the "
            "GTUI_FAKE_GPUS of its own `ray start` (docs/cluster.md)",
        )
    return executor, backend or gpus


@dataclass
class Opened:
    """What ``open_queue`` opened: the scheduler's start keeps it all."""

    store: Store
    backups: Backups
    executor: Executor | None  # the cluster's, for a queue run on Ray
    reader: GpuReader
    snapshot: GpuSnapshot  # the first GPU read
    queue: QueueFile  # loaded against the GPUs read
    text: str
    book: JobBook
    paused: bool  # the queue's pause, as the last scheduler left it


def open_queue(
    paths: QueuePaths,
    source: QueueSource,
    bus: EventBus,
    queue: QueueFile,
    ray: bool,
    backend: GpuBackend | None,
    fake: str | None,
) -> Opened:
    """Open the store, the GPUs (and the cluster), load the queue against the GPUs read, and
    mark the store as this scheduler's; the lock is held already. What was opened is closed
    again when a step fails."""
    store: Store | None = None
    reader: GpuReader | None = None
    executor: Executor | None = None
    try:
        if ray:  # the store first: it keeps the nodes' GPU numbers (the records')
            store, backups = open_store(paths, bus)
            address = queue.settings.cluster_address
            executor, backend = open_ray(address, backend, store, fake, bus)
        if backend is None:
            backend = open_backend(fake, paths.queue.parent)
        reader = GpuReader(backend, bus)
        snapshot = backend.read(())
        queue, text = source.first(pool_totals(queue.settings, snapshot))
        # The two loads are done: the parse's ~1.5 KB a job goes before the records and
        # Candidates are made, which then take its freed memory instead of more (at 100,000
        # jobs the start's RSS stays at the parse's peak).
        source.forget()
        if store is None:
            store, backups = open_store(paths, bus)
        book = JobBook(store, bus, paths.queue.name)
        paused = store.get_meta("paused") == "1"
        store.set_meta("scheduler_pid", str(os.getpid()))
        # Which executor ran the jobs: a command given while no scheduler runs must not judge
        # a cluster's jobs from this machine (gtui.core.control.offline).
        store.set_meta("backend", "ray" if ray else "local")
    except BaseException:
        if store is not None:
            store.close()
        if reader is not None:
            reader.close()
        raise
    return Opened(store, backups, executor, reader, snapshot, queue, text, book, paused)


def readopt(
    book: JobBook,
    executor: Executor,
    runner: JobRunner,
    log_dir: Path,
    run_dir: Path | None,
    bus: EventBus,
    backups: Backups,
) -> None:
    """Re-adopt jobs still running, record those that ended while gtui was down, and never
    start a job twice; then the jobs' history (``mem = "auto"``, ``mem`` far from the last
    runs) and the back-offs under way. With ``run_dir`` (this machine) the records are first
    checked against the jobs' own traces (a lost or damaged database: sched.recovery)."""
    found = recover(book, executor, log_dir, run_dir=run_dir)
    runner.recover(found)
    words = rebuilt_words(book, found.rebuilt)
    if words:
        bus.notice("warning", words)
        backups.write()  # what was rebuilt is not lost again
    runner.use_history()
    now = time.time()
    for name, rec in book.records.live().items():  # back-offs under way
        if rec.waiting and rec.retry_at is not None and rec.retry_at > now:
            runner.arm_retry(name, rec.retry_at - now)
