"""Crash recovery with real processes: kill -9 the scheduler at chosen points, restart, and check
that every job ran exactly once and every exit status was recorded."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gtui.core.exec.runner import is_alive
from gtui.core.paths import queue_paths
from tests.conftest import jobs_of, write_queue
from tests.reliability.live import LiveOutput
from tests.reliability.mixed import kill_queue_processes, load_records, start_run
from tests.waiting import wait_for

# Every job appends its name to the runs file when it starts (so a second start shows). Job e runs
# until the test creates the release file: whether it is still running when the scheduler dies or
# restarts is the test's choice, never a matter of timing. (It needs 70G: it starts once a and b,
# which share the GPUs with it, have ended.)
HOLD = "while [ ! -e {release} ]; do sleep 0.05; done"
QUEUE = """
[settings]
poll = "0.2s"
kill_grace = "2s"
fake_gpus = "2x80G"

[[jobs]]
name = "a"
mem = "10G"
cmd = "echo a >> {runs}"

[[jobs]]
name = "b"
mem = "10G"
cmd = "echo b >> {runs}; exit 3"

[[jobs]]
name = "c"
gpus = 0
cmd = "echo c >> {runs}"

[[jobs]]
name = "d"
gpus = 0
after = ["a"]
cmd = "echo d >> {runs}"

[[jobs]]
name = "e"
mem = "70G"
cmd = "echo e >> {runs}; {hold}; exit 0"
"""

EXPECTED = {"a": "done", "b": "failed", "c": "done", "d": "done", "e": "done"}


@pytest.fixture
def files(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """The queue, its runs file and its release file (not created: e holds). A test that fails
    with e held leaves nothing behind: e is released, and whatever still runs is killed."""
    runs, release = tmp_path / "runs", tmp_path / "release"
    body = QUEUE.replace("{hold}", HOLD.replace("{release}", str(release)))
    queue = write_queue(tmp_path, body.replace("{runs}", str(runs)))
    yield queue, runs, release
    release.touch()
    kill_queue_processes(queue)


def status(queue: Path) -> dict[str, dict[str, object]]:
    return jobs_of(queue)


def wait_for_states(queue: Path, want: dict[str, str]) -> None:
    wait_for(
        lambda: {n: status(queue)[n]["state"] for n in want} == want, what=f"the states {want}"
    )


def job_processes(tmp_path: Path) -> list[psutil.Process]:
    """Processes still running one of this test's jobs (found by their GTUI_QUEUE)."""
    found = []
    for proc in psutil.process_iter():
        try:
            mine = proc.environ().get("GTUI_QUEUE", "").startswith(str(tmp_path))
            if mine and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def running_jobs(tmp_path: Path) -> set[str | None]:
    """The GTUI_JOB of each process of this test's jobs. A job's short-lived children (the
    `sleep 0.05` of its wait loop) carry it too and may end between the listing and the read:
    those are skipped, not an error (a race that failed this test under load)."""
    names = set()
    for p in job_processes(tmp_path):
        try:
            names.add(p.environ().get("GTUI_JOB"))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return names


def still_running(queue: Path) -> dict[str, int]:
    """The jobs the store says are running whose process (pid and create time) still runs."""
    return {
        name: rec.pid
        for name, rec in load_records(queue).items()
        if rec.state.value == "running"
        and rec.pid is not None
        and rec.create_time is not None
        and is_alive(rec.pid, rec.create_time)
    }


def finish(queue: Path, runs: Path, tmp_path: Path, release: Path) -> None:
    """Restart, and release the jobs once the new scheduler has recovered (its first line comes
    after recovery): the queue completes, every job ran once with its status recorded, and the
    jobs still running at the restart were re-adopted (same pid, no second start)."""
    running = still_running(queue)
    proc = start_run(queue)
    live = LiveOutput(proc)
    try:
        live.wait_for("gtui run ")
        now = still_running(queue)  # (with whatever it has started since)
        assert {n: now.get(n) for n in running} == running, "a running job was not re-adopted"
        release.touch()
        out = live.finish()
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 1, out  # b fails by design
    assert "Traceback" not in out
    jobs = status(queue)
    assert {n: j["state"] for n, j in jobs.items()} == EXPECTED, out
    assert jobs["b"]["exit_code"] == 3
    assert all(jobs[n]["exit_code"] == 0 for n in ("a", "c", "d", "e"))
    lines = runs.read_text().split()
    assert sorted(lines) == ["a", "b", "c", "d", "e"], f"each job must run exactly once: {lines}"
    for name in running:
        assert f"start {name} " not in out, f"{name} was started again:\n{out}"
    wait_for(lambda: job_processes(tmp_path) == [], what="the jobs' processes to be gone")


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
    tmp_path: Path, files: tuple[Path, Path, Path], crash_at: str
) -> None:
    """Job e is released from the start, so the crashed run reaches every transition; the jobs
    end while no scheduler runs, and the restart records their ends."""
    queue, runs, release = files
    release.touch()
    proc = start_run(queue, crash_at)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, out
    wait_for(lambda: job_processes(tmp_path) == [], what="the released jobs to end")
    finish(queue, runs, tmp_path, release)


def test_kill_9_while_idle_readopts_the_running_job(
    tmp_path: Path, files: tuple[Path, Path, Path]
) -> None:
    queue, runs, release = files
    proc = start_run(queue)
    wait_for_states(queue, {**EXPECTED, "e": "running"})  # the others' ends are recorded
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    running = running_jobs(tmp_path)
    assert running == {"e"}, "the job must outlive its scheduler"
    assert not release.exists()  # held: it can only end when the test says so
    finish(queue, runs, tmp_path, release)


def test_sigterm_leaves_jobs_running_and_state_consistent(
    tmp_path: Path, files: tuple[Path, Path, Path]
) -> None:
    queue, runs, release = files
    proc = start_run(queue)
    wait_for_states(queue, {"e": "running"})
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=20)
    assert "1 running job keeps running" in out and "Traceback" not in out
    assert "e" in running_jobs(tmp_path)
    assert status(queue)["e"]["state"] == "running"
    finish(queue, runs, tmp_path, release)


# ---------------------------------------------------------------------------------------------
# A crash between the launch and the commit of its pid: the job runs, the store knows only its
# start (state running, a token, no pid). The next scheduler must find it by the token in its
# environment (walking up to the wrapper), never start it again, and record its end once.

ONE = """
[settings]
poll = "0.2s"
kill_grace = "2s"
fake_gpus = "1x80G"

[[jobs]]
name = "j"
gpus = 0
cmd = 'echo "start $PPID" >> {starts}; while [ ! -e {release} ]; do sleep 0.05; done; exit 7'
"""


@pytest.fixture
def crashed(tmp_path: Path) -> Iterator[tuple[Path, Path, Path, psutil.Process]]:
    """A scheduler SIGKILLed right after launching j, before committing its pid, with j still
    running (held): the queue, j's starts file (one line per start: "start <wrapper pid>"), its
    release file and its wrapper process."""
    starts, release = tmp_path / "starts", tmp_path / "release"
    queue = write_queue(
        tmp_path, ONE.replace("{starts}", str(starts)).replace("{release}", str(release))
    )
    try:
        proc = start_run(queue, "after_launch:1")
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL, out
        rec = load_records(queue)["j"]
        assert (rec.state.value, rec.attempt, rec.pid) == ("running", 1, None), rec
        assert rec.token, "the start's intent carries the token the next scheduler looks for"
        wait_for(lambda: starts.exists() and starts.read_text().endswith("\n"), what="j to start")
        wrapper = psutil.Process(int(starts.read_text().split()[1]))
        assert wrapper.environ()["GTUI_TOKEN"] == rec.token
        assert wrapper.ppid() != proc.pid  # its scheduler is gone
        yield queue, starts, release, wrapper
    finally:
        release.touch()
        kill_queue_processes(queue)


def check_recorded_once(queue: Path, starts: Path, out: str) -> None:
    """j ran once, ended with exit 7, and that end was recorded once, for attempt 1."""
    assert starts.read_text().count("start") == 1, f"j started again:\n{starts.read_text()}"
    assert "Traceback" not in out, out
    assert "start j " not in out, f"the new scheduler started j:\n{out}"
    assert sum(1 for line in out.splitlines() if "] failed j " in line) == 1, out
    j = status(queue)["j"]
    assert (j["state"], j["exit_code"], j["attempt"]) == ("failed", 7, 1), j
    run_dir = queue_paths(queue).run_dir
    assert (run_dir / "j.1.status").read_text() == "exit 7\n"
    assert not (run_dir / "j.2.status").exists()
    assert j["log"] and Path(j["log"]).name == "j.1.log", j  # found again by the new scheduler


def test_crash_between_launch_and_pid_commit_readopts_the_running_job(
    tmp_path: Path, crashed: tuple[Path, Path, Path, psutil.Process]
) -> None:
    queue, starts, release, wrapper = crashed
    proc = start_run(queue)
    live = LiveOutput(proc)
    try:
        live.wait_for("gtui run ")  # printed once recovery is done
        rec = load_records(queue)["j"]
        assert rec.pid == wrapper.pid, f"j re-adopted as pid {rec.pid}, its wrapper is {wrapper}"
        assert rec.create_time == pytest.approx(wrapper.create_time(), abs=0.02)
        assert (rec.state.value, rec.attempt) == ("running", 1)
        assert wrapper.is_running()
        release.touch()
        out = live.finish()
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 1, out  # j fails by design
    check_recorded_once(queue, starts, out)
    wait_for(lambda: job_processes(tmp_path) == [], what="j's processes to be gone")


def test_crash_between_launch_and_pid_commit_then_the_job_ends_while_down(
    tmp_path: Path, crashed: tuple[Path, Path, Path, psutil.Process]
) -> None:
    queue, starts, release, _wrapper = crashed
    release.touch()
    wait_for(lambda: job_processes(tmp_path) == [], what="j to end while no scheduler runs")
    assert (queue_paths(queue).run_dir / "j.1.status").exists()
    proc = start_run(queue)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    check_recorded_once(queue, starts, out)
    assert "ended while gtui was not running" in status(queue)["j"]["warnings"]
