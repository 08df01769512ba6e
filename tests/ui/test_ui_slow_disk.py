"""A log on a disk that stops answering never freezes the dashboard.

A job's log on a hung network mount blocks whoever opens or reads it. The stand-in here is a
FIFO put where a finished job's log was: opening it for reading blocks until a writer comes,
exactly like a stalled read. The dashboard (Pilot, real Engine, real files) selects that job
and must go on answering keys: moving to another job shows that job's log, the help screen
and the job's details (whose log panel reads the same file) open and close, the search input
opens and takes a search. The reads go through aiofiles, off the event loop; a read still
stuck does not pile up others behind it.

If the screen did freeze, the event loop would never come back to the test: a watchdog thread
then feeds the FIFO's reader (which unblocks it) and the test fails saying so, instead of
hanging the suite.

A running job's log is read by more than the log panel: the dashboard's progress column and the
in-process scheduler (which shares the loop) read its tail as it grows, and the scheduler reads
it once more when the job fails. A FIFO cannot stand in there (its size is 0, so nobody reads
it): the stand-in is a regular file under a write lease (fcntl F_SETLEASE) held by another
process, which keeps its size and blocks every open() until the lease goes, as a hung network
mount does.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gtui.core.model import JobState
from gtui.core.sched import runs
from gtui.ui.logtail import LogTail, SearchQuery
from gtui.ui.screens.detail import DetailScreen
from gtui.ui.screens.help import HelpScreen
from gtui.ui.widgets.log_view import LogView
from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard, screen_text, select, state
from tests.waiting import pilot_until as until

QUEUE = """
[settings]
poll = "0.2s"

[[jobs]]
name = "stalled"
cmd = "echo first-job-output"
gpus = 0

[[jobs]]
name = "fine"
cmd = "echo second-job-output"
gpus = 0
"""

WATCHDOG_S = 60.0  # far beyond any answer; only a frozen loop reaches it


def _feed_readers(fifo: Path) -> int:
    """Open the FIFO for writing, without blocking, once per reader stuck in open(); each
    then reads an end of file. Returns how many were released."""
    released = 0
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno == errno.ENXIO:  # no reader waits (any more)
                return released
            raise
        os.close(fd)
        released += 1
        if released > 100:
            return released


@contextmanager
def stalled_file(path: Path) -> Iterator[threading.Event]:
    """``path`` replaced by a FIFO nobody writes; yields the event the watchdog sets if it had
    to unblock a frozen screen."""
    path.unlink()
    os.mkfifo(path)
    done, fired = threading.Event(), threading.Event()

    def watchdog() -> None:
        if not done.wait(WATCHDOG_S):
            fired.set()
            while not done.is_set():
                _feed_readers(path)
                done.wait(0.1)

    t = threading.Thread(target=watchdog, daemon=True)
    t.start()
    try:
        yield fired
    finally:
        done.set()
        t.join()
        _feed_readers(path)  # release the reads the dashboard left waiting


async def test_a_stalled_log_leaves_the_dashboard_responsive(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    async with dashboard(q) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "stalled") is JobState.DONE, what="done")
        await until(pilot, lambda: state(engine, "fine") is JobState.DONE, what="done")
        log = engine.log_path("stalled")
        assert log is not None
        await pilot.press("E")  # the done jobs shown, for j and k to walk between them
        await until(pilot, lambda: not app.main.table.fold_done, what="done jobs shown")
        await select(pilot, app, "fine")
        await until(pilot, lambda: "second-job-output" in app.main.log_view.text().plain)
        with stalled_file(log) as fired:
            await until(pilot, lambda: app.main.table.select("stalled"), what="select stalled")
            await until(pilot, lambda: app.main.table.selected == "stalled")
            await pilot.pause(0.3)  # the log panel's poll ticks over the stuck file
            # Keys still work: another job's log, the help screen, the log search.
            await pilot.press("j")
            await until(pilot, lambda: app.main.table.selected == "fine", what="j moved")
            view = app.main.query_one(LogView)
            await until(pilot, lambda: "second-job-output" in view.text().plain, what="log")
            await pilot.press("k")
            await until(pilot, lambda: app.main.table.selected == "stalled", what="k moved")
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, HelpScreen), what="back")
            await pilot.press("enter")  # the job's details, whose log panel reads the same file
            await until(pilot, lambda: isinstance(app.screen, DetailScreen), what="details")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, DetailScreen), what="back")
            await pilot.press("l", "slash")
            await until(pilot, lambda: app.focused is not None and app.focused.id == "log-search", what="search input")
            await pilot.press("x", "enter")
            await until(pilot, lambda: view.search_query is not None, what="search taken")
            await pilot.press("escape", "escape", "j")
            await until(pilot, lambda: app.main.table.selected == "fine", what="j moved")
            await until(pilot, lambda: "second-job-output" in view.text().plain, what="log")
            assert not fired.is_set(), "the screen froze on the stalled log"
        # The disk answers again (a file where the FIFO was): the panel shows it.
        log.unlink()
        log.write_text("the-disk-is-back\n")
        await pilot.press("k")
        await until(pilot, lambda: "the-disk-is-back" in view.text().plain, what="recovered")


def _tricky_log(path: Path) -> list[int]:
    """A log with short lines, a tqdm bar redrawn over 300 KiB, a 5 MiB line with no newline
    in LINE_SCAN, colours; returns its line starts."""
    parts = [b"start\n", b"\x1b[31mred\x1b[0m line\n"]
    parts += [b"".join(b"\r%3d%%|####| step %d" % (i % 100, i) for i in range(12000)) + b"\n"]
    parts += [b"line %d\n" % i for i in range(2000)]
    parts += [b"x" * (5 * 1024 * 1024) + b"\n", b"after the long one\n", b"tail without newline"]
    data = b"".join(parts)
    path.write_bytes(data)
    starts = [0] + [i + 1 for i, c in enumerate(data) if c == 10]
    return [s for s in starts if s < len(data)]


async def test_the_aiofiles_reader_gives_the_lines_the_block_reader_gives(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tricky.log"
    starts = _tricky_log(path)
    tail = LogTail(path)
    assert await tail.size_async() == tail.size() == path.stat().st_size
    for n in (1, 5, 40):
        assert await tail.last_lines_async(n) == tail.last_lines(n), n
    for at in [*starts[:4], *starts[1000:1003], *starts[-4:], tail.size()]:
        for n in (1, 7, 30):
            assert await tail.lines_from_async(at, n) == tail.lines_from(at, n), (at, n)
            assert await tail.lines_before_async(at, n) == tail.lines_before(at, n), (at, n)
    for text in ("step 11999", "line 1500", "red line", "after the long", "nowhere"):
        q = SearchQuery(text)
        for at in (0, starts[1000], tail.size()):
            for forward in (True, False):
                got = await tail.search_async(q, at, forward=forward, chunk=64 * 1024)
                assert got == tail.search(q, at, forward=forward, chunk=64 * 1024), text
    missing = LogTail(tmp_path / "missing.log")
    assert await missing.last_lines_async(5) == [] and await missing.size_async() == 0
    assert not await missing.exists_async() and await tail.exists_async()


RUNNING_QUEUE = """
[settings]
poll = "0.2s"

[[jobs]]
name = "stalled"
cmd = "echo started; while [ ! -e {end} ]; do sleep 0.05; done; exit 3"
gpus = 0

[[jobs]]
name = "shown"
cmd = "echo shown-output"
gpus = 0

[[jobs]]
name = "gate"
cmd = "while [ ! -e {go} ]; do sleep 0.05; done"
gpus = 0

[[jobs]]
name = "next"
after = ["gate"]
cmd = "echo next-output"
gpus = 0
"""

LEASE_HOLDER = """
import fcntl, os, signal, sys
signal.signal(signal.SIGIO, lambda *_: print("broken", flush=True))
fd = os.open(sys.argv[1], os.O_WRONLY)
try:
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
except OSError as e:
    print(f"no lease: {e}", flush=True)
    sys.exit(0)
print("held", flush=True)
sys.stdin.read()
"""


class Lease:
    """A lease-holding process on a file; ``broken`` is set once someone tried to open it."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LEASE_HOLDER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.first = self.proc.stdout.readline().strip()
        self.broken = threading.Event()
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip() == "broken":
                self.broken.set()

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def still_stalled(path: Path) -> bool:
    """An open() of ``path`` would still block (the lease holds)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except BlockingIOError:
        return True
    os.close(fd)
    return False


@contextmanager
def leased_file(path: Path, content: bytes, watchdog_s: float) -> Iterator[tuple[Lease, threading.Event]]:
    """``path`` replaced by a file of ``content`` that nobody can open until the lease goes;
    yields the lease and the event the watchdog sets if it had to end a frozen screen's wait
    (the kernel ends a lease by itself after /proc/sys/fs/lease-break-time, 45 s by default:
    the watchdog must come first)."""
    stand_in = path.with_name(path.name + ".stall")
    stand_in.write_bytes(content)
    lease = Lease(stand_in)
    if lease.first != "held":
        lease.release()
        pytest.skip(f"this kernel gives no file lease here ({lease.first})")
    os.replace(stand_in, path)  # a rename keeps the lease
    done, fired = threading.Event(), threading.Event()

    def watchdog() -> None:
        if not done.wait(watchdog_s):
            fired.set()
            lease.release()

    t = threading.Thread(target=watchdog, daemon=True)
    t.start()
    try:
        yield lease, fired
    finally:
        done.set()
        t.join()
        lease.release()


async def test_a_stalled_running_log_leaves_the_dashboard_and_the_scheduler_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The running job "stalled" is not selected; its log stops answering. The progress column
    and the scheduler try to read it, and again when it fails: keys still answer, another job
    starts and ends meanwhile, and "stalled" ends failed (without its log's tail) though its
    log never answers."""
    monkeypatch.setattr(runs, "TAIL_WAIT_S", 1.0)  # how long an end waits for the log's tail
    try:
        break_s = float(Path("/proc/sys/fs/lease-break-time").read_text())
    except OSError:
        pytest.skip("no /proc/sys/fs/lease-break-time: no file leases here")
    if break_s < 30:
        pytest.skip(f"file leases end after {break_s:.0f} s here: too soon to hold a stall")
    end, go = tmp_path / "end", tmp_path / "go"
    q = write_queue(tmp_path, RUNNING_QUEUE.format(end=end, go=go))
    async with dashboard(q) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "stalled") is JobState.RUNNING, what="running")
        await until(pilot, lambda: state(engine, "gate") is JobState.RUNNING, what="gate runs")
        await until(pilot, lambda: state(engine, "shown") is JobState.DONE, what="shown done")
        await select(pilot, app, "shown")
        log = engine.log_path("stalled")
        assert log is not None
        await until(pilot, lambda: b"started" in log.read_bytes(), what="the log written")
        bar = b" 42%|####  | 420/1000 [00:10<00:14]\r" * 4  # a new size: read again
        with leased_file(log, bar, watchdog_s=break_s * 0.6) as (lease, fired):
            # The progress column or the scheduler has tried to open it and waits.
            await until(pilot, lease.broken.is_set, timeout=30, what="a read of the log")
            await pilot.press("j")
            await until(pilot, lambda: app.main.table.selected != "shown", what="j moved")
            await pilot.press("question_mark")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
            await pilot.press("escape")
            await until(pilot, lambda: not isinstance(app.screen, HelpScreen), what="back")
            # The scheduler ends one job and starts and ends the next meanwhile.
            go.touch()
            await until(pilot, lambda: state(engine, "gate") is JobState.DONE, what="gate done")
            await until(pilot, lambda: state(engine, "next") is JobState.DONE, what="next done")
            await until(pilot, lambda: app.main.table.view("next").record.state is JobState.DONE)
            # The stalled job fails: its tail cannot be read, its end is recorded anyway.
            end.touch()
            await select(pilot, app, "next")
            await until(pilot, lambda: "next-output" in app.main.log_view.text().plain)
            await until(pilot, lambda: state(engine, "stalled") is JobState.FAILED, what="failed")
            assert engine.view("stalled").record.exit_code == 3
            assert "stalled" in screen_text(app)
            assert not fired.is_set(), "the screen or the scheduler froze on the stalled log"
            assert still_stalled(log), "the stand-in stopped stalling: the test proved nothing"
