"""How a job's end becomes its next state: done, failed (and why), unknown, or queued again.

Pure record logic, shared by the scheduler and by the commands that run with no scheduler
(``gtui kill`` on a queue nobody runs records the end the same way). It never sees a pid: the
executor said how the job ended, and gave the end of its log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gtui.core.diagnosis.diagnose import (
    TAIL_BYTES,
    clean_log,
    diagnose,
    full_disk,
    local_search,
    oom_peak_mib,
    oom_retry_mem,
)
from gtui.core.diagnosis.hints import setup_advice
from gtui.core.diagnosis.oom import host_use_text
from gtui.core.exec.base import Executor, ExitStatus
from gtui.core.gpus.snapshot import GpuSnapshot
from gtui.core.model import Diagnosis, DiagnosisRule, JobRecord, JobSpec, JobState, Settings
from gtui.core.sched.jobsetup import setup_of
from gtui.core.sched.policy import format_wait
from gtui.core.state.status import ended_at, unknown_diagnosis
from gtui.core.units import plural

QUICK_RUN_S = 60.0  # a failed run shorter than this counts toward the retry back-off
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 300.0
START_RETRY_FIRST_S = 0.5  # a start put off for want of a process: first wait, doubling
START_RETRY_MAX_S = 10.0
NOT_STARTED = "not_started"  # the diagnosis of a start put off (defer_start)
END_CLOCK_SLACK_S = 0.05  # a status file's mtime may lag the real end by a clock tick (4-10 ms)

Matcher = Callable[[str, Sequence[str]], "tuple[int, int] | None"]


@dataclass
class Rules:
    """The user's [[diagnose]] rules as this scheduler runs them (some may be off)."""

    settings: Settings
    off: set[DiagnosisRule] = field(default_factory=set)
    matcher: Matcher | None = None
    on_overrun: Callable[[DiagnosisRule], None] | None = None

    def active(self) -> list[DiagnosisRule]:
        return [r for r in self.settings.diagnose if r not in self.off]


def log_tail(executor: Executor, log: str | None) -> str:
    """The cleaned end of a job's log, read by byte offset through its executor."""
    if not log:
        return ""
    size = executor.log_size(log)
    if not size:
        return ""
    start = max(0, size - TAIL_BYTES)
    data = executor.read_log(log, start, TAIL_BYTES)
    if start:  # the first line is cut: drop it
        data = data[data.find(b"\n") + 1 :]
    return clean_log(data.decode("utf-8", errors="replace"))


def conclude(
    rec: JobRecord,
    spec: JobSpec,
    status: ExitStatus,
    tail: str,
    rules: Rules,
    snapshot: GpuSnapshot,
    *,
    killed: bool = False,
    timed_out: bool = False,
    recovered: bool = False,
) -> None:
    """Set ``rec`` from how its run ended. A failed job with retries left goes back to the
    queue, maybe after a back-off (``rec.retry_at``) and with more memory after a CUDA OOM."""
    rec.exit_code = status.exit_code
    rec.signal = status.signal
    # When it really ended (its status file), not when we noticed: a scheduler that was
    # stopped, or not running, may notice long after.
    if status.ended_at is not None:
        rec.ended_at = status.ended_at
    else:
        rec.ended_at = ended_at(rec) if recovered else time.time()
    if killed:
        rec.state = JobState.KILLED
        rec.diagnosis = diagnose(
            status.exit_code, status.signal, tail, killed_by_user=True
        ) or Diagnosis("killed_by_user", "killed by you", "retry it with r / gtui retry")
        return
    if status.not_started is not None:  # its wrapper could not fork it: it never ran
        defer_start(rec, status.not_started, 0, ran_wrapper=True)
        return
    if status.exit_code == 0 and status.signal is None:
        rec.state = JobState.DONE
        rec.diagnosis = None
        rec.quick_fails, rec.retry_at = 0, None
        return
    if status.lost is not None:
        # Its node was declared dead: failed with that reason, never done; retried
        # elsewhere when it has retries left.
        rec.state = JobState.FAILED
        rec.diagnosis = Diagnosis(
            "node_lost", status.lost, "its node is gone; retry it (r / gtui retry) on another"
        )
        if retry_left(spec, rec):
            rec.state = JobState.QUEUED
            rec.queued_since = time.time()
        return
    if status.exit_code is None and status.signal is None:
        # No readable exit status: "unknown", never "failed", never a silent re-run.
        rec.state = JobState.UNKNOWN
        rec.diagnosis = unknown_diagnosis(rec)
        if recovered:
            rec.warnings = [*rec.warnings, "ended while gtui was not running"]
        return
    diagnosis = diagnose(
        status.exit_code,
        status.signal,
        tail,
        rules=rules.active(),
        timed_out=timed_out,
        on_overrun=rules.on_overrun,
        matcher=rules.matcher or local_search,
    )
    if diagnosis is not None and diagnosis.kind == "error" and rec.log:
        diagnosis = full_disk(Path(rec.log)) or diagnosis  # its error was not written
    if diagnosis is not None and diagnosis.kind == "host_oom":  # what it asked, what it used
        said = host_use_text(spec.ram_mib, spec.ram_auto, rec.host_peak_mib)
        diagnosis = Diagnosis(diagnosis.kind, diagnosis.line, diagnosis.hint + said)
    diagnosis = setup_advice(diagnosis, setup_of(spec, rules.settings) is not None)
    rec.diagnosis = diagnosis
    rec.state = JobState.FAILED
    if recovered:
        rec.warnings = [*rec.warnings, "ended while gtui was not running"]
    if retry_left(spec, rec) and not timed_out:
        if diagnosis is not None and diagnosis.kind == "cuda_oom":
            grow_after_oom(rec, diagnosis, rules.settings, snapshot)
        rec.state = JobState.QUEUED
        rec.queued_since = time.time()
        back_off(rec)


def ended_in_time(status: ExitStatus, deadline: float) -> bool:
    """Whether the job's own record says it ended before its time limit's ``deadline``: then it
    is no timeout, whenever the scheduler noticed (one stopped past the deadline finds the
    limit's timer and the exit in the same turn). A file's time is the kernel's coarse clock,
    up to a tick behind: an end within :data:`END_CLOCK_SLACK_S` of the deadline is no proof."""
    return status.ended_at is not None and status.ended_at + END_CLOCK_SLACK_S < deadline


def retry_left(spec: JobSpec, rec: JobRecord) -> bool:
    return spec.retries < 0 or rec.attempt - rec.first_attempt < spec.retries


def back_off(rec: JobRecord) -> None:
    """A job retried after a failure that came quickly waits before its next try: at once
    the first time, then 1 s doubling to BACKOFF_MAX_S; a run over QUICK_RUN_S resets it.
    `retries = -1` on a job that fails at once restarted it ~266 times a second."""
    ran = (rec.ended_at or 0.0) - (rec.started_at or 0.0)
    rec.quick_fails = rec.quick_fails + 1 if ran < QUICK_RUN_S else 0
    if rec.quick_fails < 2:
        rec.retry_at = None
        return
    delay = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** (rec.quick_fails - 2))
    rec.retry_at = time.time() + delay


def grow_after_oom(
    rec: JobRecord, diagnosis: Diagnosis, settings: Settings, snapshot: GpuSnapshot
) -> None:
    totals = [g.mem_total_mib for g in snapshot.gpus if g.index in rec.gpus and g.mem_total_mib]
    peak = max(filter(None, [rec.peak_mib, oom_peak_mib(diagnosis.line)]), default=None)
    grown = oom_retry_mem(rec.mem_mib, settings.oom_grow, peak, min(totals, default=None))
    if grown is not None and grown != rec.mem_mib:
        rec.warnings = [
            *rec.warnings,
            f"CUDA OOM: the retry asks {grown} MiB instead of {rec.mem_mib or 'the whole GPU'}",
        ]
        rec.mem_mib = grown


def defer_start(rec: JobRecord, why: str, tries: int, *, ran_wrapper: bool) -> None:
    """No process could be made for the job (the user's process limit, memory short): it waits
    and is tried again after a back-off, :data:`START_RETRY_FIRST_S` doubling to
    :data:`START_RETRY_MAX_S` over ``tries`` in a row, failing nothing and spending no retry.
    ``ran_wrapper``: its wrapper started (the attempt's number is used, its retry is not)."""
    rec.state = JobState.QUEUED
    if ran_wrapper:
        rec.first_attempt += 1
    rec.retry_at = time.time() + min(START_RETRY_MAX_S, START_RETRY_FIRST_S * 2 ** max(0, tries))
    rec.diagnosis = Diagnosis(
        NOT_STARTED,
        f"could not start it: {why}",
        "it starts by itself once processes are free; kill or pause it to stop that",
    )
    rec.reason = backoff_reason(rec, time.time())


def backoff_group(rec: JobRecord) -> str:
    """A job backing off, as the queue's summary counts it (its own reason has the time)."""
    if rec.diagnosis is not None and rec.diagnosis.kind == NOT_STARTED:
        return "start put off: no process could be made"
    return "backing off after quick failures"


def backoff_reason(rec: JobRecord, now: float) -> str:
    left = format_wait((rec.retry_at or now) - now)
    at = time.strftime("%H:%M:%S", time.localtime(rec.retry_at or now))
    if rec.diagnosis is not None and rec.diagnosis.kind == NOT_STARTED:
        return f"{rec.diagnosis.line}; trying again at {at} (in {left}), no retry spent"
    return (
        f"retry at {at} (in {left}): failed {rec.quick_fails} times in a row within a minute; "
        "kill or pause it to stop"
    )


def launch_failed(rec: JobRecord, message: str) -> None:
    """The executor could not start the job: failed, with what to do about it."""
    rec.state = JobState.FAILED
    rec.ended_at = time.time()
    rec.diagnosis = Diagnosis(kind="launch", line=message, hint=_launch_hint(message))


def leftover_warning(rec: JobRecord, pids: Collection[int]) -> None:
    listed = list(pids)
    shown = ", ".join(map(str, listed[:5])) + (" ..." if len(listed) > 5 else "")
    rec.warnings = [
        *rec.warnings,
        f"ended but left {plural(len(listed), 'process', 'processes')} "
        f"running: pid {shown} (kill them yourself "
        "if they are not meant to outlive it; their GPU memory counts as another user's)",
    ]


def _launch_hint(message: str) -> str:
    lowered = message.lower()
    if lowered.startswith("env_file "):
        # (the path in the message is relative to the queue file's folder, resolved)
        return (
            "fix the file, or `env_file` (relative to the queue file's folder) in the queue "
            "file; the file is read again at each start, so a retry (r) sees the fix"
        )
    if "cannot create its log in" in lowered:
        # The path in the message is log_dir as resolved (relative to the queue file's folder,
        # not to where gtui was started): say which setting makes it.
        return (
            "that path is log_dir, relative to the queue file's folder (to the queue's state "
            "folder with GTUI_STATE_DIR set): make it a writable directory, or set log_dir in "
            "[settings] to one, then retry (r)"
        )
    if "no space" in lowered:
        return "the disk holding the log directory is full: free space, then retry (r)"
    if "permission" in lowered:
        return "gtui cannot write there: fix the permissions of log_dir or cwd, then retry (r)"
    if "cwd" in lowered or "directory" in lowered:
        return "fix the job's cwd in the queue file, then retry (r)"
    return "fix the cause above, then retry (r)"
