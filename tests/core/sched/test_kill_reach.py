"""Killing a job reaches what it double-forked with ``env -i``.

``env -i`` drops the run id that :func:`gtui.core.exec.runner.kill_tree` looks for in a process's
environment, and a double fork takes the grandchild out of the job's tree. What is left to find
it by: its process group (a plain background child), its session (a child that made a process
group of its own, ``set -m``), and, for one that left the session too (``setsid``), the job's log,
which it still writes to. Real jobs, real signals; psutil says what survived.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from pathlib import Path

import psutil
import pytest

from gtui.core.sched.engine import Engine
from tests.conftest import write_queue
from tests.waiting import until

DEADLINE_S = 30.0  # generous: only a hang (or a survivor) reaches it

ENV = shutil.which("env") or "/usr/bin/env"
SETSID = shutil.which("setsid") or "/usr/bin/setsid"
BASH = shutil.which("bash") or "/bin/bash"

# How each grandchild is started; each writes its pid to daemon.pid once it runs. bash, not the
# wrapper's sh: dash ignores `set -m` without a terminal, bash gives the child its own group.
# Each leaves one trace only: the first two write elsewhere than the log, so the group and the
# session are all that tie them to the job; the last left both and has only the log.
QUIET = "> /dev/null 2>&1 &"
DOUBLE_FORKS = {
    "same_group": f"{ENV} -i {BASH} -c 'sleep 300 {QUIET} echo $! > daemon.pid'",
    "own_group": f"{ENV} -i {BASH} -c 'set -m; sleep 300 {QUIET} echo $! > daemon.pid'",
    "own_session": f"{ENV} -i {SETSID} {BASH} -c 'sleep 300 & echo $! > daemon.pid'",
}


def daemon_pid(path: Path) -> int | None:
    """The pid the grandchild's parent wrote, once the write is complete."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    return int(text) if text.endswith("\n") and text.strip().isdigit() else None


def alive(p: psutil.Process) -> bool:
    """The very process (psutil checks its create time), not a zombie: an orphan's zombie may
    wait for a reaper that a container does not have."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("how", sorted(DOUBLE_FORKS))
async def test_kill_reaches_a_grandchild_that_dropped_the_run_id(tmp_path: Path, how: str) -> None:
    pid_file = tmp_path / "daemon.pid"
    cmd = f"{DOUBLE_FORKS[how]}; while [ ! -e release ]; do sleep 0.05; done"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        kill_grace = "1s"
        [[jobs]]
        name = "forker"
        gpus = 0
        cwd = "{tmp_path}"
        cmd = '''{cmd}'''
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    task = asyncio.create_task(engine.run())
    daemon: psutil.Process | None = None
    try:
        await until(lambda: daemon_pid(pid_file) is not None, what="the grandchild's pid")
        pid = daemon_pid(pid_file)
        assert pid is not None
        daemon = psutil.Process(pid)
        job_pid = engine.view("forker").record.pid
        assert job_pid
        # It really escaped: out of the job's tree, and its environment lost the run id.
        await until(lambda: daemon.ppid() != job_pid, what="the grandchild's parent to exit")
        assert daemon not in psutil.Process(job_pid).children(recursive=True)
        assert "GTUI_RUN_ID" not in daemon.environ()
        if how != "same_group":
            assert os.getpgid(pid) != job_pid
        if how == "own_session":
            assert os.getsid(pid) != job_pid

        await engine.kill(["forker"])
        await until(lambda: engine.view("forker").record.state.value == "killed", what="killed")
        await until(lambda: not alive(daemon), what=f"the {how} grandchild {pid} to be gone")
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()
        if daemon is not None and alive(daemon):
            daemon.send_signal(signal.SIGKILL)


async def test_kill_spares_a_reader_of_the_log(tmp_path: Path) -> None:
    """Only a process that writes to the job's log is the job's: a ``tail -f`` of it is the
    user's own, and must outlive the kill (kill returns once all it took for the job's are
    gone, so a tail taken for one would be dead by then)."""
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        kill_grace = "1s"
        [[jobs]]
        name = "talker"
        gpus = 0
        cwd = "{tmp_path}"
        cmd = "echo hello; while [ ! -e release ]; do sleep 0.05; done"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    task = asyncio.create_task(engine.run())
    tail: asyncio.subprocess.Process | None = None
    try:
        await until(
            lambda: any(v.record.state.value == "running" for v in engine.jobs()), what="running"
        )
        log = Path(engine.view("talker").record.log or "")
        await until(lambda: log.read_text() == "hello\n", what="the job's first line")
        tail = await asyncio.create_subprocess_exec(
            "tail", "-f", str(log), stdout=asyncio.subprocess.PIPE
        )
        assert tail.stdout is not None
        assert await asyncio.wait_for(tail.stdout.readline(), DEADLINE_S) == b"hello\n"
        await engine.kill(["talker"])
        assert engine.view("talker").record.state.value == "killed"
        assert tail.returncode is None and alive(psutil.Process(tail.pid))
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()
        if tail is not None and tail.returncode is None:
            tail.kill()
            await tail.wait()
