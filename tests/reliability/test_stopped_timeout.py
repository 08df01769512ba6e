"""A scheduler stopped (SIGSTOP: Ctrl-Z, a paused VM, heavy swapping) past a job's time limit:
the job's end is what its own status file says, not what the scheduler finds when it wakes.

Real ``gtui run`` on fake GPUs, real jobs, real signals.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gtui.core.exec.runner import status_path_for
from gtui.core.paths import queue_paths
from gtui.core.state.history import attempts
from tests.reliability.helpers import finish, start_run, state_of, wait_for
from tests.reliability.mixed import kill_queue_processes

TIMEOUT_S = 3.0
JOBS = ("a", "b")

QUEUE = f"""
[settings]
poll = "0.1s"
kill_grace = "0.5s"
fake_gpus = "2x80G"

[[jobs]]
name = "a"
cmd = "echo started; while [ ! -e go ]; do sleep 0.05; done; exit 1"
gpus = 0
timeout = "{TIMEOUT_S:g}s"
retries = 2

[[jobs]]
name = "b"
cmd = "echo started; while [ ! -e go ]; do sleep 0.05; done; exit 1"
gpus = 0
timeout = "{TIMEOUT_S:g}s"
retries = 2
"""


@pytest.fixture
def queue(queue: Path) -> Iterator[Path]:
    """The shared queue; what its jobs left running is killed after the test."""
    yield queue
    kill_queue_processes(queue)


def _started(log_dir: Path, name: str) -> bool:
    log = log_dir / f"{name}.1.log"
    return log.exists() and "started" in log.read_text()


def test_a_job_that_failed_before_its_limit_while_the_scheduler_was_stopped_is_not_a_timeout(
    queue: Path,
) -> None:
    """Both jobs run attempt 1; the scheduler is stopped; they fail (exit 1) at once; the
    scheduler stays stopped until past their limit, then continues. Each is recorded failed
    (not timeout), retried as ``retries = 2`` says (3 runs), and attempt 1's end is its status
    file's, before its deadline, not the moment the scheduler woke."""
    paths = queue_paths(queue)
    log_dir = queue.parent / "logs"
    proc = start_run(queue)
    try:
        wait_for(lambda: all(_started(log_dir, n) for n in JOBS), what="both jobs started")
        os.kill(proc.pid, signal.SIGSTOP)
        stopped_at = time.time()
        try:
            (queue.parent / "go").touch()
            status_files = [status_path_for(paths.run_dir, n, 1) for n in JOBS]
            wait_for(lambda: all(p.exists() and p.stat().st_size for p in status_files))
            ended = {n: p.stat().st_mtime for n, p in zip(JOBS, status_files, strict=True)}
            # Stopped until past every deadline (attempt 1 started before the stop).
            wait_for(lambda: time.time() > stopped_at + TIMEOUT_S + 1.0, what="past the limit")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        out = finish(proc, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for name in JOBS:
        assert state_of(queue, name) == "failed", out
        runs = attempts(paths.db, name)
        assert [a.attempt for a in runs] == [1, 2, 3], (name, runs, out)
        assert all(a.diag_kind != "timeout" for a in runs), (name, runs)
        first = runs[0]
        assert first.started_at is not None and first.ended_at is not None
        assert first.ended_at == pytest.approx(ended[name], abs=1e-3), (name, first, ended)
        assert first.ended_at < first.started_at + TIMEOUT_S, (name, first)
