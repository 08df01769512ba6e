"""Quitting the dashboard hands the queue to a headless scheduler in the background, and
`gtui run --stay` keeps a scheduler serving after the queue drains.

Real processes throughout: the dashboard in a real tmux (its own private server), the successor
it starts, SIGKILLs from the fault injection (``GTUI_CRASH_AT``) at each step of the hand-over,
and jobs that write down every start, so "ran exactly once" is read from the jobs' side.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gtui import scripting
from gtui.core import tmux
from gtui.core.paths import queue_paths
from gtui.core.sched.handover import scheduler_log
from gtui.core.state.status import ENDED_UNRECORDED
from tests.conftest import gtui, status_of, write_queue
from tests.tmux_helpers import keys, outer, wait_screen
from tests.waiting import wait_for

PY = sys.executable

# One GPU: `first` holds it until the test says so; `second` waits for it.
QUEUE = """
[settings]
poll = "0.3s"
kill_grace = "1s"
fake_gpus = "1x80G"

[[jobs]]
name = "first"
gpus = 1
cmd = "echo first $$ >> runs; while [ ! -e release ]; do sleep 0.05; done"

[[jobs]]
name = "second"
gpus = 1
cmd = "echo second $$ >> runs"
"""

needs_tmux = pytest.mark.skipif(not tmux.available(), reason="needs tmux")


def status(queue: Path) -> dict:  # type: ignore[type-arg]
    return status_of(queue)


def jobs(queue: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    return {j["name"]: j for j in status(queue)["jobs"]}


def scheduler_pid(queue: Path) -> int | None:
    sched = status(queue)["scheduler"]
    return int(sched["pid"]) if sched.get("running") else None


def starts(queue: Path) -> list[str]:
    """Each job's starts, as the jobs wrote them down."""
    runs = queue.parent / "runs"
    return (
        sorted(line.split()[0] for line in runs.read_text().splitlines()) if runs.exists() else []
    )


@pytest.fixture
def queue(queue: Path) -> Iterator[Path]:
    q, tmp_path = queue, queue.parent
    try:
        yield q
    finally:
        # The successor stays 10 min after its last job: stop it, then leave nothing behind.
        (tmp_path / "release").touch()
        gtui("stop", str(q), "--kill")
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if p.environ().get("GTUI_QUEUE") == str(q.resolve()):
                    p.kill()


def first_running_second_waiting(queue: Path) -> None:
    def ready() -> bool:
        j = jobs(queue)
        return j["first"]["state"] == "running" and j["second"]["state"] == "queued"

    wait_for(ready, what="first running, second queued")


@needs_tmux
@pytest.mark.slow
def test_q_enter_hands_the_queue_over_and_gtui_attaches_to_it_later(
    tmux_server: Path, queue: Path
) -> None:
    tmp = queue.parent
    name = queue_paths(queue).tmux_session
    outer(tmp, "term", f"{PY} -m gtui q.toml")
    wait_for(lambda: tmux.has_session(name), what=f"the {name} session")
    target = f"={name}:"
    first_running_second_waiting(queue)
    dashboard = scheduler_pid(queue)
    assert dashboard is not None
    keys(target, "q")
    screen = " ".join(wait_screen(target, "Quit gtui?").replace("│", " ").split())
    assert "Keep going (enter, q)" in screen and "gtui stop q.toml" in screen, screen
    keys(target, "Enter")  # the default: keep the queue going
    wait_for(lambda: not tmux.has_session(name), what="the dashboard and its session to end")

    # A scheduler in the background runs the queue now: not the dashboard, not in tmux.
    wait_for(lambda: scheduler_pid(queue) not in (None, dashboard), what="the successor")
    successor = scheduler_pid(queue)
    assert successor is not None
    proc = psutil.Process(successor)
    # A session of its own, and not its leader: it can take no terminal.
    assert os.getsid(successor) not in (successor, os.getsid(0))
    assert os.readlink(f"/proc/{successor}/fd/0") == "/dev/null"
    assert "TMUX" not in proc.environ() and tmux.session_of_pid(successor) is None
    assert proc.parent() is None or proc.parent().pid != dashboard
    assert jobs(queue)["first"]["state"] == "running"  # re-adopted, not re-run

    (tmp / "release").touch()
    wait_for(lambda: jobs(queue)["second"]["state"] == "done", what="second to run")
    done = jobs(queue)
    assert done["first"]["state"] == "done" and done["first"]["attempt"] == 1
    assert ENDED_UNRECORDED not in done["first"]["warnings"], done["first"]
    assert starts(queue) == ["first", "second"]
    log = scheduler_log(queue_paths(queue)).read_text()
    assert f"taking over {queue} from its dashboard (pid {dashboard})" in log, log
    assert "start second" in log and "nothing more to run" in log, log

    # `gtui q.toml` later: the dashboard on that scheduler, attached over its socket.
    outer(tmp, "term2", f"{PY} -m gtui q.toml")
    shown = wait_screen("=term2:", "attached to the")
    shown = " ".join(shown.replace("▌", " ").replace("│", " ").split())  # the toast's words
    assert f"(pid {successor})" in shown, shown
    keys("=term2:", "q")
    wait_screen("=term2:", "rc=0")
    assert scheduler_pid(queue) == successor  # quitting the attached screen leaves it


# -- a SIGKILL at each step of the hand-over ----------------------------------------------------

DASHBOARD_POINTS = ["handover_spawned", "handover_released"]
SUCCESSOR_POINTS = ["handover_locked", "handover_adopted"]


@needs_tmux
@pytest.mark.slow
@pytest.mark.parametrize("point", DASHBOARD_POINTS + SUCCESSOR_POINTS)
def test_a_sigkill_at_each_step_of_the_hand_over_runs_every_job_once(
    tmux_server: Path, queue: Path, point: str
) -> None:
    """The dashboard killed after starting its successor (before releasing the queue) or after
    releasing it (before the successor took it); the successor killed right after taking the
    lock (before it re-adopted anything) or right after re-adopting: whoever comes next (the
    successor, or a later `gtui run`) runs every job exactly once."""
    tmp = queue.parent
    outer(tmp, "term", f"GTUI_CRASH_AT={point}:1 {PY} -m gtui --no-tmux q.toml")
    first_running_second_waiting(queue)
    dashboard = scheduler_pid(queue)
    keys("=term:", "q")
    wait_screen("=term:", "Quit gtui?")
    keys("=term:", "Enter")
    shown = " ".join(wait_screen("=term:", "rc=").split())
    if point in DASHBOARD_POINTS:
        assert "rc=137" in shown, shown  # SIGKILLed
    elif "rc=1" in shown:  # it saw the successor end before it had seen it hold the queue
        assert "Nothing runs q.toml now" in shown, shown
    else:
        assert "rc=0" in shown and "goes on in the background" in shown, shown
    assert dashboard is not None and not psutil.pid_exists(dashboard)
    (tmp / "release").touch()
    if point in DASHBOARD_POINTS:
        # The successor took the queue once the kernel dropped the dead dashboard's lock.
        wait_for(lambda: jobs(queue)["second"]["state"] == "done", what="second, by the successor")
    else:
        log = scheduler_log(queue_paths(queue))
        wait_for(lambda: "taking over" in log.read_text(), what="the successor's start")
        wait_for(lambda: scheduler_pid(queue) is None, what="the successor's death")
        assert jobs(queue)["second"]["state"] == "queued"
        r = gtui("run", str(queue), timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    done = jobs(queue)
    assert [done[n]["state"] for n in ("first", "second")] == ["done", "done"], done
    assert [done[n]["attempt"] for n in ("first", "second")] == [1, 1], done
    assert starts(queue) == ["first", "second"]


@needs_tmux
@pytest.mark.slow
def test_a_successor_that_cannot_start_is_said_and_loses_nothing(
    tmux_server: Path, queue: Path
) -> None:
    """The queue file was broken after the dashboard read it: the successor refuses it. The
    dashboard says so with the reason and how to start a scheduler (exit 1, so gtui's own tmux
    session keeps the words on screen), and the running job goes on for the next one."""
    tmp = queue.parent
    outer(tmp, "term", f"{PY} -m gtui --no-tmux q.toml")
    first_running_second_waiting(queue)
    good = queue.read_text()
    queue.write_text(good + "\n[[jobs]\n")
    wait_screen("=term:", "last good version kept")
    keys("=term:", "q")
    wait_screen("=term:", "Quit gtui?")
    keys("=term:", "Enter")
    shown = " ".join(wait_screen("=term:", "rc=").split())
    assert "rc=1" in shown and "ended before it took q.toml over" in shown, shown
    assert "TOML" in shown and "`gtui run q.toml` or `gtui q.toml` starts a scheduler" in shown
    queue.write_text(good)
    assert jobs(queue)["first"]["state"] == "running" and scheduler_pid(queue) is None
    (tmp / "release").touch()
    r = gtui("run", str(queue), timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert starts(queue) == ["first", "second"]


# -- gtui run --stay ---------------------------------------------------------------------------

QUICK = """
[settings]
poll = "0.3s"
fake_gpus = "1x80G"

[[jobs]]
name = "quick"
gpus = 0
cmd = "true"
"""


class Headless:
    """``gtui run ARGS`` in a subprocess, its event log in a file."""

    def __init__(self, queue: Path, *args: str) -> None:
        self.log = queue.parent / "run.out"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [PY, "-m", "gtui", "run", *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=queue.parent,
            )

    def says(self, text: str) -> bool:
        return text in self.log.read_text()

    def wait(self) -> int:
        return self.proc.wait(timeout=60)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


def test_run_stay_serves_after_the_queue_drains_then_ends_after_its_duration(
    tmp_path: Path,
) -> None:
    queue = write_queue(tmp_path, QUICK)
    run = Headless(queue, "--stay", "5s", "q.toml")
    try:
        wait_for(lambda: run.says("nothing more to run"), what="the drain")
        assert (
            run.proc.poll() is None and "`gtui stop q.toml` ends it sooner" in run.log.read_text()
        )
        # Added in this process (the Python API's request, as `gtui add` sends it): a `gtui add`
        # subprocess can take longer than the stay to start on a loaded machine.
        assert scripting.add(queue, "echo late", name="late", gpus=0) == "late"
        wait_for(lambda: jobs(queue)["late"]["state"] == "done", what="the added job to run")
        assert run.wait() == 0
        text = run.log.read_text()
        assert "start late" in text and "finished: 2 done" in text, text
    finally:
        run.kill()


def test_run_stay_without_a_duration_serves_until_gtui_stop(tmp_path: Path) -> None:
    queue = write_queue(tmp_path, QUICK)
    run = Headless(queue, "--stay", "q.toml")  # the file is not taken for the duration
    try:
        wait_for(lambda: run.says("nothing more to run"), what="the drain")
        assert "until `gtui stop q.toml`" in run.log.read_text()
        assert scheduler_pid(queue) == run.proc.pid
        r = gtui("stop", str(queue))
        assert r.returncode == 0 and "stopped the scheduler" in r.stdout, r.stdout + r.stderr
        assert run.wait() == 0
        assert "stopped by `gtui stop`" in run.log.read_text()
    finally:
        run.kill()


def test_run_stay_with_a_bad_duration_is_refused(tmp_path: Path) -> None:
    queue = write_queue(tmp_path, QUICK)
    r = gtui("run", "--stay", "soon", str(queue))
    assert r.returncode == 2 and r.stderr.startswith("gtui: --stay: "), r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / ".gtui").exists()
