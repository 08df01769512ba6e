"""What the tests of the shell commands (log, follow, wait, move, rm, clean, edit,
stop, status --state/--watch, events) share: a real headless scheduler in a subprocess, the
commands as real subprocesses, and a cleanup that leaves no process behind.

The ``procs`` fixture (tests/conftest.py) gives a test its Procs.
"""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from gtui.core.control.server import request
from gtui.core.model import JobRecord
from gtui.core.paths import queue_paths
from gtui.core.state.lock import QueueLock
from gtui.core.state.store import Store
from tests.conftest import gtui as gtui  # the command tests import it from here too
from tests.conftest import write_queue
from tests.reliability.live import LiveOutput, start_live
from tests.waiting import wait_for

FAKE = "2x80G"
GATE = "while [ ! -e {f} ]; do sleep 0.05; done"  # a job that runs until the test says


def gate(name: str) -> str:
    return GATE.format(f=f"release-{name}")


def release(q: Path, name: str) -> None:
    (q.parent / f"release-{name}").touch()


def records(q: Path) -> dict[str, JobRecord]:
    db = queue_paths(q).db
    if not db.exists():
        return {}
    with Store(db, readonly=True) as store:
        return store.load()


def status(q: Path) -> dict[str, Any]:
    """The running scheduler's status (its control socket)."""
    reply = request(q, "status")
    assert reply and reply.get("ok"), reply
    result: dict[str, Any] = reply["status"]
    return result


def live_state(q: Path, name: str) -> str | None:
    reply = request(q, "status")
    if not reply or not reply.get("ok"):
        return None
    for job in reply["status"]["jobs"]:
        if job["name"] == name:
            return str(job["state"])
    return None


def final_state(q: Path, name: str) -> str | None:
    """The job's state from the running scheduler, or from the saved state once it has gone: a
    scheduler that finishes its queue exits, maybe before a poll of the live state sees the end."""
    live = live_state(q, name)
    if live is not None:
        return live
    rec = records(q).get(name)
    return rec.state.value if rec is not None else None


def live_order(q: Path) -> list[str]:
    return [str(j["name"]) for j in status(q)["jobs"]]


def lock_free(q: Path) -> bool:
    return QueueLock(queue_paths(q)).holder() is None


class Scheduler:
    """A real ``gtui run`` in a subprocess, its event log read live."""

    def __init__(self, q: Path) -> None:
        self.q = q
        self.live: LiveOutput = start_live("run", str(q), "--fake-gpus", FAKE)
        self.proc = self.live.proc
        wait_for(self.answers, what="the scheduler's control socket")

    def answers(self) -> bool:
        assert self.proc.poll() is None, self.live.text()
        reply = request(self.q, "ping")
        return bool(reply and reply.get("pid") == self.proc.pid)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


class Procs:
    """Every process a test starts, ended in its ``finally`` (and the jobs' trees with them)."""

    def __init__(self) -> None:
        self.schedulers: list[Scheduler] = []
        self.others: list[subprocess.Popen[Any]] = []
        self.queues: list[Path] = []

    def scheduler(self, q: Path) -> Scheduler:
        s = Scheduler(q)
        self.schedulers.append(s)
        if q not in self.queues:
            self.queues.append(q)
        return s

    def start(self, *args: str, env: dict[str, str] | None = None) -> LiveOutput:
        """``gtui ARGS...`` in the background, stdout and stderr read live together."""
        if env is None:
            live = start_live(*args)
        else:
            proc = subprocess.Popen(
                [sys.executable, "-m", "gtui", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                env=env,
            )
            live = LiveOutput(proc)
        self.others.append(live.proc)
        return live

    def track(self, q: Path) -> None:
        if q not in self.queues:
            self.queues.append(q)

    def close(self) -> None:
        for p in self.others:
            if p.poll() is None:
                p.kill()
            with contextlib.suppress(Exception):
                p.wait(10)
        for s in self.schedulers:
            with contextlib.suppress(Exception):
                s.kill()
        for q in self.queues:
            for name in records(q):
                (q.parent / f"release-{name}").touch()
            for rec in records(q).values():
                if not rec.pid:
                    continue
                with contextlib.suppress(psutil.Error):
                    root = psutil.Process(rec.pid)
                    for p in [root, *root.children(recursive=True)]:
                        with contextlib.suppress(psutil.Error):
                            p.kill()


def cleaned_procs() -> Iterator[Procs]:
    """The body of the ``procs`` fixture (tests/conftest.py): a Procs, closed after the test."""
    p = Procs()
    try:
        yield p
    finally:
        p.close()


def in_pty(*args: str, until: str | None = None, timeout: float = 30.0) -> tuple[int | None, bytes]:
    """``gtui ARGS...`` with a terminal for its stdout (a pty): its exit status and what it
    wrote. With ``until``, it is interrupted (SIGINT) once that text has appeared."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gtui", *args],
        stdout=slave,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "100", "LINES": "40", "TERM": "xterm"},
    )
    os.close(slave)
    out = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                out += chunk
            if until is not None and until.encode() in out and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                until = None
            if proc.poll() is not None and not ready:
                break
        else:
            raise AssertionError(f"timed out after {timeout:.0f} s: {bytes(out)!r}")
        return proc.wait(10), bytes(out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        os.close(master)


def long_then_next(tmp: Path) -> Path:
    """The queue most command tests start from: ``long`` prints hello-long, counts its starts in
    long.runs and runs until released; ``next`` waits for it."""
    return write_queue(
        tmp,
        f"""
        [settings]
        poll = "0.2s"
        kill_grace = "1s"

        [[jobs]]
        name = "long"
        gpus = 0
        cmd = "echo hello-long; echo run >> long.runs; {gate("long")}"

        [[jobs]]
        name = "next"
        gpus = 0
        after = ["long"]
        cmd = "true"
        """,
    )


# A queue of one CPU job (``{gate}``: its command, a gate() to hold it running) on one slot of
# two simulated GPUs: the adds' tests add beside it, into a running queue.
ONE_GATED_JOB = """
    [settings]
    fake_gpus = "2x80G"
    max_parallel = 1

    [[jobs]]
    name = "first"
    cmd = "{gate}"
    gpus = 0
"""
