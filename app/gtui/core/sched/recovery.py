"""After a restart: which recorded jobs still run, which ended meanwhile, and which never
started. Never a job started twice.

The answer comes from the executor (is the handle alive, what exit status did it leave, which
process carries the launch token); this module only reads records and says what to do.

A record can also be behind what really happened: the database lost its write-ahead log, was
emptied, or was rebuilt from an older backup. Before anything starts, the store is checked
against the jobs' own traces (``gtui.core.state.evidence``): a job whose newest log, exit-status
file or running wrapper is of a later attempt than its record says is taken from them (running:
re-adopted; an exit status: that end, as if it ended while gtui was down; a log alone: ended,
status unknown), never started blind.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path

from gtui.core.errors import GtuiError
from gtui.core.exec.base import Executor, ExitStatus, Handle, handle_of
from gtui.core.exec.runner import safe_name
from gtui.core.model import FINAL_STATES, JobState
from gtui.core.state.book import JobBook
from gtui.core.state.evidence import Trace, gather

UNKNOWN = ExitStatus(None, None)
REBUILT = (
    "its record was lost from the state database: rebuilt from what its run left (its log, "
    "exit-status file or process)"
)


@dataclass
class Recovered:
    adopt: list[tuple[str, Handle]] = field(default_factory=list)  # still running
    ended: list[tuple[str, ExitStatus]] = field(default_factory=list)  # ended while down
    rebuilt: list[str] = field(default_factory=list)  # records taken from the jobs' traces


def recover(
    book: JobBook,
    executor: Executor,
    log_dir: Path,
    leave: Container[str] = (),
    run_dir: Path | None = None,
) -> Recovered:
    """Sort the active records of ``book``; requeues (and commits) jobs that never started.
    The jobs named in ``leave`` are not looked at: only another executor can see them (a
    cluster's jobs, from a command given with no scheduler). ``run_dir``: where this machine's
    jobs write their exit statuses; given, the records are first checked against the jobs'
    traces there and in ``log_dir``."""
    out = Recovered()
    if run_dir is not None:
        _take_traces(book, gather(book.order, run_dir, log_dir), leave, out)
    taken = set(out.rebuilt)
    for name in list(book.active_names()):
        rec = book.records[name]
        if not rec.active or name in leave or name in taken:
            continue
        if rec.pid is None:
            _unlaunched(book, executor, name, log_dir, out)
            continue
        handle = handle_of(rec)
        if rec.create_time is not None and executor.alive(handle):
            out.adopt.append((name, handle))
            continue
        out.ended.append((name, executor.exit_status(handle) or UNKNOWN))
    return out


def _take_traces(
    book: JobBook, traces: dict[str, Trace], leave: Container[str], out: Recovered
) -> None:
    """Records behind their job's traces take the newest traced attempt (see the module's
    docstring). An ended job that ran (done, failed, unknown) has made one attempt at least: its
    record is read only when its traces are of a later one (a lost retry), so a restart of a
    100,000-job sweep reads none of them."""
    if not traces:
        return
    records = book.records
    live = records.live()
    maybe = [
        n
        for n, t in traces.items()
        if n not in live
        and n not in leave
        and (t.attempt > 1 or records.state(n) in (JobState.BLOCKED, JobState.KILLED))
    ]
    saved = {n: r.attempt for n, r in records.get_many(maybe).items()}
    for name, trace in traces.items():
        if name in leave or records.state(name) is None:
            continue
        known = live[name].attempt if name in live else saved.get(name, 1)
        if trace.attempt <= known:
            continue
        rec = records[name]
        rec.attempt = trace.attempt
        rec.first_attempt = min(rec.first_attempt, trace.attempt)
        rec.state = JobState.RUNNING
        rec.log = trace.log
        rec.status_file = trace.status_path
        rec.pid = rec.create_time = rec.exit_code = rec.signal = None
        rec.started_at = rec.ended_at = rec.retry_at = rec.diagnosis = None
        rec.token = None
        rec.reason = ""
        rec.warnings = [REBUILT]
        book.records.put(rec)  # live until its end is committed (an ended one was read back)
        out.rebuilt.append(name)
        wrapper = trace.wrapper
        if wrapper is not None:
            rec.pid, rec.create_time = wrapper.pid, wrapper.create_time
            rec.started_at = wrapper.create_time
            rec.token = wrapper.env.get("GTUI_TOKEN")
            rec.status_file = str(wrapper.status_path)
            rec.gpus = trace.gpus()
            book.commit(rec)
            out.adopt.append((name, handle_of(rec)))
        else:
            out.ended.append((name, trace.status or UNKNOWN))
    if out.rebuilt:
        taken = set(out.rebuilt)
        book.deferred = [r for r in book.deferred if r.name not in taken]


def rebuilt_words(book: JobBook, names: list[str]) -> str | None:
    """What the traces rebuilt, once the ends are recorded: a line for the event log."""
    if not names:
        return None
    by_state: dict[str, list[str]] = {}
    for name in names:
        state = book.records.state(name)
        if state == JobState.RUNNING:
            word = "running (re-adopted)"
        elif state is None or state in FINAL_STATES:
            word = state.value if state is not None else "?"
        else:
            word = f"{state.value} (its attempt counted)"  # a failure with retries left
        by_state.setdefault(word, []).append(name)
    parts = []
    for word, group in by_state.items():
        shown = ", ".join(group[:5]) + (f" and {len(group) - 5} more" if len(group) > 5 else "")
        parts.append(f"{len(group)} {word}: {shown}")
    return (
        f"the state database had lost {len(names)} job(s)' runs; rebuilt from their logs, "
        f"exit-status files and processes, none started again: " + "; ".join(parts)
    )


def _unlaunched(
    book: JobBook, executor: Executor, name: str, log_dir: Path, out: Recovered
) -> None:
    """The scheduler died between committing a start and recording the pid."""
    rec = book.records[name]
    try:
        found = executor.find(rec.token) if rec.token else None
    except GtuiError as e:
        # It may run where nobody answered: never started again, nor taken for running.
        rec.warnings = [*rec.warnings, f"not known whether it started: {e}"]
        out.ended.append((name, UNKNOWN))
        return
    if found is not None:
        rec.pid = found.pid
        rec.create_time = found.create_time
        rec.node = found.node or rec.node
        rec.log = find_log(log_dir, name, rec.attempt)
        book.commit(rec)
        out.adopt.append((name, handle_of(rec)))
        return
    status = executor.exit_status(handle_of(rec)) if rec.status_file else None
    if status is not None:
        # It ran and ended while gtui was down.
        rec.log = find_log(log_dir, name, rec.attempt)
        out.ended.append((name, status))
        return
    # It never started (a crash between the intent and the exec, even after its empty log
    # was created): back to the queue, the attempt not counted.
    rec.state = JobState.QUEUED
    rec.attempt = max(0, rec.attempt - 1)
    rec.token = None
    book.commit(rec)


def find_log(log_dir: Path, name: str, attempt: int) -> str | None:
    """The newest log of the attempt (its path was not committed before a crash)."""
    base = f"{safe_name(name)}.{attempt}"
    try:
        logs = [p for p in log_dir.glob(f"{base}*.log") if p.name.startswith(base + ".")]
        return str(max(logs, key=lambda p: p.stat().st_mtime)) if logs else None
    except OSError:
        return None
