"""Faults: for each, what the user sees, and that nothing else breaks.

Real processes, real files, real signals, real mounts where the machine allows them; only NVML
is faked (tests/fake_pynvml, driven between reads as tests/core/gpus/test_gpus_nvml.py does).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import resource
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import psutil
import pytest

from gtui.cli import main as cli_main
from gtui.core.api import Event, GpusRead, JobChanged, Notice
from gtui.core.control import server as control
from gtui.core.errors import GtuiError
from gtui.core.gpus.nvml import NvmlBackend
from gtui.core.gpus.snapshot import GpuSnapshot
from gtui.core.model import JobState
from gtui.core.paths import queue_paths
from gtui.core.sched.engine import Engine
from gtui.core.state import store as store_mod
from tests import waiting
from tests.conftest import TESTS, gtui, write_queue
from tests.reliability.helpers import (
    finish,
    remount,
    start_run,
    state_of,
    status,
    tmpfs,
    wait_for,
)
from tests.reliability.mixed import check_no_orphans, kill_queue_processes, queue_processes

FAKE_NVML = TESTS / "fake_pynvml" / "pynvml" / "__init__.py"


def _load_fake_nvml() -> ModuleType:
    """The fake pynvml under its own name (shared with tests/core/gpus/test_gpus_nvml.py)."""
    name = "gtui_tests_fake_pynvml"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FAKE_NVML)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


nv: Any = _load_fake_nvml()


def until_released(flag: str = "release") -> str:
    """Shell that waits for the test to create ``flag`` in the queue's directory (the jobs' cwd):
    a job built on it is still running at any later point the test chooses, however loaded the
    machine, instead of for a duration guessed to outlast the test's next steps."""
    return f"while [ ! -e {flag} ]; do sleep 0.05; done"


def release(directory: Path, flag: str = "release") -> None:
    """Let the jobs waiting on ``flag`` (see until_released) go on."""
    (directory / flag).touch()


class Run:
    """A background `gtui run` whose output a thread collects as it comes, so a test can wait
    for a line with a deadline (a bare readline would block past any deadline)."""

    started: ClassVar[list[Run]] = []  # this test's runs, for _no_leftovers

    def __init__(self, queue: Path, **kw: Any) -> None:
        self.queue = queue
        self.proc = start_run(queue, **kw)
        Run.started.append(self)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    def wait_line(self, part: str, timeout: float = 30.0) -> str:
        """The first output line holding ``part``, once it has been printed."""
        deadline = time.monotonic() + timeout
        while True:
            ended = self.proc.poll() is not None and not self._reader.is_alive()
            found = [line for line in list(self.lines) if part in line]
            if found:
                return found[0]
            if ended or time.monotonic() > deadline:
                raise AssertionError(f"gtui run never printed {part!r}; it printed:\n{self.text}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Kill it and its jobs if it still runs (a test that failed half-way)."""
        if self.proc.poll() is None:
            kill_queue_processes(self.queue)
            self.proc.kill()
            self.proc.wait(30)

    def finish(self, timeout: float = 60) -> str:
        """Its whole output, once it has exited (and no traceback in it)."""
        self.proc.wait(timeout)
        self._reader.join(timeout)
        out = self.text
        assert "Traceback" not in out, out
        return out


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> Iterator[None]:
    """Whatever a test leaves running of its jobs is killed (and the test fails if it was not
    supposed to leave anything: each test checks that itself)."""
    yield
    for queue in tmp_path.rglob("*.toml"):
        kill_queue_processes(queue)
    for run in Run.started:  # a test that failed half-way (its queue file perhaps deleted)
        run.stop()
    Run.started.clear()


# ---------------------------------------------------------------------------------------------
# NVML errors mid-run (in-process engine over the fake pynvml)


@asynccontextmanager
async def engine_on_nvml(queue: Path) -> AsyncIterator[tuple[Engine, list[Event]]]:
    backend = NvmlBackend(nvml=nv, retry_s=0.2)
    engine = Engine(queue, backend=backend)
    events: list[Event] = []
    engine.subscribe(events.append)
    try:
        yield engine, events
    finally:
        await engine.shutdown(kill_jobs=True)
        nv.fake_reset()


async def until(cond: Callable[[], object], timeout: float = 20.0, what: str = "") -> None:
    """The shared wait, reading the engine's GtuiError (its queue not loaded yet) as "not yet"."""
    await waiting.until(cond, timeout, what, ignoring=(GtuiError,))


def notices(events: list[Event]) -> list[str]:
    return [f"{e.level}: {e.text}" for e in events if isinstance(e, Notice)]


def jstate(engine: Engine, name: str) -> JobState:
    return engine.view(name).record.state


NVML_QUEUE = f"""
[settings]
poll = "0.1s"
kill_grace = "1s"

[[jobs]]
name = "on-gpu"
cmd = "{until_released()}; echo trained"
gpus = 1
mem = "10G"

[[jobs]]
name = "both-gpus"
cmd = "echo two"
gpus = 2
mem = "10G"
after = ["on-gpu"]

[[jobs]]
name = "cpu-chain"
cmd = "sleep 0.2"
gpus = 0
after = ["on-gpu"]
"""


def gpu_reads(events: list[Event], since: int, cond: Callable[[GpuSnapshot], bool]) -> int:
    """How many distinct GPU readings the engine acted on (a pass, then GpusRead) after
    ``events[since]`` that satisfy ``cond``: the proof that it looked, not a sleep."""
    taken = {
        e.snapshot.taken_at for e in events[since:] if isinstance(e, GpusRead) and cond(e.snapshot)
    }
    return len(taken)


def gpu_lost(index: int) -> Callable[[GpuSnapshot], bool]:
    return lambda snap: any(g.index == index and g.lost for g in snap.gpus)


async def test_gpu_lost_mid_run(tmp_path: Path) -> None:
    """A GPU falls off the bus while a job runs on it: the user is told once, the job is not
    touched, nothing new goes to that GPU until it answers again, CPU jobs go on."""
    nv.fake_reset([nv.FakeGpu(), nv.FakeGpu()])
    queue = write_queue(tmp_path, NVML_QUEUE)
    async with engine_on_nvml(queue) as (engine, events):
        task = asyncio.create_task(engine.run(exit_when_idle=True))
        await until(lambda: jstate(engine, "on-gpu") == JobState.RUNNING)
        nv.fake_set_lost(1)
        await until(lambda: any("GPU 1" in n for n in notices(events)), what="GPU 1 seen lost")
        release(tmp_path)  # on-gpu ends while GPU 1 is lost
        await until(lambda: jstate(engine, "on-gpu") == JobState.DONE, what="on-gpu done")
        await until(lambda: jstate(engine, "cpu-chain") == JobState.DONE, what="cpu job done")
        mark = len(events)
        await until(
            lambda: gpu_reads(events, mark, gpu_lost(1)) >= 5,
            what="five GPU readings and passes with GPU 1 lost after on-gpu ended",
        )
        assert jstate(engine, "both-gpus") == JobState.QUEUED
        # (Reasons are worked out at most every 0.5 s: waited for, not read at once.)
        await until(
            lambda: "GPU1 lost" in (engine.view("both-gpus").record.reason or ""), what="why"
        )
        reason = engine.view("both-gpus").record.reason
        assert engine.view("on-gpu").record.exit_code == 0, "the job on the lost GPU went on"
        lost = [n for n in notices(events) if "GPU 1" in n]
        assert lost and "not answering" in lost[0], notices(events)
        assert len(lost) == 1, f"told once, not at every poll: {lost}"
        nv.fake_set_lost(1, False)
        assert await asyncio.wait_for(task, 20) == 0
        assert jstate(engine, "both-gpus") == JobState.DONE
        back = [n for n in notices(events) if "GPU 1" in n][1:]
        assert back and "answers again" in back[0], notices(events)
    print(f"\nwaiting reason while GPU 1 was lost: {reason}\nnotice: {lost[0]}\n{back[0]}")


async def test_driver_library_mismatch_mid_run(tmp_path: Path) -> None:
    """The driver is upgraded under a running queue (NVML: driver/library version mismatch):
    running jobs go on and end normally, CPU jobs still start, GPU jobs wait, and everything
    resumes once NVML answers again."""
    nv.fake_reset([nv.FakeGpu(), nv.FakeGpu()])
    queue = write_queue(tmp_path, NVML_QUEUE)
    async with engine_on_nvml(queue) as (engine, events):
        task = asyncio.create_task(engine.run(exit_when_idle=True))
        await until(lambda: jstate(engine, "on-gpu") == JobState.RUNNING)
        nv.fake_state.broken = nv.NVML_ERROR_LIB_RM_VERSION_MISMATCH
        await until(
            lambda: any("lost contact with the NVIDIA driver" in n for n in notices(events)),
            what="the engine to see the driver gone",
        )
        release(tmp_path)  # on-gpu ends while NVML is down
        await until(lambda: jstate(engine, "on-gpu") == JobState.DONE, what="on-gpu done")
        await until(lambda: jstate(engine, "cpu-chain") == JobState.DONE, what="cpu job done")
        mark = len(events)
        await until(
            lambda: gpu_reads(events, mark, lambda snap: bool(snap.error)) >= 5,
            what="five GPU readings and passes with NVML down after on-gpu ended",
        )
        assert jstate(engine, "both-gpus") == JobState.QUEUED
        await until(
            lambda: "do not match" in (engine.view("both-gpus").record.reason or ""), what="why"
        )
        reason = engine.view("both-gpus").record.reason
        seen = notices(events)
        nv.fake_state.broken = None
        assert await asyncio.wait_for(task, 20) == 0
        assert jstate(engine, "both-gpus") == JobState.DONE
        assert engine.view("on-gpu").record.exit_code == 0
    print("\n" + "\n".join(n for n in seen if "NVIDIA" in n or "GPU" in n) + f"\n{reason}")


async def test_nvml_call_times_out(tmp_path: Path) -> None:
    """NVML_ERROR_TIMEOUT from one call: that GPU is shown as not answering and retried; the
    other GPU keeps working and the queue completes."""
    nv.fake_reset([nv.FakeGpu(), nv.FakeGpu()])
    queue = write_queue(tmp_path, NVML_QUEUE)
    async with engine_on_nvml(queue) as (engine, events):
        task = asyncio.create_task(engine.run(exit_when_idle=True))
        await until(lambda: jstate(engine, "on-gpu") == JobState.RUNNING)
        nv.fake_state.failing["nvmlDeviceGetMemoryInfo_v2"] = nv.NVML_ERROR_TIMEOUT
        nv.fake_state.failing["nvmlDeviceGetMemoryInfo"] = nv.NVML_ERROR_TIMEOUT
        await until(lambda: any("Timeout" in n for n in notices(events)), what="a notice")
        release(tmp_path)
        await until(lambda: jstate(engine, "cpu-chain") == JobState.DONE, what="cpu job done")
        assert jstate(engine, "both-gpus") == JobState.QUEUED  # the pass that started cpu-chain
        # (Reasons are worked out at most every 0.5 s: waited for, not read at once.)
        await until(lambda: "lost" in (engine.view("both-gpus").record.reason or ""), what="why")
        reason = engine.view("both-gpus").record.reason
        nv.fake_state.failing.clear()
        assert await asyncio.wait_for(task, 20) == 0
    print("\n" + "\n".join(n for n in notices(events) if "Timeout" in n)[:400] + f"\n{reason}")


async def test_nvml_call_that_hangs_does_not_stop_cpu_jobs(tmp_path: Path) -> None:
    """A driver call that blocks (a GPU falling off the bus can hang NVML for tens of seconds):
    GPU reads wait for it, but jobs that need no GPU reading keep starting and ending, and the
    control commands keep answering."""
    nv.fake_reset([nv.FakeGpu(), nv.FakeGpu()])
    queue = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"

        [[jobs]]
        name = "c1"
        cmd = "{until_released()}"
        gpus = 0

        [[jobs]]
        name = "c2"
        cmd = "true"
        gpus = 0
        after = ["c1"]

        [[jobs]]
        name = "c3"
        cmd = "true"
        gpus = 0
        after = ["c2"]

        [[jobs]]
        name = "keeps-it-running"
        cmd = "{until_released("release-last")}"
        gpus = 0
        """,
    )
    unblock = threading.Event()
    entered = threading.Event()
    returned = threading.Event()
    real = nv.nvmlDeviceGetUtilizationRates

    def hanging(handle: Any) -> Any:
        entered.set()
        try:
            unblock.wait(30)
            return real(handle)
        finally:
            returned.set()

    async with engine_on_nvml(queue) as (engine, events):
        task = asyncio.create_task(engine.run(exit_when_idle=True))
        await until(lambda: jstate(engine, "c1") == JobState.RUNNING, what="c1 running")
        nv.nvmlDeviceGetUtilizationRates = hanging
        try:
            await until(entered.is_set, what="NVML to hang")
            release(tmp_path)  # c1 ends, and c2 and c3 must run, while the call still hangs
            await until(
                lambda: jstate(engine, "c3") == JobState.DONE,
                timeout=15,
                what="c2 and c3 to run while NVML hangs",
            )
            reply = await asyncio.to_thread(control.request, queue, "status", timeout=10)
            hung_throughout = not returned.is_set()
        finally:
            unblock.set()
            nv.nvmlDeviceGetUtilizationRates = real
        assert hung_throughout, "the NVML call returned before c3 ended: nothing was proven"
        assert reply is not None and reply["ok"], f"the control socket must answer: {reply}"
        await until(
            lambda: any("NVML answers again" in n for n in notices(events)),
            what="a poll to find the NVML call returned",
        )
        release(tmp_path, "release-last")  # the engine is kept running until it has told so
        assert await asyncio.wait_for(task, 20) == 0
        seen = notices(events)
        slow = [n for n in seen if "NVML has not answered" in n]
        assert len(slow) == 1, seen
    print(f"\n{slow[0]}")


# ---------------------------------------------------------------------------------------------
# the log directory unwritable or full


SIMPLE = """
[settings]
poll = "0.2s"
fake_gpus = "2x80G"
log_dir = "{log_dir}"

[[jobs]]
name = "a"
cmd = "echo hello from a"
gpus = 0

[[jobs]]
name = "b"
cmd = "echo hello from b"
mem = "10G"
"""


def test_log_dir_unwritable(tmp_path: Path) -> None:
    """The log directory cannot be written: each job fails to launch with the reason and how to
    fix it; the scheduler, the store and the queue file are fine, and a retry after the fix
    runs them."""
    logs = tmp_path / "logs"
    with tmpfs(logs, readonly=True) as mounted:
        if not mounted:
            if os.geteuid() == 0:
                pytest.skip("root ignores permissions and no read-only mount can be made here")
            logs.chmod(0o500)
        queue = write_queue(tmp_path, SIMPLE.replace("{log_dir}", "logs"))
        before = queue.read_bytes()
        out = finish(start_run(queue))
        assert "failed a" in out and "failed b" in out, out
        jobs = status(queue)
        for name in "ab":
            diag = jobs[name]["diagnosis"]
            assert jobs[name]["state"] == "failed" and diag["kind"] == "launch", jobs[name]
            assert "cannot create its log in" in diag["line"]
            assert "log_dir" in diag["hint"] and "writable directory" in diag["hint"]
        assert queue.read_bytes() == before
        shown = next(line for line in out.splitlines() if "failed a" in line)
        assert "(not started): launch: job a: cannot create its log in" in shown, shown
        if mounted:
            remount(logs, "rw")
        else:
            logs.chmod(0o700)
        retry = gtui("retry", str(queue), "a", "b")
        assert retry.returncode == 0, retry.stderr
        finish(start_run(queue))
        assert {n: j["state"] for n, j in status(queue).items()} == {"a": "done", "b": "done"}
        assert "hello from a" in (logs / "a.2.log").read_text()
    print(f"\n{shown}")


FILLER = """
[settings]
poll = "0.2s"
fake_gpus = "2x80G"

[[jobs]]
name = "filler"
cmd = "head -c 3000000 /dev/zero | tr '\\\\0' x; echo; echo filled"
gpus = 0

[[jobs]]
name = "quiet"
cmd = "sleep 0.5"
gpus = 0

[[jobs]]
name = "after-filler"
cmd = "echo never"
gpus = 0
after = ["filler"]
"""


def test_log_disk_full(tmp_path: Path) -> None:
    """The disk holding the logs fills up (a 1 MiB tmpfs): the job whose output no longer fits
    fails and its diagnosis says the disk is full (its own error message could not be written);
    a job that writes nothing still succeeds; the scheduler and its state are unharmed."""
    logs = tmp_path / "logs"
    with tmpfs(logs, "1m") as mounted:
        if not mounted:
            pytest.skip("cannot mount a small tmpfs here (test_log_file_size_limit covers it)")
        queue = write_queue(tmp_path, FILLER)
        out = finish(start_run(queue))
        jobs = status(queue)
        assert jobs["filler"]["state"] == "failed", jobs["filler"]
        diag = jobs["filler"]["diagnosis"]
        assert diag["kind"] == "no_space", diag
        assert jobs["quiet"]["state"] == "done"
        assert jobs["after-filler"]["state"] == "blocked"
        shown = next(line for line in out.splitlines() if "failed filler" in line)
    print(f"\n{shown}")


def _limit_file_size() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


def test_log_file_size_limit(tmp_path: Path) -> None:
    """RLIMIT_FSIZE (ulimit -f, set by some admins) on gtui and so on its jobs: the job whose
    log reaches it dies of SIGXFSZ and the diagnosis names the limit; other jobs, the store
    (far below the limit) and the scheduler are unharmed."""
    queue = write_queue(tmp_path, FILLER)
    out = finish(start_run(queue, preexec_fn=_limit_file_size))
    jobs = status(queue)
    assert jobs["filler"]["state"] == "failed" and jobs["filler"]["signal"] == 25, jobs
    assert jobs["filler"]["diagnosis"]["kind"] == "file_too_large", jobs["filler"]
    assert jobs["quiet"]["state"] == "done"
    assert jobs["after-filler"]["state"] == "blocked"
    shown = next(line for line in out.splitlines() if "failed filler" in line)
    print(f"\n{shown}")


def test_event_log_on_a_full_device(tmp_path: Path) -> None:
    """`gtui run > /dev/full`: one plain line and exit 2, before anything runs."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    queue = write_queue(tmp_path, SIMPLE.replace("{log_dir}", "logs"))
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "gtui", "run", str(queue)],
            stdout=full,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.strip() == "gtui: No space left on device", done.stderr
    assert {j["state"] for j in status(queue).values()} == {"queued"}


def live_status(queue: Path) -> dict[str, Any]:
    """The running scheduler's own answer over its socket (never the store's copy)."""
    reply = control.request(queue, "status", timeout=10)
    assert reply is not None and reply["ok"], f"the scheduler must be there and answer: {reply}"
    result: dict[str, Any] = reply["status"]
    return result


def test_state_dir_disk_full(tmp_path: Path) -> None:
    """The queue's own directory (state database, exit-status files) fills up: gtui says it
    cannot save, starts nothing more, keeps the jobs' ends in memory and saves them as soon as
    there is room again; then it finishes with every state right."""
    where = tmp_path / "full"
    spec = tmp_path / "gpus.txt"  # off the full disk: read again at every poll
    spec.write_text("2x80G\n")
    with tmpfs(where, "1m") as mounted:
        if not mounted:
            pytest.skip("cannot mount a small tmpfs here")
        queue = write_queue(where, FILLER.replace('"2x80G"', f'"@{spec}"'))
        run = Run(queue)
        log = where / "logs" / "filler.1.log"
        try:
            run.wait_line("cannot save the job states")
            live: dict[str, str] = {}

            def ended_in_memory() -> bool:
                live.update({j["name"]: j["state"] for j in live_status(queue)["jobs"]})
                # quiet ended, or never started: the disk may fill before its start is saved
                return live["filler"] == "failed" and live["quiet"] in ("done", "queued")

            wait_for(ended_in_memory, what="the ends kept in memory")
            conn = sqlite3.connect(f"{queue_paths(queue).db.as_uri()}?mode=ro", uri=True)
            try:
                stored = dict(conn.execute("SELECT name, state FROM jobs").fetchall())
            finally:
                conn.close()
            assert stored["filler"] == "running", f"its end cannot have been saved: {stored}"
            # It waits for room, polling: each new GPU reading comes from a poll that first tried
            # to save again (Engine._poll). Two of them, with no job left to end meanwhile.
            for used in (1, 2):
                spec.write_text(f"2x80G:{used}G\n")
                wait_for(
                    lambda used=used: live_status(queue)["gpus"][0]["mem_used_mib"] == used * 1024,
                    what=f"a poll that reads {used}G used, while the disk is full",
                )
            assert "saved again" not in run.text, run.text
            # `gtui status` says it in words, at the top.
            text = gtui("status", str(queue))
            assert text.returncode == 0, text.stderr
            problem = next(ln for ln in text.stdout.splitlines() if ln.startswith("problem: "))
            assert "cannot save the job states" in problem and "the disk is full" in problem, (
                problem
            )
            log.unlink()  # free the space
            out = run.finish()
            jobs = status(queue)
            assert jobs["filler"]["state"] == "failed"
            assert jobs["quiet"]["state"] == "done"
            assert jobs["after-filler"]["state"] == "blocked"
            assert "job states saved again" in out, out
            assert check_no_orphans(queue) == []
        finally:
            run.stop()  # before the unmount: a live gtui would keep the tmpfs busy


# ---------------------------------------------------------------------------------------------
# the state database locked or corrupt

TWO = f"""
[settings]
poll = "0.1s"
fake_gpus = "2x80G"

[[jobs]]
name = "a"
cmd = "{until_released()}; echo a"
gpus = 0

[[jobs]]
name = "b"
cmd = "echo b"
gpus = 0
after = ["a"]
"""


@pytest.fixture
def short_busy_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite waits BUSY_TIMEOUT_MS (5 s) for a lock; 0.3 s here keeps the tests short."""
    monkeypatch.setattr(store_mod, "BUSY_TIMEOUT_MS", 300)


@contextmanager
def held_db_lock(db: Path) -> Iterator[sqlite3.Connection]:
    """A write lock on the database from another connection (a user's `sqlite3` shell, say),
    held until the block ends, whatever the engine takes meanwhile. The connection reads what
    the database holds, from inside the lock."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield conn
    finally:
        conn.close()  # rolls back, and the lock is gone


def test_state_db_locked_at_start(
    tmp_path: Path, short_busy_wait: None, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = write_queue(tmp_path, TWO)
    release(tmp_path)
    assert gtui("validate", str(queue)).returncode == 0
    db = queue_paths(queue).db
    db.parent.mkdir(mode=0o700)
    sqlite3.connect(db).close()
    with held_db_lock(db):
        rc = cli_main(["run", str(queue)])
        err = capsys.readouterr().err
    assert rc == 2, err
    assert "is locked by another process" in err and "wait and retry" in err, err
    assert "Traceback" not in err
    rc = cli_main(["run", str(queue)])  # the lock is gone: it runs
    assert rc == 0
    print(f"\n{err.strip()}")


async def test_state_db_locked_mid_run(tmp_path: Path, short_busy_wait: None) -> None:
    """Another process holds the database locked while a job ends: the end is kept and shown
    with an error saying why it is not saved; nothing starts until it is; then it is saved and
    the queue goes on. Nothing is lost, nothing runs twice."""
    queue = write_queue(tmp_path, TWO)
    engine = Engine(queue)
    events: list[Event] = []
    engine.subscribe(events.append)
    try:
        task = asyncio.create_task(engine.run(exit_when_idle=True))
        await until(lambda: engine.started and jstate(engine, "a") == JobState.RUNNING)
        with held_db_lock(queue_paths(queue).db) as held:
            release(tmp_path)  # a ends while the database is locked
            await until(
                lambda: any("cannot save the job states" in n for n in notices(events)),
                what="the engine to hit the lock",
            )
            assert jstate(engine, "a") == JobState.DONE, "the end is kept and shown"
            saved = held.execute("SELECT state FROM jobs WHERE name = 'a'").fetchone()
            assert saved == ("running",), f"the store must not have it yet: {saved}"
            mark = len(events)
            await until(
                lambda: sum(isinstance(e, GpusRead) for e in events[mark:]) >= 3,
                what="three scheduling passes while the end is unsaved",
            )
            assert jstate(engine, "b") == JobState.QUEUED, "nothing starts while unsaved"
        assert await asyncio.wait_for(task, 20) == 0
    finally:
        await engine.shutdown(kill_jobs=True)
    seen = notices(events)
    errors = [n for n in seen if "cannot save the job states" in n]
    assert len(errors) == 1 and "locked by another process" in errors[0], seen
    assert any("saved again" in n for n in seen), seen
    order = [
        (e.job.record.name, e.job.record.state.value)
        for e in events
        if isinstance(e, JobChanged) and e.job.record.state.value in ("running", "done")
    ]
    assert order == [("a", "running"), ("a", "done"), ("b", "running"), ("b", "done")]
    jobs = status(queue)
    assert {n: (j["state"], j["attempt"]) for n, j in jobs.items()} == {
        "a": ("done", 1),
        "b": ("done", 1),
    }
    print(f"\n{errors[0]}")


async def test_state_db_locked_when_a_job_would_start(
    tmp_path: Path, short_busy_wait: None
) -> None:
    """The database is locked when a waiting job's turn comes (another user frees the GPU):
    the start is not saved, so the job is not started, and it starts once the lock is gone.
    (The refused start used to leave the engine's caches counting the job as running: it
    never started, and `gtui run` never exited.)"""
    gpus = tmp_path / "gpus.txt"
    gpus.write_text("80G:80G\n")  # full: another user holds it
    queue = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        fake_gpus = "@gpus.txt"

        [[jobs]]
        name = "g"
        cmd = "echo g"
        gpus = 1
        mem = "10G"
        """,
    )
    engine = Engine(queue)
    events: list[Event] = []
    engine.subscribe(events.append)
    try:
        task = asyncio.create_task(engine.run(exit_when_idle=True))
        await until(
            lambda: engine.started and bool(engine.view("g").record.reason),
            what="g waiting for the full GPU",
        )
        with held_db_lock(queue_paths(queue).db) as held:
            gpus.write_text("80G\n")  # the other user leaves
            await until(
                lambda: any("cannot save the job states" in n for n in notices(events)),
                what="the engine to hit the lock when starting g",
            )
            assert jstate(engine, "g") == JobState.QUEUED, "a start not saved is not made"
            saved = held.execute("SELECT state FROM jobs WHERE name = 'g'").fetchone()
            assert saved in (None, ("queued",)), saved
        await until(task.done, what="g to run and the engine to finish once the lock is gone")
        assert task.result() == 0
    finally:
        await engine.shutdown(kill_jobs=True)
    assert [
        e.job.record.state.value
        for e in events
        if isinstance(e, JobChanged) and e.job.record.name == "g"
    ][-2:] == ["running", "done"]
    assert {n: (j["state"], j["attempt"]) for n, j in status(queue).items()} == {"g": ("done", 1)}


def _corrupt_with_garbage(db: Path) -> None:
    for extra in (Path(f"{db}-wal"), Path(f"{db}-shm")):
        extra.unlink(missing_ok=True)
    db.write_bytes(b"this is not a database" * 200)


def _corrupt_a_page(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    for i in range(100, len(data)):  # keep the header, scramble every page
        data[i] = (data[i] * 7 + 13) % 256
    db.write_bytes(bytes(data))


def _corrupt_a_record(db: Path) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE jobs SET data = '{not json' WHERE name = 'a'")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def _records(db: Path) -> object:
    """What a corrupt database still holds: its bytes, or its job rows where SQLite reads it."""
    try:
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return conn.execute("SELECT name, state, data FROM jobs ORDER BY name").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return db.read_bytes()


@pytest.mark.parametrize(
    "corrupt", [_corrupt_with_garbage, _corrupt_a_page, _corrupt_a_record], ids=lambda f: f.__name__
)
def test_state_db_corrupt(tmp_path: Path, corrupt: Callable[[Path], None]) -> None:
    """A corrupt state database: a command given with no scheduler says so and how to repair
    it, in plain words, and changes nothing; `gtui run` rebuilds it at its start (the damaged
    file kept aside as it was), saying so, and runs nothing again."""
    queue = write_queue(tmp_path, TWO)
    release(tmp_path)
    finish(start_run(queue))
    db = queue_paths(queue).db
    corrupt(db)
    broken = _records(db)
    for args in (("status",), ("kill", "a"), ("retry", "a")):
        done = gtui(*args[:1], str(queue), *args[1:])
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        assert "is damaged" in done.stderr and "gtui doctor" in done.stderr, done.stderr
        assert _records(db) == broken, "what the broken database holds must be left as it was"
    out = finish(start_run(queue))
    assert "was damaged" in out and "rebuilt from its backup" in out, out
    assert {j["state"] for j in status(queue).values()} == {"done"}, out
    assert {j["attempt"] for j in status(queue).values()} == {1}, out
    aside = re.search(r"kept as (\S+);", out)
    assert aside, out
    assert _records(Path(aside[1])) == broken
    print(f"\n{corrupt.__name__}: {done.stderr.strip()}\n{out}")


# ---------------------------------------------------------------------------------------------
# the queue file deleted or broken while running

LONG_THEN_NEXT = f"""
[settings]
poll = "0.1s"
fake_gpus = "2x80G"

[[jobs]]
name = "a"
cmd = "{until_released()}"
gpus = 0

[[jobs]]
name = "b"
cmd = "echo b"
gpus = 0
after = ["a"]
"""


def test_queue_file_deleted_while_running(tmp_path: Path) -> None:
    queue = write_queue(tmp_path, LONG_THEN_NEXT)
    run = Run(queue)
    wait_for(lambda: queue_paths(queue).db.exists() and state_of(queue, "a") == "running")
    text = queue.read_text()
    queue.unlink()
    shown = run.wait_line("is gone")  # seen while a still runs
    assert "gtui keeps running the last good version" in shown, shown
    release(tmp_path)
    out = run.finish()
    assert run.proc.returncode == 0, out
    assert "done a" in out and "done b" in out, out
    queue.write_text(text)
    assert {j["state"] for j in status(queue).values()} == {"done"}
    print("\n" + shown.strip())


def test_queue_file_broken_while_running(tmp_path: Path) -> None:
    queue = write_queue(tmp_path, LONG_THEN_NEXT)
    run = Run(queue)
    wait_for(lambda: queue_paths(queue).db.exists() and state_of(queue, "a") == "running")
    queue.write_text(queue.read_text().replace('name = "b"', 'name = "b'))  # a TOML error
    shown = run.wait_line("not reloaded")  # seen while a still runs
    assert "queue file not reloaded, last good version kept" in shown, shown
    release(tmp_path)
    out = run.finish()
    assert run.proc.returncode == 0, out
    assert "done a" in out and "done b" in out, out
    print("\n" + shown.strip())


# ---------------------------------------------------------------------------------------------
# jobs that misbehave


def test_job_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    queue = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        kill_grace = "0.5s"
        fake_gpus = "1x80G"

        [[jobs]]
        name = "stubborn"
        cmd = "trap '' TERM; echo started; while true; do sleep 0.1; done"
        gpus = 1

        [[jobs]]
        name = "slow-timeout"
        cmd = "trap '' TERM; {until_released()}"  # never released: only its timeout ends it
        gpus = 0
        timeout = "0.5s"

        [[jobs]]
        name = "next"
        cmd = "echo next"
        gpus = 1
        after = ["stubborn"]
        """,
    )
    proc = start_run(queue)
    wait_for(lambda: queue_paths(queue).db.exists() and state_of(queue, "stubborn") == "running")
    killed = gtui("kill", str(queue), "stubborn")
    assert killed.returncode == 0, killed.stderr
    out = finish(proc)
    jobs = status(queue)
    assert jobs["stubborn"]["state"] == "killed" and jobs["stubborn"]["signal"] == 9, jobs
    assert jobs["slow-timeout"]["state"] == "failed" and jobs["slow-timeout"]["signal"] == 9, jobs
    assert jobs["slow-timeout"]["diagnosis"]["kind"] == "timeout"
    assert jobs["next"]["state"] == "blocked"
    assert check_no_orphans(queue, wait_s=0) == []
    print(
        "\n" + "\n".join(line for line in out.splitlines() if "stubborn" in line or "slow" in line)
    )


DAEMON = """
import os, time
top = os.getpid()
if os.fork():
    os._exit(0)
while os.getppid() == top:  # the job's own python has not exited yet
    time.sleep(0.01)
os.setsid()
middle = os.getpid()
if os.fork():
    os._exit(0)
while os.getppid() == middle:  # not re-parented yet: the double fork is not over
    time.sleep(0.01)
print("daemon", os.getpid(), flush=True)
while not os.path.exists("release"):  # never created: it runs until killed
    time.sleep(0.05)
"""


def test_job_with_a_daemonized_grandchild(tmp_path: Path) -> None:
    """A job that double-forks a daemon (setsid, re-parented to init): killing the job kills
    the daemon too. A job that ends normally and leaves its daemon: the job is done and the
    daemon is left running (documented in docs/reliability.md); the scheduler is not disturbed."""
    (tmp_path / "daemon.py").write_text(DAEMON)
    queue = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        kill_grace = "0.5s"
        fake_gpus = "1x80G"

        [[jobs]]
        name = "killed-with-daemon"
        cmd = "python3 daemon.py; {until_released()}"
        gpus = 0

        [[jobs]]
        name = "ends-leaving-daemon"
        cmd = "python3 daemon.py; echo parent done"
        gpus = 0

        [[jobs]]
        name = "next"
        cmd = "echo next"
        gpus = 1
        after = ["ends-leaving-daemon"]
        """,
    )
    run = Run(queue)
    log = tmp_path / "logs" / "killed-with-daemon.1.log"
    wait_for(lambda: log.exists() and "daemon" in log.read_text(), what="the daemon's pid")
    daemon_pid = int(log.read_text().split()[1])  # printed once the double fork is over
    daemon = psutil.Process(daemon_pid)
    job = next(
        p
        for p in psutil.Process(run.proc.pid).children()
        if p.environ().get("GTUI_JOB") == "killed-with-daemon"
    )
    tree = {job.pid} | {p.pid for p in job.children(recursive=True)}
    assert daemon_pid not in tree and daemon.ppid() not in tree, "it left the job's tree"
    assert os.getsid(daemon_pid) != os.getsid(job.pid), "and its session: killpg misses it"
    assert gtui("kill", str(queue), "killed-with-daemon").returncode == 0
    out = run.finish()
    wait_for(
        lambda: not daemon.is_running() or daemon.status() == psutil.STATUS_ZOMBIE,
        what="the daemon to die with its killed job",
    )
    jobs = status(queue)
    assert jobs["killed-with-daemon"]["state"] == "killed"
    assert jobs["ends-leaving-daemon"]["state"] == "done"
    assert jobs["next"]["state"] == "done"
    left = queue_processes(queue)
    assert [p.environ()["GTUI_JOB"] for p in left] == ["ends-leaving-daemon"], out
    print(f"\nleft running after its job ended: {[' '.join(p.cmdline())[:60] for p in left]}")


def test_job_that_closes_its_stdout(tmp_path: Path) -> None:
    queue = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        fake_gpus = "1x80G"

        [[jobs]]
        name = "closes-quietly"
        cmd = "exec >&- 2>&-; sleep 0.2; exit 0"
        gpus = 0

        [[jobs]]
        name = "closes-then-writes"
        cmd = "exec >&-; echo lost"
        gpus = 0

        [[jobs]]
        name = "next"
        cmd = "echo next"
        after = ["closes-quietly"]
        """,
    )
    out = finish(start_run(queue))
    jobs = status(queue)
    assert jobs["closes-quietly"]["state"] == "done"
    assert jobs["next"]["state"] == "done"
    bad = jobs["closes-then-writes"]
    assert bad["state"] == "failed" and bad["exit_code"] == 1
    assert "write error: Bad file descriptor" in bad["diagnosis"]["line"]
    print(
        "\n"
        + next(line for line in out.splitlines() if "closes-then-writes" in line and "fail" in line)
    )


FLOOD = """
import os, sys, time
i = 0
while not os.path.exists("release"):
    for _ in range(130):
        sys.stdout.write(f"\\rstep {i} loss 0.{i % 997:03d}")
        i += 1
    sys.stdout.flush()
    time.sleep(0.01)
sys.stdout.write(f"\\rwrote {i} records")
sys.exit(int(sys.argv[1]))
"""


def records_in(log: Path) -> int:
    """Progress records written so far (each starts with a carriage return)."""
    return log.read_bytes().count(b"\r") if log.exists() else 0


def test_ten_thousand_records_a_second_without_newline(tmp_path: Path) -> None:
    """A job writes about 10,000 progress records a second with no newline (tqdm-style \\r)
    until released: meanwhile the scheduler stays responsive (its socket answers, another job
    starts and ends), the whole output reaches the log, and the failure diagnosis stays one
    short line."""
    (tmp_path / "flood.py").write_text(FLOOD)
    queue = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.2s"
        fake_gpus = "1x80G"

        [[jobs]]
        name = "flood"
        cmd = "python3 flood.py 3"
        gpus = 0

        [[jobs]]
        name = "meanwhile"
        cmd = "sleep 0.5; echo ok"
        gpus = 0
        """,
    )
    run = Run(queue)
    wait_for(lambda: queue_paths(queue).db.exists() and state_of(queue, "flood") == "running")
    log = tmp_path / "logs" / "flood.1.log"
    answered = 0

    def answering_through_the_flood() -> bool:
        nonlocal answered
        states = {j["name"]: j["state"] for j in live_status(queue)["jobs"]}
        assert states["flood"] == "running", states  # not released yet: it floods on
        answered += 1
        return answered >= 3 and states["meanwhile"] == "done" and records_in(log) > 10_000

    wait_for(
        answering_through_the_flood,
        timeout=60,
        what="three answers, meanwhile done and 10,000 records, all during the flood",
    )
    release(tmp_path)
    run.finish()
    jobs = status(queue)
    assert jobs["meanwhile"]["state"] == "done"
    flood = jobs["flood"]
    assert flood["state"] == "failed" and flood["exit_code"] == 3
    data = log.read_bytes()
    total = int(re.search(rb"wrote (\d+) records", data)[1])  # type: ignore[index]
    assert data.count(b"\r") == total + 1, "every record reaches the log"
    assert total > 10_000
    assert b"\n" not in data
    assert len(flood["diagnosis"]["line"]) <= 400, flood["diagnosis"]
    print(
        f"\n{total} records in {len(data)} bytes; the scheduler answered {answered} times "
        f"meanwhile; diagnosis: {flood['diagnosis']['kind']}: {flood['diagnosis']['line'][:80]}"
    )


async def test_the_dashboard_follows_a_flood_without_newlines(tmp_path: Path) -> None:
    """The same flood, followed live in the dashboard's log panel: the panel shows a bounded
    window (the last progress record, as a terminal would after its carriage returns), keys keep
    working throughout, and the other job still starts and ends."""
    from gtui.ui.app import GtuiApp
    from gtui.ui.widgets.log_view import LogView

    (tmp_path / "flood.py").write_text(FLOOD)
    queue = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.2s"
        fake_gpus = "1x80G"

        [[jobs]]
        name = "flood"
        cmd = "python3 flood.py 0"
        gpus = 0

        [[jobs]]
        name = "meanwhile"
        cmd = "sleep 0.5; echo ok"
        gpus = 0
        """,
    )
    engine = Engine(queue)
    app = GtuiApp(engine, host="testhost")
    widest = 0
    presses = 0
    flood_log = tmp_path / "logs" / "flood.1.log"
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            while not (app.main.ready and app.main.table.select("flood")):
                await pilot.pause(0.05)
            await pilot.press("l")  # the log has the focus (enter opens the job's details)
            log = app.main.query_one(LogView)
            deadline = time.monotonic() + 60
            while not (
                presses >= 4
                and jstate(engine, "meanwhile") == JobState.DONE
                and records_in(flood_log) > 10_000
            ):
                assert time.monotonic() < deadline, "the flood, the keys or meanwhile stalled"
                assert jstate(engine, "flood") == JobState.RUNNING  # until released
                await pilot.press("f")  # follow off, then on: each key is handled
                assert not log.follow
                await pilot.press("f")
                assert log.follow
                presses += 2
                await pilot.pause(0.1)
                widest = max(widest, len(log.text().plain))
            release(tmp_path)
            await until(lambda: jstate(engine, "flood") == JobState.DONE, what="flood done")
            await until(lambda: "records" in log.text().plain, what="the last record shown")
            shown = log.text().plain
            widest = max(widest, len(shown))
    finally:
        await engine.shutdown(kill_jobs=True)
    size = flood_log.stat().st_size
    assert widest <= 120 * 30, f"the panel holds {widest} characters of a {size}-byte log"
    print(
        f"\nlog {size} bytes, no newline; the panel showed at most {widest} characters; "
        f"{presses} keys handled meanwhile; last: {shown.strip()[-40:]!r}"
    )


def test_a_second_scheduler_is_refused(tmp_path: Path) -> None:
    """Two `gtui run` on one queue: the second exits 3 naming the first; nothing runs twice."""
    queue = write_queue(tmp_path, LONG_THEN_NEXT)
    first = Run(queue)
    wait_for(lambda: queue_paths(queue).db.exists() and state_of(queue, "a") == "running")
    second = gtui("run", str(queue))  # a runs until released: the first still holds the queue
    assert second.returncode == 3, second.stderr
    assert f"pid {first.proc.pid}" in second.stderr, second.stderr
    assert second.stdout == "", "the second started nothing, not even its event log"
    release(tmp_path)
    out = first.finish()
    assert first.proc.returncode == 0, out
    assert out.count("start a ") == 1 and out.count("start b ") == 1, out
    assert {j["attempt"] for j in status(queue).values()} == {1}
    print(f"\n{second.stderr.strip()}")
