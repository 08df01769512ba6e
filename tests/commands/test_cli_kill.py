"""``gtui kill`` against a real ``gtui run``: it returns once the signal is
delivered, not after the whole grace; ``--wait`` returns once the job is killed. And the headless
log says so when a failed job's log is empty, rather than printing an empty error line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.commands.test_cli_control import (
    FAKE,
    Scheduler,
    alive,
    live_state,
    records,
    state,
    wait_until,
)
from tests.conftest import gtui, write_queue

# Ignores nothing: it notes each SIGTERM in a file and goes on, so only SIGKILL ends it.
STUBBORN = "trap 'echo TERM >> got_term' TERM; while [ ! -e release ]; do sleep 0.05; done"


def stubborn_queue(tmp_path: Path, grace: str) -> Path:
    return write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.2s"
        kill_grace = "{grace}"

        [[jobs]]
        name = "stubborn"
        gpus = 0
        cwd = "{tmp_path}"
        cmd = "{STUBBORN}"
        """,
    )


def start(q: Path) -> tuple[Scheduler, list[psutil.Process]]:
    """A scheduler running the stubborn job, once its trap is set (its loop has begun)."""
    s = Scheduler(q)
    wait_until(lambda: state(q, "stubborn") == "running", what="stubborn running")
    pid = records(q)["stubborn"].pid
    assert pid is not None
    root = psutil.Process(pid)

    def looping() -> bool:
        return any(p.name() == "sleep" for p in root.children(recursive=True))

    # a sleep of the loop can end between the listing and its name: looked at again
    wait_until(looping, what="the job's loop (its trap is set)", ignoring=(psutil.NoSuchProcess,))
    return s, [root, *root.children()]


@pytest.fixture
def stop() -> Iterator[list[Scheduler]]:
    started: list[Scheduler] = []
    yield started
    for s in started:
        s.stop()
        for rec in records(s.q).values():  # never leave a job behind
            try:
                root = psutil.Process(rec.pid or 0)
                for p in [root, *root.children(recursive=True)]:
                    p.kill()
            except psutil.NoSuchProcess:
                pass


@pytest.mark.slow
def test_kill_returns_once_the_signal_is_delivered(tmp_path: Path, stop: list[Scheduler]) -> None:
    # The grace only has to outlast `gtui kill`'s return and the two looks after it (well under
    # a second even on a busy machine); the test then waits it out for the SIGKILL.
    q = stubborn_queue(tmp_path, "10s")
    s, procs = start(q)
    stop.append(s)

    r = gtui("kill", str(q), "stubborn")
    assert r.returncode == 0, r.stderr
    # Returned within the grace: the job still runs, the scheduler still has it running.
    assert all(alive(p) for p in procs[:2]), "gtui kill waited for the job to die"
    assert live_state(q, "stubborn") == "running"
    # And it says what is under way, not that the job is dead already.
    assert "stubborn" in r.stdout and "SIGKILL" in r.stdout, r.stdout
    # The SIGTERM did reach it (its trap noted it) ...
    wait_until((tmp_path / "got_term").exists, what="the job's TERM trap")
    # ... and SIGKILL ends it once the grace is over.
    wait_until(lambda: state(q, "stubborn") == "killed", timeout=90, what="killed after grace")
    rec = records(q)["stubborn"]
    assert rec.signal == 9, rec
    wait_until(lambda: not any(alive(p) for p in procs), what="the job's processes gone")
    assert s.proc.wait(20) == 1


def test_kill_wait_returns_once_the_job_is_killed(tmp_path: Path, stop: list[Scheduler]) -> None:
    q = stubborn_queue(tmp_path, "1s")
    s, procs = start(q)
    stop.append(s)

    r = gtui("kill", "--wait", str(q), "stubborn")
    assert (r.returncode, r.stdout, r.stderr) == (0, "killed stubborn\n", "")
    assert state(q, "stubborn") == "killed"
    assert records(q)["stubborn"].signal == 9
    assert (tmp_path / "got_term").exists()  # it had its SIGTERM first
    assert not any(alive(p) for p in procs[:2])


def test_a_failure_with_an_empty_log_says_the_log_is_empty(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "silent"
        gpus = 0
        cmd = "exit 3"
        """,
    )
    r = gtui("run", str(q), "--fake-gpus", FAKE)
    assert r.returncode == 1, r.stdout + r.stderr
    failed = [line for line in r.stdout.splitlines() if "failed silent" in line]
    assert len(failed) == 1, r.stdout
    assert "(exit 3, the log is empty)" in failed[0], failed[0]
    assert "error:  (" not in failed[0] and ":  " not in failed[0], failed[0]
