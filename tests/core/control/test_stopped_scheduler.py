"""A stopped scheduler (Ctrl-Z on `gtui run`, `kill -STOP`): every command says so at once and
what became of its request, `status` and `log` answer from the saved state, and a request whose
client gave up is refused when the scheduler goes on, never applied late.

Real `gtui run` schedulers stopped with real signals; the client's waits against real sockets
whose other end reads nothing, reads and never answers, or is stopped while the client waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gtui.core.control.client import JobsNow, watch_jobs
from gtui.core.control.rpc import NoAnswer, exchange
from gtui.core.deadline import TooLate, within
from gtui.core.errors import EXIT_LOCKED, EXIT_UNKNOWN
from gtui.core.paths import QueuePaths, ensure_private_dir, queue_paths
from gtui.core.procstat import stopped_state
from gtui.core.queue.writeback import append_job
from tests.cli_helpers import (
    Procs,
    final_state,
    gtui,
    live_state,
    long_then_next,
    release,
)
from tests.conftest import write_queue
from tests.waiting import wait_for


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """A command against the stopped scheduler: it must end by itself, well within this. Its
    requests get a short deadline: a stopped scheduler's tests need no 30 s."""
    return gtui(*args, timeout=25, env={**os.environ, "GTUI_REQUEST_DEADLINE_S": "2"})


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """``pid`` stopped (state T) for the block, continued after it."""
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: stopped_state(pid) is not None, what=f"pid {pid} stopped")
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def names_in_file(q: Path) -> list[str]:
    return [ln.split('"')[1] for ln in q.read_text().splitlines() if ln.startswith("name = ")]


def test_commands_say_at_once_that_the_scheduler_is_stopped_and_do_nothing_late(
    tmp_path: Path, procs: Procs
) -> None:
    q = long_then_next(tmp_path)
    sched = procs.scheduler(q)
    pid = sched.proc.pid
    wait_for(lambda: live_state(q, "long") == "running", what="long running")
    with stopped(pid):
        r = run("status", str(q))
        assert r.returncode == 0, r.stderr
        head = r.stdout.splitlines()
        said = next(ln for ln in head if "stopped (T state)" in ln)
        assert said.startswith(f"The scheduler (pid {pid}) of q.toml is stopped (T state) since ")
        assert f"resume it with `kill -CONT {pid}` or `fg`; the saved state is shown" in said
        assert any(ln.split()[:2] == ["long", "running"] for ln in head), r.stdout
        assert any(ln.split()[:2] == ["next", "queued"] for ln in head), r.stdout

        r = run("status", str(q), "--json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert "stopped (T state)" in doc["scheduler"]["not_answering"]
        assert {j["name"]: j["state"] for j in doc["jobs"]} == {"long": "running", "next": "queued"}
        assert "stopped (T state)" in r.stderr

        r = run("log", str(q), "long")
        assert r.returncode == 0, r.stderr
        assert r.stdout == "hello-long\n"

        for args in (
            ("add", str(q), "--name", "extra", "--", "true"),
            ("pause", str(q), "next"),
            ("kill", str(q), "long"),
            ("stop", str(q)),
        ):
            r = run(*args)
            assert r.returncode == EXIT_LOCKED, (args, r.stdout, r.stderr)
            assert f"(pid {pid}) of q.toml is stopped (T state)" in r.stderr, r.stderr
            assert f"`kill -CONT {pid}`" in r.stderr and "not done" in r.stderr, r.stderr
            assert "did not answer" not in r.stderr and "Traceback" not in r.stderr
            assert r.stdout == ""

    # Going on, it did none of what it was asked while stopped.
    wait_for(sched.answers, what="the scheduler answering again")
    assert names_in_file(q) == ["long", "next"]
    assert live_state(q, "next") == "queued" and live_state(q, "long") == "running"
    assert live_state(q, "extra") is None

    # The add said "not done", so doing it again adds the job once.
    r = gtui("add", str(q), "--name", "extra", "--", "true")
    assert r.returncode == 0, r.stderr
    assert names_in_file(q) == ["long", "next", "extra"]
    wait_for(lambda: live_state(q, "extra") == "done", what="extra done")
    release(q, "long")
    wait_for(lambda: final_state(q, "next") == "done", what="next done")


def test_a_watcher_reads_the_saved_state_of_a_stopped_scheduler_at_once(
    tmp_path: Path, procs: Procs
) -> None:
    """`gtui follow / wait / events` and an attached dashboard watch the scheduler's events:
    a stopped one would send its hello only when continued, so the saved state is read."""
    q = long_then_next(tmp_path)
    sched = procs.scheduler(q)
    wait_for(lambda: live_state(q, "long") == "running", what="long running")

    async def first() -> JobsNow:
        async with contextlib.aclosing(watch_jobs(queue_paths(q))) as jobs:
            return await asyncio.wait_for(anext(jobs), 20)

    with stopped(sched.proc.pid):
        now = asyncio.run(first())
    assert not now.live
    assert {n: j["state"] for n, j in now.jobs.items()} == {"long": "running", "next": "queued"}
    release(q, "long")
    wait_for(lambda: final_state(q, "next") == "done", what="next done")


def send(paths: QueuePaths, request: dict[str, Any]) -> socket.socket:
    """A request written to the scheduler's socket as an older or slower client would: no look
    at its state first."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(str(paths.socket))
    s.sendall(json.dumps(request).encode() + b"\n")
    return s


def reply(s: socket.socket) -> dict[str, Any]:
    with s, s.makefile("rb") as f:
        answer: dict[str, Any] = json.loads(f.readline())
        return answer


def test_a_request_that_reaches_the_scheduler_after_its_deadline_is_refused(
    tmp_path: Path, procs: Procs
) -> None:
    q = long_then_next(tmp_path)
    paths = queue_paths(q)
    sched = procs.scheduler(q)
    wait_for(lambda: live_state(q, "long") == "running", what="long running")
    with stopped(sched.proc.pid):
        due = time.time() + 0.5
        sent = [
            send(paths, {"op": "pause", "names": ["next"], "deadline": due}),
            send(paths, {"op": "kill", "names": ["long"], "wait": False, "deadline": due}),
            send(paths, {"op": "add", "fields": {"name": "extra", "cmd": "true"}, "deadline": due}),
        ]
        wait_for(lambda: time.time() > due + 0.2, what="the requests' deadline to pass")
    for s in sent:
        answer = reply(s)
        assert answer["ok"] is False and answer["exit"] == EXIT_LOCKED, answer
        assert "after its deadline" in answer["error"] and "not done" in answer["error"], answer
    # The queued job was not paused (it would have been held, or suspended once running), the
    # running one not killed, and no job added.
    assert live_state(q, "next") == "queued" and live_state(q, "long") == "running"
    assert names_in_file(q) == ["long", "next"]
    release(q, "long")
    wait_for(lambda: final_state(q, "next") == "done", what="next done")


# -- the client's wait, against sockets whose other end does not answer ----------------------


@pytest.fixture(name="paths")
def _paths(tmp_path: Path) -> QueuePaths:
    paths = queue_paths(write_queue(tmp_path, "[[jobs]]\nname = 'a'\ncmd = 'true'\n"))
    ensure_private_dir(paths.socket.parent)
    return paths


def listening(paths: QueuePaths) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(paths.socket))
    server.listen(4)
    return server


def test_a_request_never_read_before_its_deadline_is_not_done(paths: QueuePaths) -> None:
    # It listens and never accepts: a scheduler too busy to take the request.
    with listening(paths), pytest.raises(NoAnswer) as caught:
        exchange(paths, "pause", timeout=1.0, deadline=0.5, names=["a"])
    assert caught.value.exit_code == EXIT_LOCKED
    assert str(caught.value) == (
        f"the scheduler (pid {os.getpid()}) of q.toml did not take the request within 0.5s "
        "(busy, or its machine is swapping). It will refuse it: the pause was not done"
    )


def test_a_request_read_and_never_answered_is_of_unknown_outcome(paths: QueuePaths) -> None:
    with listening(paths) as server:
        got: list[bytes] = []

        def take() -> None:
            conn, _ = server.accept()
            got.append(conn.makefile("rb").readline())
            got.append(conn.recv(1))  # until the client gives up and closes

        reader = threading.Thread(target=take)
        reader.start()
        with pytest.raises(NoAnswer) as caught:
            exchange(paths, "pause", timeout=1.0, deadline=0.5, names=["a"])
        reader.join(30)
    assert caught.value.exit_code == EXIT_UNKNOWN
    assert str(caught.value) == (
        f"the scheduler (pid {os.getpid()}) of q.toml did not answer within 1s. It had read your "
        "request: whether it was done is unknown; `gtui status q.toml` shows it"
    )
    assert json.loads(got[0])["deadline"] > 0  # the request carried its deadline


def test_a_long_reply_that_keeps_coming_is_waited_for(paths: QueuePaths) -> None:
    """The reply time is how long nothing comes, not the whole reply's: a status of 100,000
    jobs comes in pieces for longer than that."""
    with listening(paths) as server:

        def answer_slowly() -> None:
            conn, _ = server.accept()
            with conn:
                conn.makefile("rb").readline()
                conn.sendall(b'{"ok":true,"pid":1')
                for _ in range(8):  # 2 s in all, past the 1 s the client waits for nothing
                    time.sleep(0.25)
                    conn.sendall(b" ")
                conn.sendall(b"}\n")

        writer = threading.Thread(target=answer_slowly)
        writer.start()
        line = exchange(paths, "ping", timeout=1.0)
        writer.join(30)
    assert line is not None and json.loads(line) == {"ok": True, "pid": 1}


FAKE_SCHEDULER = """
import socket, sys, time
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen(4)
open(sys.argv[2] + ".listening", "w").close()
conn, _ = server.accept()
while not conn.recv(1, socket.MSG_PEEK):
    pass
if sys.argv[3] == "read":
    conn.recv(1 << 20)
open(sys.argv[2], "w").close()
time.sleep(600)
"""


@pytest.mark.parametrize("reads", [False, True])
def test_a_scheduler_stopped_while_the_client_waits_is_said_at_once(
    paths: QueuePaths, tmp_path: Path, reads: bool
) -> None:
    seen = tmp_path / "seen"
    fake = subprocess.Popen(
        [
            sys.executable,
            "-c",
            FAKE_SCHEDULER,
            str(paths.socket),
            str(seen),
            "read" if reads else "peek",
        ]
    )
    try:
        wait_for(Path(f"{seen}.listening").exists, what="the fake scheduler listening")
        caught: list[BaseException] = []

        def ask() -> None:
            try:
                exchange(paths, "add", timeout=60.0, deadline=30.0, fields={"cmd": "true"})
            except BaseException as e:
                caught.append(e)

        client = threading.Thread(target=ask)
        client.start()
        wait_for(seen.exists, what="the request in the fake scheduler's socket")
        os.kill(fake.pid, signal.SIGSTOP)
        client.join(30)
        assert not client.is_alive()
        (error,) = caught
        assert isinstance(error, NoAnswer) and error.exit_code == EXIT_UNKNOWN
        text = str(error)
        assert text.startswith(f"the scheduler (pid {fake.pid}) of q.toml is stopped (T state) ")
        assert f"; resume it with `kill -CONT {fake.pid}` or `fg`. " in text, text
        if reads:
            assert "It stopped after it had read your request: whether it was done is unknown" in (
                text
            )
        else:
            assert "Your request waits in its socket: done if it resumes before " in text
            assert ", refused after; `gtui status q.toml` shows which" in text
    finally:
        fake.kill()
        fake.wait(10)


def test_an_edit_that_waited_for_the_file_lock_past_its_deadline_is_not_made(
    tmp_path: Path,
) -> None:
    import fcntl

    q = write_queue(tmp_path, "[[jobs]]\nname = 'a'\ncmd = 'true'\n")
    before = q.read_bytes()
    paths = queue_paths(q)
    ensure_private_dir(paths.file_lock.parent)
    caught: list[BaseException] = []
    due = time.time() + 0.3

    def add() -> None:
        try:
            with within(due):
                append_job(q, {"name": "b", "cmd": "true"}, pool=None)
        except BaseException as e:
            caught.append(e)

    fd = os.open(paths.file_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another edit holds the queue file
        adder = threading.Thread(target=add)
        adder.start()
        wait_for(lambda: time.time() > due + 0.1, what="the deadline to pass")
    finally:
        os.close(fd)
    adder.join(30)
    (error,) = caught
    assert isinstance(error, TooLate) and error.exit_code == EXIT_LOCKED
    assert q.read_bytes() == before


async def test_a_task_started_while_a_request_is_applied_does_not_inherit_its_deadline(
    tmp_path: Path,
) -> None:
    """A job's run started by an ``add`` outlives the request: a queue-file edit it makes
    later is not refused as that request's, long after the request's deadline."""
    from gtui.core.deadline import check, detached

    async def later() -> str:
        await asyncio.sleep(0)
        check()  # raises TooLate under the late request's deadline
        return "applied"

    with within(time.time() - 1):  # a request whose deadline has passed
        with pytest.raises(TooLate):
            await asyncio.create_task(later())  # what a plain task inherits
        task = asyncio.create_task(later(), context=detached())
    assert await task == "applied"
