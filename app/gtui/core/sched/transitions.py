"""What a person's command does to the jobs' records: one implementation of every transition.

The scheduler and the no-scheduler commands (app/gtui/core/control/offline.py) both call these; the
caller commits what changed and does what needs a process (a signal, a kill) through its
executor. Every name is checked before anything changes: a typo in the third name of
``gtui pause a b c`` changes nothing.

Each ``why_not_*`` is the one rule for whether a command applies to a job: None when it does,
else the sentence that says why not. The checks here raise it, and the dashboard asks the same
function before it offers a form or a dialog, and shows the same words.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from gtui.core.errors import GtuiError
from gtui.core.model import FINAL_STATES, Diagnosis, JobRecord, JobSpec, JobState

Require = Callable[[str], JobRecord]  # the record of a name, or a GtuiError naming the queue


def _refuse(rec: JobRecord, why: str) -> str:
    return f"{rec.name} is {rec.state.value}: {why}"


def why_not_kill(rec: JobRecord) -> str | None:
    if not rec.active and not rec.waiting:
        return _refuse(rec, "there is nothing to kill")
    return None


def why_not_edit(rec: JobRecord) -> str | None:
    """A waiting job takes the edit when it starts, an ended one when it is run again
    (``retry``); a running or suspended one keeps the command it started with."""
    if rec.active:
        return _refuse(rec, "it keeps the command it started with; kill it first (x), then edit")
    return None


def why_not_move(rec: JobRecord) -> str | None:
    if not rec.waiting:
        return _refuse(rec, "only waiting (queued or held) jobs can be moved")
    return None


def why_not_remove(rec: JobRecord) -> str | None:
    if rec.active:
        return _refuse(rec, "kill it first (x)")
    return None


def why_not_retry(rec: JobRecord) -> str | None:
    if rec.state not in FINAL_STATES:
        return _refuse(rec, "only finished jobs can be retried")
    return None


WhyNot = Callable[[JobRecord], str | None]


def check(require: Require, names: Sequence[str], why_not: WhyNot) -> None:
    """Raise the first refusal among ``names`` before anything changes."""
    for name in names:
        why = why_not(require(name))
        if why is not None:
            raise GtuiError(why)


def check_kill(require: Require, names: Sequence[str]) -> None:
    check(require, names, why_not_kill)


def kill_waiting(rec: JobRecord) -> None:
    """A job that never started is taken out of the run."""
    rec.state = JobState.KILLED
    rec.ended_at = time.time()
    rec.reason = ""
    rec.diagnosis = Diagnosis("killed_by_user", "removed from the run by you", "retry")


# (waiting from, waiting to, active from, active to, refusal) for pause and resume
PAUSE = (
    JobState.QUEUED,
    JobState.HELD,
    JobState.RUNNING,
    JobState.SUSPENDED,
    "only queued or running jobs pause",
)
RESUME = (
    JobState.HELD,
    JobState.QUEUED,
    JobState.SUSPENDED,
    JobState.RUNNING,
    "only held or suspended jobs resume",
)
Switch = tuple[JobState, JobState, JobState, JobState, str]


def why_not_switch(rec: JobRecord, how: Switch) -> str | None:
    waiting_from, _, active_from, _, refusal = how
    if rec.state not in (waiting_from, active_from):
        return _refuse(rec, refusal)
    return None


def check_switch(require: Require, names: Sequence[str], how: Switch) -> None:
    check(require, names, lambda rec: why_not_switch(rec, how))


def switch(rec: JobRecord, how: Switch) -> bool:
    """Pause or resume one job's record. True: its process must be signalled too."""
    waiting_from, waiting_to, _active_from, active_to, _ = how
    if rec.state == waiting_from:
        rec.state = waiting_to
        rec.reason = "held by you" if waiting_to == JobState.HELD else ""
        return False
    rec.state = active_to
    return True


def check_retry(require: Require, names: Sequence[str]) -> None:
    check(require, names, why_not_retry)


def retry(rec: JobRecord) -> None:
    """Queue a finished job again, now, with a fresh retry budget (attempt numbers go on, so
    log names stay unique)."""
    rec.state = JobState.QUEUED
    rec.queued_since = time.time()
    rec.reason = ""
    rec.diagnosis = None
    rec.quick_fails, rec.retry_at = 0, None  # the user asked: now, not after a wait
    rec.first_attempt = rec.attempt + 1


def move_target(
    name: str,
    step: int,
    order: Sequence[str],
    specs: Mapping[str, JobSpec],
    waiting: Callable[[str], bool],
) -> str | None:
    """The waiting job that ``name`` moves past, one up (``step`` -1) or down (+1): the nearest
    one of another ``[[jobs]]`` entry, over every ended job between (moving past those changes
    nothing that runs); None when no waiting job is there."""
    entry = specs[name].entry
    i = order.index(name) + step
    while 0 <= i < len(order):
        other = order[i]
        if specs[other].entry != entry and waiting(other):
            return other
        i += step
    return None


def unblocked_by(
    name: str,
    order: Sequence[str],
    specs: Mapping[str, JobSpec],
    records: Mapping[str, JobRecord],
) -> list[JobRecord]:
    """The blocked jobs that wait on ``name``, queued again now that it is retried."""
    out = []
    for dependent in order:
        if name not in specs[dependent].after:
            continue  # most jobs: no record read (an ended one's lives in the store)
        drec = records[dependent]
        if drec.state == JobState.BLOCKED:
            drec.state = JobState.QUEUED
            drec.reason = ""
            drec.queued_since = time.time()
            out.append(drec)
    return out
