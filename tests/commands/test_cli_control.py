"""``gtui kill / pause / resume / retry / add`` end to end: a real ``gtui run`` scheduler in a
subprocess, its control socket, and real job processes; and the same commands with no scheduler
(they change the saved state under the queue lock)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from gtui import cli
from gtui.core.control import client
from gtui.core.control.rpc import request
from gtui.core.model import JobRecord, JobState
from gtui.core.paths import queue_paths
from gtui.core.state.lock import QueueLock
from gtui.core.state.store import Store
from tests.conftest import gtui, write_queue
from tests.reliability.live import start_live
from tests.waiting import wait_for as wait_until

FAKE = "2x80G"


def verb(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line in this process (quicker than a subprocess, for the many small calls of
    the no-scheduler tests); the scheduler, when there is one, is always a real subprocess."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())




def records(q: Path) -> dict[str, JobRecord]:
    with Store(queue_paths(q).db, readonly=True) as store:
        return store.load()


def state(q: Path, name: str) -> str | None:
    rec = records(q).get(name)
    return rec.state.value if rec else None


def live_job(q: Path, name: str) -> dict[str, Any] | None:
    """The job as the running scheduler has it now (its control socket's status)."""
    reply = request(q, "status")
    if not reply or not reply.get("ok"):
        return None
    for job in reply["status"]["jobs"]:
        if job["name"] == name:
            return dict(job)
    return None


def live_state(q: Path, name: str) -> str | None:
    job = live_job(q, name)
    return str(job["state"]) if job else None


def alive(p: psutil.Process) -> bool:
    """Running and not a zombie (in a container nobody may reap an orphan's zombie)."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def statuses(procs: list[psutil.Process]) -> set[str]:
    out = set()
    for p in procs:
        try:
            out.add(p.status())
        except psutil.NoSuchProcess:
            pass
    return out


class Scheduler:
    """A real ``gtui run`` in a subprocess, its event log in a file."""

    def __init__(self, q: Path) -> None:
        self.q = q
        self.log = q.parent / "run.out"
        self._out = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gtui", "run", str(q), "--fake-gpus", FAKE],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        wait_until(self.answers, what="the scheduler's control socket")

    def answers(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()
        reply = request(self.q, "ping")
        return bool(reply and reply.get("pid") == self.proc.pid)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._out.close()


@pytest.fixture
def long_queue(tmp_path: Path) -> Path:
    return write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.2s"
        kill_grace = "1s"

        [[jobs]]
        name = "long"
        cmd = "sleep 60 & wait"
        gpus = 1
        mem = "10G"
        """,
    )


@pytest.fixture
def scheduler(long_queue: Path) -> Iterator[Scheduler]:
    s = Scheduler(long_queue)
    yield s
    s.stop()
    for rec in records(long_queue).values():  # never leave a job behind
        for p in tree(rec.pid or 0):
            p.kill()


def running_tree(q: Path, name: str) -> list[psutil.Process]:
    wait_until(lambda: state(q, name) == "running", what=f"{name} running")
    pid = records(q)[name].pid
    assert pid is not None

    def has_sleep() -> bool:
        return any(p.name() == "sleep" for p in tree(pid))

    wait_until(has_sleep, what="the job's sleep")
    return tree(pid)


# ------------------------------------------------------------------ with a scheduler running
def test_pause_resume_kill_a_running_job(scheduler: Scheduler) -> None:
    q = scheduler.q
    procs = running_tree(q, "long")

    r = gtui("pause", str(q), "long")
    assert (r.returncode, r.stdout, r.stderr) == (0, "paused long\n", "")
    assert live_state(q, "long") == "suspended"
    wait_until(lambda: statuses(procs) == {psutil.STATUS_STOPPED}, what="SIGSTOP on the tree")

    r = gtui("resume", str(q), "long")
    assert (r.returncode, r.stdout) == (0, "resumed long\n")
    wait_until(lambda: psutil.STATUS_STOPPED not in statuses(procs), what="SIGCONT")
    assert live_state(q, "long") == "running"

    r = gtui("kill", str(q), "long")  # answers once SIGTERM is sent (tests/commands/test_cli_kill.py)
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.startswith("killing long: SIGTERM sent"), r.stdout
    wait_until(lambda: not any(alive(p) for p in procs), what="the tree gone")
    wait_until(lambda: state(q, "long") == "killed", what="long killed")
    assert scheduler.proc.wait(20) == 1  # nothing more can run; a job did not succeed
    assert "killed long" in scheduler.log.read_text()


def test_add_while_running_pause_the_queue_and_errors(scheduler: Scheduler) -> None:
    q = scheduler.q
    marker = q.parent / "added.out"
    running_tree(q, "long")

    r = gtui("pause", str(q))
    assert (r.returncode, r.stdout) == (0, "paused the queue\n")
    r = gtui("add", str(q), "--name", "hello", "--gpus", "0", "--", f"echo hi > {marker}")
    assert (r.returncode, r.stdout, r.stderr) == (0, "added hello to q.toml\n", "")
    assert 'name = "hello"' in q.read_text()
    # The proof that the pause held hello back: a scheduling pass looked at it and gave the
    # paused queue as its reason to wait (the policy's PAUSED_REASON), not a guessed delay.
    wait_until(
        lambda: (live_job(q, "hello") or {}).get("reason") == "queue paused",
        what="a scheduling pass to keep hello waiting because the queue is paused",
    )
    assert live_state(q, "hello") == "queued" and not marker.exists()

    r = gtui("resume", str(q))
    assert (r.returncode, r.stdout) == (0, "resumed the queue\n")
    wait_until(marker.exists, what="the added job to run")
    wait_until(lambda: state(q, "hello") == "done", what="hello done")

    r = gtui("kill", str(q), "nope")
    assert r.returncode == 2
    assert r.stderr.startswith("gtui: no job named 'nope' in q.toml (jobs: long, hello)")
    r = gtui("resume", str(q), "long")
    assert r.returncode == 2 and "only held or suspended jobs resume" in r.stderr
    assert "Traceback" not in r.stderr


def test_one_scheduler_per_queue_private_socket_no_network(scheduler: Scheduler) -> None:
    q = scheduler.q
    r = gtui("run", str(q), "--fake-gpus", FAKE)
    assert r.returncode == 3
    assert f"pid {scheduler.proc.pid}" in r.stderr
    assert "Traceback" not in r.stderr

    sock = queue_paths(q).socket
    assert stat.S_ISSOCK(sock.lstat().st_mode)
    assert stat.S_IMODE(sock.lstat().st_mode) == 0o600
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    assert sock.lstat().st_uid == os.getuid()

    running_tree(q, "long")
    proc = psutil.Process(scheduler.proc.pid)
    assert proc.net_connections(kind="inet") == []
    unix = [c for c in proc.net_connections(kind="unix") if c.laddr == str(sock)]
    assert unix, "the scheduler listens on its Unix socket"


# ------------------------------------------------------------------ with no scheduler
@pytest.fixture
def quick_queue(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    return write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.2s"

        [[jobs]]
        name = "a"
        gpus = 0
        cmd = "echo a >> {out}"

        [[jobs]]
        name = "bad"
        gpus = 0
        cmd = "echo bad >> {out}; exit 3"

        [[jobs]]
        name = "after-bad"
        gpus = 0
        after = ["bad"]
        cmd = "echo after-bad >> {out}"
        """,
    )


def ran(q: Path) -> list[str]:
    out = q.parent / "out"
    return out.read_text().split() if out.exists() else []


def test_pause_resume_with_no_scheduler(quick_queue: Path) -> None:
    q = quick_queue
    r = verb("pause", str(q), "a")
    assert (r.returncode, r.stdout) == (0, "paused a\n")
    assert "no scheduler runs q.toml" in r.stderr
    assert state(q, "a") == "held"

    assert gtui("run", str(q), "--fake-gpus", FAKE).returncode == 1
    assert ran(q) == ["bad"]  # a is held; after-bad is blocked by bad
    assert state(q, "after-bad") == "blocked"

    r = verb("resume", str(q), "a")
    assert (r.returncode, r.stdout) == (0, "resumed a\n")
    assert state(q, "a") == "queued"
    r = verb("retry", str(q), "bad")
    assert (r.returncode, r.stdout) == (0, "queued bad again\n")
    assert state(q, "bad") == "queued"
    assert state(q, "after-bad") == "queued"  # no longer blocked by it

    assert gtui("run", str(q), "--fake-gpus", FAKE).returncode == 1
    assert sorted(ran(q)) == ["a", "bad", "bad"]
    assert records(q)["bad"].attempt == 2


def test_kill_and_pause_the_queue_with_no_scheduler(quick_queue: Path) -> None:
    q = quick_queue
    r = verb("kill", str(q), "bad", "a")
    assert (r.returncode, r.stdout) == (0, "killed bad\nkilled a\n")
    assert state(q, "a") == state(q, "bad") == "killed"

    r = verb("pause", str(q))
    assert (r.returncode, r.stdout) == (0, "paused the queue\n")
    # A scheduler started on the paused queue honours the pause and waits for a resume:
    # it says so, starts nothing, and the resume reaches it live.
    live = start_live("run", str(q), "--fake-gpus", FAKE)
    proc = live.proc
    try:
        assert "gtui resume q.toml" in live.wait_for("queue paused: no new starts")
        wait_until(lambda: live_job(q, "after-bad") is not None, what="the scheduler to answer")
        assert ran(q) == []  # the engine honoured the saved pause
        r = verb("resume", str(q))
        assert (r.returncode, r.stdout, r.stderr) == (0, "resumed the queue\n", "")
        assert live.finish(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert ran(q) == []  # after-bad is blocked by the killed bad
    assert state(q, "after-bad") == "blocked"

    r = verb("retry", str(q), "a")
    assert r.returncode == 0
    r = verb("kill", str(q), "a", "nope")
    assert r.returncode == 2
    assert r.stderr.startswith("gtui: no job named 'nope' in q.toml (jobs: a, bad, after-bad)")
    assert state(q, "a") == "queued"  # nothing was done: all names are checked first
    r = verb("retry", str(q), "a")
    assert r.returncode == 2 and "a is queued: only finished jobs can be retried" in r.stderr


def test_add_with_no_scheduler_then_run(quick_queue: Path, tmp_path: Path) -> None:
    q = quick_queue
    sub = tmp_path / "sub"
    sub.mkdir()
    r = gtui(
        "add", str(q), "--name", "x", "--gpus", "0", "--priority", "5", "--",
        "sh", "-c", "echo 'x y' >> ../out",
        cwd=sub,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout == "added x to q.toml\n"
    assert "no scheduler runs q.toml" in r.stderr
    text = q.read_text()
    assert 'name = "x"' in text and "priority = 5" in text and 'cwd = "sub"' in text
    r = verb("pause", str(q), "bad")
    assert gtui("run", str(q), "--fake-gpus", FAKE).returncode == 1
    out = (q.parent / "out").read_text().splitlines()
    assert sorted(out) == ["a", "x y"]  # run in sub/, its words quoted as given


def test_an_orphaned_job_is_paused_and_killed_with_no_scheduler(long_queue: Path) -> None:
    q = long_queue
    s = Scheduler(q)
    try:
        procs = running_tree(q, "long")
        s.proc.send_signal(signal.SIGKILL)  # gtui dies; its job goes on
        s.proc.wait(10)
        assert all(alive(p) for p in procs)
        wait_until(lambda: QueueLock(q).holder() is None, what="the lock freed by the kernel")

        r = verb("pause", str(q), "long")
        assert (r.returncode, r.stdout) == (0, "paused long\n")
        wait_until(lambda: statuses(procs) == {psutil.STATUS_STOPPED}, what="SIGSTOP")
        assert state(q, "long") == "suspended"

        r = verb("kill", str(q), "long")
        assert (r.returncode, r.stdout) == (0, "killed long\n")
        assert not any(alive(p) for p in procs)
        assert state(q, "long") == "killed"
    finally:
        s.stop()
        for p in procs:
            if alive(p):
                p.kill()


def test_a_scheduler_that_holds_the_lock_but_does_not_answer(
    quick_queue: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(client, "ANSWER_WAIT_S", 0.3)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from gtui.core.state.lock import QueueLock; "
            "lock = QueueLock(sys.argv[1]); lock.acquire(); print('ok', flush=True); time.sleep(60)",
            str(quick_queue),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ok\n"
        assert cli.main(["pause", str(quick_queue), "a"]) == 3
        err = capsys.readouterr().err
        assert f"a gtui (pid {holder.pid}) runs q.toml but does not answer" in err
        assert not queue_paths(quick_queue).db.exists()  # nothing written behind its back
    finally:
        holder.kill()
        holder.wait()


def test_a_missing_queue_file_is_a_plain_error(tmp_path: Path) -> None:
    r = verb("kill", str(tmp_path / "nope.toml"), "a")
    assert r.returncode == 2
    assert "no such queue file" in r.stderr and "Traceback" not in r.stderr


def test_the_socket_verbs_name_the_same_jobs_as_the_cli(scheduler: Scheduler) -> None:
    """``pause`` with several names, one given twice: each job once, one line each."""
    q = scheduler.q
    running_tree(q, "long")
    r = verb("pause", str(q), "long", "long")
    assert (r.returncode, r.stdout) == (0, "paused long\n")
    assert JobState(live_state(q, "long")) == JobState.SUSPENDED
    r = verb("kill", str(q), "long")
    assert r.returncode == 0
