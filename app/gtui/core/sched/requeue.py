"""One primitive for "stopped, not its fault, back to the queue, no retry spent".

A preemption, a reboot and a job's own ``requeue_exit`` code all end an attempt the same way
(:func:`requeue`): the job waits again at its place, the ended attempt is recorded with the
cause (the attempts history shows it as that attempt's state), no retry is spent, and its next
attempt is told it resumes (:func:`resume_env`: ``GTUI_RESUME=1``, ``GTUI_PREEMPTED=<n>``).
The causes are named once (``model.Cause``, below every layer, so the report can count
them); a new one is a new member.

Pure record logic: no process, no store.
"""

from __future__ import annotations

import time

from gtui.core.exec.base import ExitStatus
from gtui.core.gpus.health import REQUEUE_HINT, fault_gpu
from gtui.core.model import (
    NO_RESUME,
    Cause,
    Diagnosis,
    JobRecord,
    JobSpec,
    JobState,
    Resume,
    Settings,
)
from gtui.core.procstat import boot_id

__all__ = [
    "REQUEUE_CAP",
    "Cause",
    "requeue",
    "requeue_note",
    "resume_env",
    "resume_of",
    "shown_state",
    "shown_word",
]

# How many times in a row a job may ask to be queued again with its requeue_exit code before
# that exit is a failure: a loop that never ends is a bug, not a checkpoint.
REQUEUE_CAP = 100


_HINTS = {
    Cause.PREEMPTED: "it starts again by itself (GTUI_RESUME=1): resume from your checkpoint",
    Cause.INTERRUPTED: "the machine rebooted; it starts again by itself with GTUI_RESUME=1",
    Cause.REQUEUED: "it asked to continue; it starts again by itself with GTUI_RESUME=1",
    Cause.GPU_FAULT: REQUEUE_HINT,
}


def resume_of(spec: JobSpec, settings: Settings) -> Resume:
    """The job's own resume keys, else the queue's."""
    return spec.resume if spec.resume is not None else (settings.resume or NO_RESUME)


def requeue(
    rec: JobRecord,
    cause: Cause,
    *,
    by: str | None = None,
    why: str = "",
    now: float | None = None,
) -> None:
    """``rec``'s attempt ended by ``cause``: it waits again, with no retry spent (its retry
    budget moves on by the attempt), and its next attempt resumes. ``by``: the job that
    preempted it; ``why``: what the health watch read on its GPU. The caller commits and
    records the attempt."""
    now = time.time() if now is None else now
    rec.state = JobState.QUEUED
    if rec.ended_at is None:
        rec.ended_at = now
    rec.first_attempt = rec.attempt + 1  # this attempt spent no retry
    rec.queued_since = now
    rec.retry_at = None
    rec.quick_fails = 0
    rec.requeued_as = cause.value
    rec.preempt_for = None
    rec.preempt_signalled = False
    if cause is Cause.PREEMPTED:
        rec.preemptions += 1
        rec.preempted_by = by
        rec.preempted_at = now
        who = f" by {by}" if by else ""
        line = f"preempted{who} at {time.strftime('%H:%M:%S', time.localtime(now))}"
    elif cause is Cause.INTERRUPTED:
        line = "the machine rebooted while it ran"
    elif cause is Cause.GPU_FAULT:
        line = why
    else:
        rec.requeues += 1
        line = f"exited {rec.exit_code} (its requeue_exit): queued again ({rec.requeues} in a row)"
    rec.diagnosis = Diagnosis(cause.value, line, _HINTS[cause])
    rec.reason = ""  # why it waits now: the next pass says


def requeue_exit_of(rec: JobRecord, resume: Resume) -> bool:
    """Whether this end is the job asking to be queued again (its ``requeue_exit`` code, under
    :data:`REQUEUE_CAP` times in a row)."""
    code = resume.requeue_exit
    return (
        code is not None
        and rec.exit_code == code
        and rec.signal is None
        and (rec.requeues < REQUEUE_CAP)
    )


def over_cap(rec: JobRecord, resume: Resume) -> Diagnosis | None:
    """The failure of a job that asked once too often (its requeue_exit past the cap)."""
    code = resume.requeue_exit
    if code is None or rec.exit_code != code or rec.signal is not None:
        return None
    return Diagnosis(
        "requeue_cap",
        f"exited {code} (its requeue_exit) {rec.requeues + 1} times in a row; "
        f"the cap is {REQUEUE_CAP}",
        "a checkpoint loop that never finishes: fix it, then retry it (r / gtui retry)",
    )


def ended_otherwise(rec: JobRecord) -> None:
    """The attempt ended its own way (done, failed, killed): no resume cause stands."""
    rec.requeued_as = None
    rec.requeues = 0
    rec.preempt_for = None
    rec.preempt_signalled = False


def after_end(
    rec: JobRecord,
    resume: Resume,
    status: ExitStatus,
    settings: Settings,
    *,
    killed: bool,
    timed_out: bool,
    recovered: bool,
) -> None:
    """After ``outcome.conclude``: an end that was not the job's fault queues it again (a
    preemption, its record naming whom it made room for; a reboot under it; its own
    ``requeue_exit`` code), past the cap that code is a failure; any other end clears the last
    such cause."""
    if rec.preempt_for is not None and not killed and not finished_first(rec, status):
        requeue(rec, Cause.PREEMPTED, by=rec.preempt_for)
    elif recovered and rebooted(rec, status, settings):
        requeue(rec, Cause.INTERRUPTED)
    elif not (killed or timed_out) and requeue_exit_of(rec, resume):
        requeue(rec, Cause.REQUEUED)
    elif not (killed or timed_out) and (capped := over_cap(rec, resume)) is not None:
        rec.state, rec.diagnosis, rec.retry_at = JobState.FAILED, capped, None
        ended_otherwise(rec)
    else:
        ended_otherwise(rec)


def finished_first(rec: JobRecord, status: ExitStatus) -> bool:
    """Whether a run being stopped for a preemption ended done before its signal was sent
    (a scheduler killed between the stop's intent and its signal, the job finishing while no
    scheduler ran): it is done, never run again. Once the signal is sent, any end is the
    preemption's, even 0 (a job may save and exit 0)."""
    return not rec.preempt_signalled and status.exit_code == 0 and status.signal is None


def rebooted(rec: JobRecord, status: ExitStatus, settings: Settings) -> bool:
    """Whether a run found ended at a scheduler's start was stopped by a reboot: it started
    under another boot id and left no exit code of its own (a job that ended by itself before
    the reboot keeps that end). ``requeue_on_reboot = false`` keeps it a plain end."""
    if not settings.requeue_on_reboot or rec.boot_id is None or status.exit_code is not None:
        return False
    now = boot_id()
    return now is not None and now != rec.boot_id


def resume_env(rec: JobRecord) -> dict[str, str]:
    """What an attempt that follows a requeue is told: resume from your checkpoint."""
    if rec.requeued_as is None and not rec.preemptions:
        return {}
    env = {"GTUI_RESUME": "1"} if rec.requeued_as is not None else {}
    env["GTUI_PREEMPTED"] = str(rec.preemptions)
    return env


# The causes a waiting job shows as its state word (the words of the docs' state table). A GPU
# fault is not one of them: the job waits as any queued job, and its note says which GPU failed.
WORD_CAUSES = frozenset({Cause.PREEMPTED.value, Cause.INTERRUPTED.value, Cause.REQUEUED.value})


def shown_word(state: str, requeued_as: str | None) -> str:
    """A job's state word as shown, from its state and cause (a record's, or a status
    document's fields): a queued job stopped through no fault of its own shows why
    (``preempted``, ``interrupted``, ``requeued``); one whose GPU failed shows ``queued``."""
    if state == JobState.QUEUED.value and requeued_as in WORD_CAUSES:
        return str(requeued_as)
    return state


def shown_state(rec: JobRecord) -> str:
    """:func:`shown_word` of a record."""
    return shown_word(rec.state.value, rec.requeued_as)


def requeue_note(rec: JobRecord) -> str | None:
    """What stopped a queued job through no fault of its own, for its note (None if nothing
    did): ``requeued: GPU 0 fault`` after a GPU fault (the diagnosis keeps the whole sentence),
    else its diagnosis line (``preempted by urgent-eval at 14:02:11``)."""
    if rec.state is not JobState.QUEUED or not rec.requeued_as or rec.diagnosis is None:
        return None
    if rec.requeued_as == Cause.GPU_FAULT.value:
        return f"requeued: {fault_gpu(rec.diagnosis.line) or 'GPU'} fault"
    return rec.diagnosis.line
