"""The job commands when no scheduler runs: change the saved state directly.

``gtui pause/resume/retry/kill`` normally go through the running scheduler (app/core/control.py).
With none running they still work here, on the state store, under the queue lock (so no
scheduler starts half-way), with the same transitions and messages as the engine's commands:

- ``pause``: queued -> held; ``resume``: held -> queued; ``retry``: finished -> queued (a fresh
  retry budget, dependents blocked by it queued again); ``kill``: waiting -> killed (it will not
  start; ``retry`` queues it again). The queue's pause is the store's meta ``paused``, which the
  engine honours when it starts.
- A job still running from a scheduler that stopped (jobs outlive gtui) is acted on for real:
  its process tree is found by pid + create time, as the engine re-adopts it, then killed
  (SIGTERM, SIGKILL after ``kill_grace``), suspended (SIGSTOP) or continued (SIGCONT), and its
  new state saved. A job that ended while nobody watched is left for the next scheduler, which
  records how it ended.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gtui.core import runner
from gtui.core.errors import GtuiError
from gtui.core.model import FINAL_STATES, Diagnosis, JobRecord, JobSpec, JobState, Settings
from gtui.core.paths import QueuePaths
from gtui.core.queuefile import load_queue
from gtui.core.store import Store

KILLED_WAITING = Diagnosis("killed_by_user", "removed from the run by you", "retry")
KILLED_RUNNING = Diagnosis("killed_by_user", "killed by you", "retry it with r / gtui retry")


@dataclass
class OfflineQueue:
    """The queue file's jobs and their saved records, as a scheduler would start from."""

    paths: QueuePaths
    settings: Settings
    order: list[str]
    specs: dict[str, JobSpec]
    records: dict[str, JobRecord]

    def require(self, name: str) -> JobRecord:
        rec = self.records.get(name)
        if rec is None:
            known = ", ".join(self.order[:8]) + (", ..." if len(self.order) > 8 else "")
            raise GtuiError(
                f"no job named {name!r} in {self.paths.queue.name}"
                + (f" (jobs: {known})" if known else " (the queue is empty)")
            )
        return rec


def load(paths: QueuePaths, store: Store) -> OfflineQueue:
    queue = load_queue(paths.queue)
    stored = store.load()
    specs = {j.name: j for j in queue.jobs}
    records: dict[str, JobRecord] = {}
    for spec in queue.jobs:
        records[spec.name] = stored.get(spec.name) or JobRecord(
            name=spec.name, mem_mib=spec.mem_mib
        )
    for name, rec in stored.items():
        if name not in records and rec.active:  # removed from the file but still running
            records[name] = rec
    return OfflineQueue(paths, queue.settings, [j.name for j in queue.jobs], specs, records)


def _alive(rec: JobRecord) -> bool:
    return (
        rec.pid is not None
        and rec.create_time is not None
        and runner.is_alive(rec.pid, rec.create_time)
    )


def _gone(name: str) -> str:
    return (
        f"{name} ended while no scheduler ran; the next scheduler of this queue records how "
        "(start one with `gtui run` or `gtui`)"
    )


async def apply(paths: QueuePaths, op: str, names: Sequence[str]) -> list[str]:
    """Do ``op`` on ``names`` with no scheduler; returns one line per job acted on.

    The caller holds the queue lock. Raises GtuiError (nothing changed) for an unknown name or
    a job in the wrong state.
    """
    with Store(paths.db) as store:
        if op in ("pause_queue", "resume_queue"):
            store.set_meta("paused", "1" if op == "pause_queue" else "0")
            return ["paused the queue" if op == "pause_queue" else "resumed the queue"]
        q = load(paths, store)
        recs = [q.require(n) for n in names]
        check = _CHECKS[op]
        for rec in recs:
            check(rec)
        lines: list[str] = []
        for rec in recs:
            lines.append(await _ACTIONS[op](q, store, rec))
        return lines


# ------------------------------------------------------------------ state checks (all first)
def _check_kill(rec: JobRecord) -> None:
    if rec.final:
        raise GtuiError(f"{rec.name} is {rec.state.value}: there is nothing to kill")


def _check_pause(rec: JobRecord) -> None:
    if rec.state not in (JobState.QUEUED, JobState.RUNNING):
        raise GtuiError(f"{rec.name} is {rec.state.value}: only queued or running jobs pause")


def _check_resume(rec: JobRecord) -> None:
    if rec.state not in (JobState.HELD, JobState.SUSPENDED):
        raise GtuiError(f"{rec.name} is {rec.state.value}: only held or suspended jobs resume")


def _check_retry(rec: JobRecord) -> None:
    if rec.state not in FINAL_STATES:
        raise GtuiError(f"{rec.name} is {rec.state.value}: only finished jobs can be retried")


# ------------------------------------------------------------------ actions
async def _kill(q: OfflineQueue, store: Store, rec: JobRecord) -> str:
    if rec.waiting:
        rec.state = JobState.KILLED
        rec.ended_at = time.time()
        rec.reason = ""
        rec.diagnosis = KILLED_WAITING
        store.save(rec)
        return f"killed {rec.name}"
    if not _alive(rec):
        return _gone(rec.name)
    assert rec.pid is not None
    await runner.kill_tree(rec.pid, q.settings.kill_grace_s)
    status = runner.read_status_file(Path(rec.status_file)) if rec.status_file else None
    rec.exit_code = status.exit_code if status else None
    rec.signal = status.signal if status else None
    rec.state = JobState.KILLED
    rec.ended_at = time.time()
    rec.diagnosis = KILLED_RUNNING
    store.save(rec)
    return f"killed {rec.name}"


async def _pause(q: OfflineQueue, store: Store, rec: JobRecord) -> str:
    if rec.state == JobState.QUEUED:
        rec.state = JobState.HELD
        rec.reason = "held by you"
    elif not _alive(rec):
        return _gone(rec.name)
    else:
        assert rec.pid is not None
        runner.suspend(rec.pid)
        rec.state = JobState.SUSPENDED
    store.save(rec)
    return f"paused {rec.name}"


async def _resume(q: OfflineQueue, store: Store, rec: JobRecord) -> str:
    if rec.state == JobState.HELD:
        rec.state = JobState.QUEUED
        rec.reason = ""
    elif not _alive(rec):
        return _gone(rec.name)
    else:
        assert rec.pid is not None
        runner.resume(rec.pid)
        rec.state = JobState.RUNNING
    store.save(rec)
    return f"resumed {rec.name}"


async def _retry(q: OfflineQueue, store: Store, rec: JobRecord) -> str:
    now = time.time()
    rec.state = JobState.QUEUED
    rec.queued_since = now
    rec.reason = ""
    rec.diagnosis = None
    rec.first_attempt = rec.attempt + 1  # a manual retry gets a fresh budget
    changed = [rec]
    for name in q.order:
        dep = q.records[name]
        if dep.state == JobState.BLOCKED and rec.name in q.specs[name].after:
            dep.state = JobState.QUEUED
            dep.reason = ""
            dep.queued_since = now
            changed.append(dep)
    store.save_many(changed)
    return f"queued {rec.name} again"


_CHECKS = {
    "kill": _check_kill,
    "pause": _check_pause,
    "resume": _check_resume,
    "retry": _check_retry,
}
_ACTIONS = {"kill": _kill, "pause": _pause, "resume": _resume, "retry": _retry}
