"""``gtui stop``: the scheduler, headless or a dashboard's, stops cleanly and the
command returns once it has exited; running jobs go on (re-adopted next time), or with
``--kill`` are killed first."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import psutil
import pytest

from gtui.core.api import Event, Notice
from gtui.core.sched.engine import Engine
from tests.cli_helpers import (
    FAKE,
    Procs,
    gtui,
    live_state,
    lock_free,
    long_then_next,
    records,
    release,
)
from tests.waiting import until, wait_for


def test_stop_a_headless_scheduler_leaves_its_job_to_the_next(
    tmp_path: Path, procs: Procs
) -> None:
    q = long_then_next(tmp_path)
    sched = procs.scheduler(q)
    wait_for(lambda: live_state(q, "long") == "running", what="long running")
    pid = records(q)["long"].pid
    r = gtui("stop", str(q))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"stopped the scheduler (pid {sched.proc.pid}) of q.toml; running")
    # Returned once the scheduler had exited.
    assert sched.proc.poll() is not None and lock_free(q)
    out = sched.live.finish()
    assert sched.proc.returncode == 130  # stopped by you before the queue finished: no job failed
    assert "warning: stopped by `gtui stop`: this scheduler has ended; 1 running job keeps" in out
    assert "stopped by `gtui stop`: 1 queued, 1 running" in out
    assert pid is not None and psutil.Process(pid).is_running()
    assert records(q)["long"].state.value == "running"

    # The next scheduler re-adopts it; `--kill` kills it first.
    sched = procs.scheduler(q)
    assert records(q)["long"].pid == pid
    r = gtui("stop", str(q), "--kill")
    assert r.returncode == 0, r.stderr
    assert "its running jobs were killed" in r.stdout
    assert sched.proc.wait(10) == 130
    assert records(q)["long"].state.value == "killed"
    assert (tmp_path / "long.runs").read_text() == "run\n"  # never started twice

    r = gtui("stop", str(q))
    assert (r.returncode, r.stdout) == (0, "no scheduler runs q.toml: nothing to stop\n")


def test_stop_the_scheduler_of_a_dashboard(tmp_path: Path, procs: Procs) -> None:
    """A dashboard runs the engine as a worker (``engine.run()``, no exit when idle): stop
    ends that run, releases the queue, and tells the screen why."""
    q = long_then_next(tmp_path)
    procs.track(q)
    notices: list[str] = []

    async def scenario() -> int:
        engine = Engine(q, fake_gpus=FAKE)

        def sink(event: Event) -> None:
            if isinstance(event, Notice):
                notices.append(event.text)

        engine.subscribe(sink)
        worker = asyncio.create_task(engine.run())
        await until(lambda: engine.started and engine.view("long").record.active)
        stop = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gtui", "stop", str(q),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _out, err = await stop.communicate()
        assert stop.returncode == 0, err
        assert worker.done()  # the command returned once the engine had stopped
        assert lock_free(q)
        await engine.shutdown()  # what the app does as it quits afterwards: nothing left to do
        return await worker

    asyncio.run(scenario())
    assert any(n.startswith("stopped by `gtui stop`") for n in notices), notices
    assert records(q)["long"].state.value == "running"  # left running, for the next one
    release(q, "long")


def test_stop_with_no_scheduler_and_kill_ends_what_a_crashed_one_left(
    tmp_path: Path, procs: Procs
) -> None:
    q = long_then_next(tmp_path)
    sched = procs.scheduler(q)
    wait_for(lambda: live_state(q, "long") == "running", what="long running")
    sched.kill()  # kill -9: its job runs on
    pid = records(q)["long"].pid
    assert pid is not None and psutil.Process(pid).is_running()
    r = gtui("stop", str(q), "--kill")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "no scheduler runs q.toml: nothing to stop\nkilled long\n"
    assert records(q)["long"].state.value == "killed"


@pytest.mark.parametrize("signals", [1, 2])
def test_ctrl_c_of_gtui_run_exits_130_as_documented(
    tmp_path: Path, procs: Procs, signals: int
) -> None:
    """Ctrl-C (once, or twice while it shuts down) of a headless `gtui run`: exit 130,
    "interrupted", not 1 ("jobs failed": none did); its running job goes on, no traceback."""
    q = long_then_next(tmp_path)
    sched = procs.scheduler(q)
    wait_for(lambda: live_state(q, "long") == "running", what="long running")
    for _ in range(signals):
        sched.proc.send_signal(signal.SIGINT)
    out = sched.live.finish()
    assert sched.proc.returncode == 130, out
    assert "SIGINT: scheduler stopped; 1 running job keeps running (long)" in out
    assert "Traceback" not in out
    assert records(q)["long"].state.value == "running"
