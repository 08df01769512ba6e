"""What the jobs of a queue left outside the state database: the evidence a lost or damaged
store is checked against and rebuilt from.

Every attempt leaves traces the store does not hold: its log (``LOG_DIR/NAME.N.log``, created at
launch), its exit-status file (``.gtui/QUEUE.run/NAME.N.status``, written by the wrapper as it
exits, see ``gtui.core.exec.runner``) and, while it runs, its wrapper process. A job whose newest
trace is of a later attempt than its record says has run since the record was saved: a
restarted scheduler takes its outcome from those traces (``gtui.core.sched.recovery``) rather
than start it blind.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gtui.core.exec.base import ExitStatus
from gtui.core.exec.runner import Wrapper, read_status_file, safe_name, wrappers_in


@dataclass(frozen=True)
class Trace:
    """The newest attempt of one job that left a trace."""

    name: str
    attempt: int
    status_path: str | None = None  # its exit-status file, when there is one
    log: str | None = None  # its newest log, when there is one
    wrapper: Wrapper | None = None  # its wrapper, still running

    @property
    def status(self) -> ExitStatus | None:
        """The exit status its wrapper wrote (None: none, or unreadable)."""
        return read_status_file(Path(self.status_path)) if self.status_path is not None else None

    def gpus(self) -> tuple[int, ...]:
        """The GPUs a running attempt was given, as its environment says (CUDA_VISIBLE_DEVICES
        on one server is the GPUs' indices; a MIG instance's UUID or an unisolated job's
        absent value says nothing)."""
        if self.wrapper is None:
            return ()
        value = self.wrapper.env.get("CUDA_VISIBLE_DEVICES", "")
        parts = [p.strip() for p in value.split(",") if p.strip()]
        return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else ()


def _split(stem: str, names: dict[str, str]) -> tuple[str, int, int] | None:
    """``SAFE.N`` or ``SAFE.N.V`` (a log's variant V, 0 for none) as (job name, attempt,
    variant), for a known job."""
    parts = stem.split(".")
    for cut in (1, 2):  # a job name may hold dots: try the attempt last, then before a variant
        if len(parts) <= cut:
            continue
        if cut == 2 and not parts[-1].isdigit():
            continue
        attempt = parts[-cut]
        name = names.get(".".join(parts[:-cut]))
        if name is not None and attempt.isdigit() and int(attempt) > 0:
            return name, int(attempt), int(parts[-1]) if cut == 2 else 0
    return None


def _files(folder: Path, suffix: str) -> list[os.DirEntry[str]]:
    try:
        return [e for e in os.scandir(folder) if e.name.endswith(suffix) and e.is_file()]
    except OSError:
        return []


def gather(names: Iterable[str], run_dir: Path, log_dir: Path) -> dict[str, Trace]:
    """The newest traced attempt of each job of ``names`` that left one (a job with none is
    left out), in the order of ``names``. One listing of each folder and one pass over the
    process table. A log counts only where some job of the queue left an exit-status file or
    runs (see below)."""
    order = list(names)
    by_safe = {safe_name(n): n for n in order}
    # Paths as the listing gives them (str): 100,000 Path objects were most of the time here.
    status: dict[tuple[str, int], tuple[int, str]] = {}
    logs: dict[tuple[str, int], tuple[int, str]] = {}
    running: dict[tuple[str, int], Wrapper] = {}
    for e in _files(run_dir, ".status"):
        found = _split(e.name[: -len(".status")], by_safe)
        if found is None:
            continue
        key, variant = found[:2], found[2]
        # A second run of one attempt writes ``NAME.N.V.status`` beside the first's: the
        # newest is the highest V, as for logs.
        if key not in status or status[key][0] < variant:
            status[key] = (variant, e.path)
    for e in _files(log_dir, ".log"):
        found = _split(e.name[: -len(".log")], by_safe)
        if found is None:
            continue
        key, variant = found[:2], found[2]
        # An attempt's newest log has the highest variant: a launch takes the first name free.
        if key not in logs or logs[key][0] < variant:
            logs[key] = (variant, e.path)
    for w in wrappers_in(run_dir):
        found = _split(w.status_path.name[: -len(".status")], by_safe)
        if found is not None:
            running[found[:2]] = w
    if not status and not running:
        # No job of this queue has run here: logs of the same names are another queue's (two
        # queue files in one folder share its log_dir), not this one's.
        logs = {}
    newest: dict[str, int] = {}
    for name, attempt in (*status, *logs, *running):
        newest[name] = max(attempt, newest.get(name, 0))
    out: dict[str, Trace] = {}
    for name in order:
        attempt = newest.get(name, 0)
        if not attempt:
            continue
        key = (name, attempt)
        log = logs.get(key)
        st = status.get(key)
        out[name] = Trace(
            name, attempt, st[1] if st else None, log[1] if log else None, running.get(key)
        )
    return out
