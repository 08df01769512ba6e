"""After a restart: which recorded jobs still run, which ended meanwhile, and which never
started. Never a job started twice (DESIGN.md 5).

The answer comes from the executor (is the handle alive, what exit status did it leave, which
process carries the launch token); this module only reads records and says what to do.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path

from gtui.core.errors import GtuiError
from gtui.core.exec.base import Executor, ExitStatus, Handle, handle_of
from gtui.core.exec.runner import safe_name
from gtui.core.model import JobState
from gtui.core.state.book import JobBook

UNKNOWN = ExitStatus(None, None)


@dataclass
class Recovered:
    adopt: list[tuple[str, Handle]] = field(default_factory=list)  # still running
    ended: list[tuple[str, ExitStatus]] = field(default_factory=list)  # ended while down


def recover(
    book: JobBook, executor: Executor, log_dir: Path, leave: Container[str] = ()
) -> Recovered:
    """Sort the active records of ``book``; requeues (and commits) jobs that never started.
    The jobs named in ``leave`` are not looked at: only another executor can see them (a
    cluster's jobs, from a command given with no scheduler)."""
    out = Recovered()
    for name in list(book.active_names()):
        rec = book.records[name]
        if not rec.active or name in leave:
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
