"""Crash recovery with real processes: kill -9 the scheduler at chosen points, restart, and check
that every job ran exactly once and every exit status was recorded (DESIGN.md 5)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import gtui, write_queue
from tests.reliability.mixed import start_run

QUEUE = """
[settings]
poll = "0.2s"
kill_grace = "2s"
fake_gpus = "2x80G"

[[jobs]]
name = "a"
mem = "10G"
cmd = "echo a >> {runs}; sleep 0.4"

[[jobs]]
name = "b"
mem = "10G"
cmd = "echo b >> {runs}; sleep 0.6; exit 3"

[[jobs]]
name = "c"
gpus = 0
cmd = "echo c >> {runs}; sleep 0.2"

[[jobs]]
name = "d"
gpus = 0
after = ["a"]
cmd = "echo d >> {runs}"

[[jobs]]
name = "e"
mem = "70G"
cmd = "echo e >> {runs}; sleep 1.2; exit 0"
"""

EXPECTED = {"a": "done", "b": "failed", "c": "done", "d": "done", "e": "done"}


def make_queue(tmp_path: Path) -> tuple[Path, Path]:
    runs = tmp_path / "runs"
    return write_queue(tmp_path, QUEUE.replace("{runs}", str(runs))), runs


def status(queue: Path) -> dict[str, dict[str, object]]:
    out = gtui("status", str(queue), "--json")
    assert out.returncode == 0, out.stderr
    return {j["name"]: j for j in json.loads(out.stdout)["jobs"]}


def wait_until_running(queue: Path, name: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while status(queue)[name]["state"] != "running":
        assert time.monotonic() < deadline, f"{name} never started"
        time.sleep(0.1)


def job_processes(tmp_path: Path) -> list[psutil.Process]:
    """Processes still running one of this test's jobs (found by their GTUI_QUEUE)."""
    found = []
    for proc in psutil.process_iter():
        try:
            mine = proc.environ().get("GTUI_QUEUE", "").startswith(str(tmp_path))
            if mine and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def finish(queue: Path, runs: Path, tmp_path: Path) -> None:
    """Restart until the queue completes; then every job ran once with its status recorded."""
    proc = start_run(queue)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out  # b fails by design
    assert "Traceback" not in out
    jobs = status(queue)
    assert {n: j["state"] for n, j in jobs.items()} == EXPECTED, out
    assert jobs["b"]["exit_code"] == 3
    assert all(jobs[n]["exit_code"] == 0 for n in ("a", "c", "d", "e"))
    lines = runs.read_text().split()
    assert sorted(lines) == ["a", "b", "c", "d", "e"], f"each job must run exactly once: {lines}"
    assert job_processes(tmp_path) == []


@pytest.mark.parametrize(
    "crash_at",
    [
        "after_intent:1",  # a start committed, nothing launched yet
        "after_intent:3",
        "after_launch:1",  # launched, its pid not yet committed
        "after_launch:4",
        "after_exit:1",  # a job ended, its end not yet committed
        "after_exit:3",
        "after_finish:2",  # an end committed, the next pass not yet run
    ],
)
def test_kill_9_at_a_transition_then_restart_runs_every_job_once(
    tmp_path: Path, crash_at: str
) -> None:
    queue, runs = make_queue(tmp_path)
    proc = start_run(queue, crash_at)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, out
    time.sleep(1.5)  # let running jobs end while no scheduler runs
    finish(queue, runs, tmp_path)


def test_kill_9_while_idle_readopts_the_running_job(tmp_path: Path) -> None:
    queue, runs = make_queue(tmp_path)
    proc = start_run(queue)
    wait_until_running(queue, "e")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    running = [p for p in job_processes(tmp_path) if p.environ().get("GTUI_JOB") == "e"]
    assert running, "the job must outlive its scheduler"
    finish(queue, runs, tmp_path)


def test_sigterm_leaves_jobs_running_and_state_consistent(tmp_path: Path) -> None:
    queue, runs = make_queue(tmp_path)
    proc = start_run(queue)
    wait_until_running(queue, "e")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert "keep running" in out and "Traceback" not in out
    assert any(p.environ().get("GTUI_JOB") == "e" for p in job_processes(tmp_path))
    assert status(queue)["e"]["state"] == "running"
    finish(queue, runs, tmp_path)
