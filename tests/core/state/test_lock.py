"""The per-queue lock: one scheduler per queue, released by the kernel when its holder dies."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from gtui.core.errors import EXIT_LOCKED, LockedError
from gtui.core.paths import queue_paths
from gtui.core.state.lock import QueueLock
from tests.waiting import wait_for

# Holds the lock until the test kills it (it waits on its stdin, which the test never closes
# before). The job it may start inherits every descriptor it can (close_fds=False, as a job
# started by os.system or a careless library would): only O_CLOEXEC keeps the lock out of it.
HOLDER = textwrap.dedent(
    """
    import subprocess, sys
    from pathlib import Path
    from gtui.core.state.lock import QueueLock
    lock = QueueLock(Path(sys.argv[1]))
    lock.acquire()
    if len(sys.argv) > 2:  # start a job that outlives us, as the engine does
        child = subprocess.Popen(["sleep", "infinity"], start_new_session=True, close_fds=False)
        print(child.pid, flush=True)
    print("locked", flush=True)
    sys.stdin.read()
    """
)


def start_holder(queue: Path, *extra: str) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(queue), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    while True:
        line = proc.stdout.readline()
        assert line, "the holder exited before taking the lock"
        lines.append(line.strip())
        if line.strip() == "locked":
            return proc, lines


def test_acquire_release_and_holder(queue: Path) -> None:
    lock = QueueLock(queue)
    assert lock.holder() is None
    lock.acquire()
    try:
        assert lock.held
        assert lock.holder() == os.getpid()
        assert QueueLock(queue).holder() == os.getpid()  # asked of the kernel, not of `lock`
        info = lock.info()
        assert info is not None and info.pid == os.getpid()
    finally:
        lock.release()
    assert not lock.held
    assert QueueLock(queue).holder() is None
    lock.release()  # idempotent


def test_second_lock_in_the_same_process_is_refused(queue: Path) -> None:
    with QueueLock(queue), pytest.raises(LockedError) as err:
        QueueLock(queue).acquire()
    assert err.value.exit_code == EXIT_LOCKED == 3
    assert f"pid {os.getpid()}" in str(err.value)
    # No tmux session runs this queue, so the hint names commands that work without one.
    assert "gtui attach" not in str(err.value)
    assert "gtui status q.toml" in str(err.value) and f"kill {os.getpid()}" in str(err.value)
    QueueLock(queue).acquire()  # the context manager released it


def test_lock_file_and_dir_are_private(queue: Path) -> None:
    with QueueLock(queue) as lock:
        assert stat.S_IMODE(lock.path.stat().st_mode) == 0o600
        assert stat.S_IMODE(lock.path.parent.stat().st_mode) == 0o700
        assert lock.path == queue_paths(queue).lock


def test_another_process_holds_it_and_kill_9_frees_it(queue: Path) -> None:
    proc, _ = start_holder(queue)
    try:
        lock = QueueLock(queue)
        assert lock.holder() == proc.pid
        with pytest.raises(LockedError) as err:
            lock.acquire()
        assert f"pid {proc.pid}" in str(err.value)
        assert err.value.exit_code == 3
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        wait_for(lambda: lock.holder() is None, what="the lock released")
        lock.acquire()
        assert lock.holder() == os.getpid()
        lock.release()
    finally:
        proc.kill()
        proc.wait()


def test_a_job_started_by_the_holder_does_not_keep_the_lock(queue: Path) -> None:
    proc, lines = start_holder(queue, "with-job")
    job = psutil.Process(int(lines[0]))
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        assert job.is_running()  # the job outlives gtui, as jobs do
        lock = QueueLock(queue)
        wait_for(lambda: lock.holder() is None, what="the lock released")
        lock.acquire()
        lock.release()
    finally:
        job.kill()
        proc.kill()
        proc.wait()


def test_a_stale_pid_in_the_file_is_not_a_holder(queue: Path) -> None:
    lock = QueueLock(queue)
    lock.path.parent.mkdir(mode=0o700, exist_ok=True)
    lock.path.write_text("4194300 elsewhere 0\n")
    assert lock.holder() is None  # the file says a pid; the kernel says nobody holds it
    lock.acquire()
    info = lock.info()
    assert info is not None and info.pid == os.getpid()
    lock.release()
    assert lock.path.read_text() == ""  # released locks leave no pid behind


def test_holder_without_a_state_dir_creates_nothing(queue: Path) -> None:
    assert QueueLock(queue).holder() is None
    assert not (queue.parent / ".gtui").exists()


def test_a_dropped_lock_object_keeps_the_lock(queue: Path) -> None:
    """Forgetting the object must not let a second scheduler in; only release() or death do."""
    import gc

    QueueLock(queue).acquire()
    gc.collect()
    assert QueueLock(queue).holder() == os.getpid()
    with pytest.raises(LockedError):
        QueueLock(queue).acquire()
