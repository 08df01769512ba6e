"""The memory executor alone: jobs as timers in the event loop, no OS process."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import pytest

from gtui.core.exec.base import ExitStatus, Found, Handle, LaunchError, LaunchRequest
from gtui.core.exec.memory import MemoryExecutor, Script, default_program

TIMEOUT = 5.0  # generous: only a hang hits it


def make_req(
    tmp: Path,
    cmd: str,
    name: str = "job",
    attempt: int = 1,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> LaunchRequest:
    return LaunchRequest(
        name=name,
        attempt=attempt,
        cmd=cmd,
        cwd=cwd or tmp,
        env=dict(env or {}),
        log_dir=tmp / "logs",
        run_dir=tmp / ".gtui" / "q.run",
    )


def test_default_program_reads_the_tiny_language(tmp_path: Path) -> None:
    script = default_program(
        make_req(tmp_path, "echo hi; sleep 0.2 && echo 'a b'; exit 3; echo no")
    )
    assert script == Script(0.2, 3, None, "hi\na b\n")
    assert default_program(make_req(tmp_path, "python train.py")) == Script(0.0, 0)


async def test_launch_and_wait_exit_code_and_log(tmp_path: Path) -> None:
    ex = MemoryExecutor()
    req = make_req(tmp_path, "echo hi; sleep 0.05; exit 3")
    h = ex.launch(req)
    assert h.pid >= 2**30
    assert h.log_path == tmp_path / "logs" / "job.1.log"
    assert h.status_path == ex.status_path(req.run_dir, "job", 1)
    assert ex.launched == [req]
    assert ex.alive(h)
    assert ex.exit_status(h) is None
    assert ex.running() == ["job"]
    st = await asyncio.wait_for(ex.wait(h), TIMEOUT)
    assert st == ExitStatus(3, None)
    assert ex.exit_status(h) == st
    assert not ex.alive(h)
    assert ex.running() == []
    assert h.log_path.read_text() == "hi\n"
    assert ex.log_size(str(h.log_path)) == 3
    assert ex.read_log(str(h.log_path), 1, 10) == b"i\n"
    # A second launch of the same attempt never overwrites the first log.
    h2 = ex.launch(req)
    assert h2.log_path == tmp_path / "logs" / "job.1.1.log"
    assert h2.pid != h.pid


async def test_program_and_signal(tmp_path: Path) -> None:
    ex = MemoryExecutor(lambda req: Script(0.0, None, 9, "x"))
    h = ex.launch(make_req(tmp_path, "anything"))
    assert await asyncio.wait_for(ex.wait(h), TIMEOUT) == ExitStatus(None, 9)


async def test_unknown_pid() -> None:
    ex = MemoryExecutor()
    ghost = Handle(123, 0.0, Path("/nonexistent.log"), Path("/nonexistent.status"))
    assert await asyncio.wait_for(ex.wait(ghost), TIMEOUT) == ExitStatus(None, None)
    assert not ex.alive(ghost)
    assert ex.exit_status(ghost) is None
    called: list[int] = []
    await ex.kill(ghost, 1.0, on_signalled=lambda: called.append(1))
    assert called == [1]
    assert ex.log_size("/nonexistent.log") is None
    assert ex.read_log("/nonexistent.log", 0, 10) == b""


async def test_kill_gives_signal_15_and_calls_on_signalled(tmp_path: Path) -> None:
    ex = MemoryExecutor()
    h = ex.launch(make_req(tmp_path, "sleep 100"))
    waiter = asyncio.create_task(ex.wait(h))
    called: list[int] = []
    await ex.kill(h, 10.0, on_signalled=lambda: called.append(1))
    assert called == [1]
    assert await asyncio.wait_for(waiter, TIMEOUT) == ExitStatus(None, 15)
    assert not ex.alive(h)
    # An ended job: still calls back, status unchanged.
    await ex.kill(h, 10.0, on_signalled=lambda: called.append(2))
    assert called == [1, 2]
    assert ex.exit_status(h) == ExitStatus(None, 15)


async def test_suspend_stops_the_clock_and_resume_continues(tmp_path: Path) -> None:
    ex = MemoryExecutor()
    h = ex.launch(make_req(tmp_path, "sleep 0.2; exit 4"))
    ex.suspend(h)
    await asyncio.sleep(0.3)  # past the job's whole duration, frozen
    assert ex.alive(h)
    assert ex.exit_status(h) is None
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.shield(ex.wait(h)), 0.1)
    assert ex.alive(h)
    ex.resume(h)
    assert ex.alive(h)  # it still had about 0.2 s to go
    assert await asyncio.wait_for(ex.wait(h), TIMEOUT) == ExitStatus(4, None)


async def test_kill_a_suspended_job(tmp_path: Path) -> None:
    ex = MemoryExecutor()
    h = ex.launch(make_req(tmp_path, "sleep 0.1"))
    ex.suspend(h)
    waiter = asyncio.create_task(ex.wait(h))
    await ex.kill(h, 1.0)
    assert await asyncio.wait_for(waiter, TIMEOUT) == ExitStatus(None, 15)


async def test_find_by_token(tmp_path: Path) -> None:
    ex = MemoryExecutor()
    h = ex.launch(make_req(tmp_path, "sleep 100", env={"GTUI_TOKEN": "tok-a"}))
    ex.launch(make_req(tmp_path, "sleep 100", name="other", env={"GTUI_TOKEN": "tok-b"}))
    assert ex.find("tok-a") == Found(h.pid, h.create_time)
    assert ex.find("nope") is None
    assert ex.find("") is None
    ex.finish(h.pid, exit_code=2)
    assert ex.find("tok-a") is None
    assert ex.exit_status(h) == ExitStatus(2, None)
    ex.finish("other")
    assert ex.running() == []
    with pytest.raises(KeyError):
        ex.finish("other")


async def test_unknown_cwd_raises_launch_error(tmp_path: Path) -> None:
    ex = MemoryExecutor()
    with pytest.raises(LaunchError, match="does not exist"):
        ex.launch(make_req(tmp_path, "echo hi", cwd=tmp_path / "missing"))
    (tmp_path / "file").write_text("")
    with pytest.raises(LaunchError, match="is not a directory"):
        ex.launch(make_req(tmp_path, "echo hi", cwd=tmp_path / "file"))
    assert ex.launched == []


def test_leftovers_via_leave_behind() -> None:
    ex = MemoryExecutor()
    assert ex.leftovers(["t1"]) == {}
    ex.leave_behind("t1", [7, 8])
    ex.leave_behind("t2", [9])
    assert ex.leftovers(["t1", "t3"]) == {"t1": [7, 8]}


def test_alive_checks_create_time_and_gpu_processes(tmp_path: Path) -> None:
    ex = MemoryExecutor()
    h = ex.launch(make_req(tmp_path, "sleep 100"))  # no loop runs: a launch from plain code
    assert ex.alive(h)
    assert not ex.alive(Handle(h.pid, h.create_time + 1.0, h.log_path, h.status_path))
    got = ex.gpu_processes({"job": h}, {h.pid: [(0, 100), (1, None)], 5: [(0, 1)]})
    assert got == {"job": [(h.pid, 0, 100), (h.pid, 1, 0)]}
    assert ex.gpu_processes({"job": h}, {}) == {}
    assert ex.free_port() == 20000
    assert ex.free_port() == 20001


def test_no_loop_launch_ends_by_the_clock(tmp_path: Path) -> None:
    ex = MemoryExecutor()
    h = ex.launch(make_req(tmp_path, "exit 5"))  # zero duration, no loop
    assert not ex.alive(h)
    assert ex.exit_status(h) == ExitStatus(5, None)


async def test_instance_outlives_a_loop(tmp_path: Path) -> None:
    """A job launched under one loop is re-adopted and awaited under another (a restart)."""
    ex = MemoryExecutor()

    async def start() -> Handle:
        return ex.launch(make_req(tmp_path, "sleep 0.1; exit 6"))

    # Launched under a loop of its own (in a thread) that is closed before the job ends.
    old = await asyncio.to_thread(asyncio.run, start())
    # The new "engine" rebuilds the handle from its record and adopts the job.
    rec = Handle(old.pid, old.create_time, old.log_path, old.status_path)
    assert ex.alive(rec)
    assert ex.running() == ["job"]
    assert await asyncio.wait_for(ex.wait(rec), TIMEOUT) == ExitStatus(6, None)
