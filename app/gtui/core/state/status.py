"""The ``gtui status --json`` document, built alike by a running engine and from the store."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gtui.core.api import JobView
from gtui.core.diagnosis.diagnose import read_log_tail
from gtui.core.exec.base import Executor, handle_of
from gtui.core.exec.local import LocalExecutor
from gtui.core.model import Diagnosis, JobRecord, JobState
from gtui.core.state.history import gpu_hours
from gtui.core.trackers import links_json


def _rounded(hours: float | None) -> float | None:
    """GPU-hours as shown: four decimals (0.36 s of one GPU), None kept."""
    return None if hours is None else round(hours, 4)


def job_dict(view: JobView) -> dict[str, Any]:
    rec = view.record
    d = rec.diagnosis
    return {
        "name": rec.name,
        "state": rec.state.value,
        "gpus": list(rec.gpus) if rec.active or rec.attempt else [],
        "mem_mib": rec.mem_mib,
        "attempt": rec.attempt,
        "exit_code": rec.exit_code,
        "signal": rec.signal,
        "started_at": rec.started_at,
        "ended_at": rec.ended_at,
        "log": rec.log,
        "reason": rec.reason if rec.waiting or rec.state.value == "blocked" else "",
        "reason_at": rec.reason_at if rec.waiting else None,
        "diagnosis": {"kind": d.kind, "line": d.line, "hint": d.hint} if d else None,
        "warnings": list(rec.warnings),
        # Estimates: filled by a running scheduler (sched/forecast.py), else None.
        "progress": None,
        "progress_text": None,
        "eta_s": None,
        "finish_at": None,
        "estimate_basis": None,
        "starts_at": None,
        "starts_in_s": None,
        # What the attempt really used (a running one: so far).
        "peak_mib": rec.peak_mib,
        "peak_gpu_mib": {str(g): m for g, m in zip(rec.gpus, rec.peak_gpu_mib, strict=False)},
        "host_peak_mib": rec.host_peak_mib,
        "gpu_hours": _rounded(
            gpu_hours(
                len(rec.gpus), rec.started_at, rec.ended_at or (time.time() if rec.active else None)
            )
        ),
        "node": rec.node,  # the cluster node it runs / ran on; null on one server
        # Stopped through no fault of its own and queued again: "preempted", "interrupted"
        # (a reboot) or "requeued" (its requeue_exit code); null once it ends otherwise.
        "requeued_as": rec.requeued_as,
        "preempted_by": rec.preempted_by,
        "preempted_at": rec.preempted_at,
        "preemptions": rec.preemptions,
        "preempting_for": rec.preempt_for,  # a running job being stopped to make room for it
        # The attempt's experiment-tracker run links found in its log: [{"tracker", "url"}].
        "links": links_json(rec.links),
    }


def status_dict(
    queue: Path,
    paused: bool,
    gpus: Sequence[dict[str, Any]],
    jobs: Sequence[JobView],
    scheduler: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``scheduler``: ``{"running": bool, "pid": int | None, "since": float | None}`` (for a
    stopped one: its last pid, and ``stopped`` when it stopped, if known)."""
    return {
        "queue": str(queue),
        "scheduler": scheduler or {"running": False, "pid": None, "since": None},
        "paused": paused,
        "gpus": list(gpus),
        "jobs": [job_dict(v) for v in jobs],
    }


def ended_at(rec: JobRecord) -> float:
    """When a job that ended while no scheduler ran really ended: its status file's mtime (the
    wrapper writes it last), else its log's, else now. The status file is made empty at the
    launch: one still empty was never written (a wrapper killed, a full disk), and its mtime
    is only the launch's, or the failed write's: the later of it and the log's."""
    times: list[float] = []
    for p in (rec.status_file, rec.log):
        if p:
            try:
                st = os.stat(p)
            except OSError:
                continue
            if p == rec.status_file and st.st_size > 0:
                return st.st_mtime
            times.append(st.st_mtime)
    return max(times, default=time.time())


def unknown_diagnosis(rec: JobRecord) -> Diagnosis:
    """Why a job's exit status is unknown, with the log's last line to judge by."""
    why = "it left no exit status"
    if rec.status_file:
        try:
            size = os.stat(rec.status_file).st_size
        except OSError:
            size = None
        if size == 0:
            why = (
                "its exit-status file is empty (its wrapper was killed before it wrote it, "
                "or the disk was full)"
            )
        elif size is not None:
            why = "its exit-status file cannot be read"
    tail = read_log_tail(Path(rec.log)) if rec.log else ""
    last = next((ln.strip() for ln in reversed(tail.splitlines()) if ln.strip()), "")
    line = f"exit status unknown: {why}" + (f"; the log ends with: {last[:200]}" if last else "")
    return Diagnosis(
        kind="unknown",
        line=line,
        hint="read its log: if it finished, leave it; else retry it with r / gtui retry",
    )


def settled(rec: JobRecord, executor: Executor | None = None) -> JobRecord:
    """What a record really says while no scheduler runs: a job recorded as running whose
    process is gone ended meanwhile, and its status file says how (the next scheduler records
    exactly this). The stored record is not changed."""
    if not rec.active or rec.pid is None:
        return rec
    executor = executor or LocalExecutor()
    handle = handle_of(rec)
    if rec.create_time is not None and executor.alive(handle):
        return rec
    status = executor.exit_status(handle)
    out = dataclasses.replace(rec, warnings=[*rec.warnings, ENDED_UNRECORDED])
    out.ended_at = ended_at(rec)
    if status is None:
        out.state = JobState.UNKNOWN
        out.diagnosis = unknown_diagnosis(rec)
        return out
    out.exit_code, out.signal = status.exit_code, status.signal
    ok = status.exit_code == 0 and status.signal is None
    out.state = JobState.DONE if ok else JobState.FAILED
    return out


ENDED_UNRECORDED = "ended while no scheduler ran; recorded when one starts"
