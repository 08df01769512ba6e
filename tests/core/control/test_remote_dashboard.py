"""The dashboard on a scheduler that runs elsewhere: the control socket's ``watch``, RemoteEngine,
and ``gtui QUEUE.toml`` when a headless ``gtui run QUEUE.toml`` already runs the queue.

The scheduler is a real ``gtui run`` subprocess with real job processes on fake GPUs, except
where a test needs to make the server's own limits show (a watcher that falls behind, one that
stays idle): those serve a small in-process engine. Every wait is on a condition.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, get_args

import psutil
import pytest

from gtui.commands.dashboard import remote_app
from gtui.core.api import (
    Event,
    GpusRead,
    JobChanged,
    JobRemoved,
    JobView,
    LogGrew,
    Notice,
    QueueChanged,
    QueuePaused,
    ReasonChanged,
    WaitingSummary,
)
from gtui.core.bus import EventBus
from gtui.core.control import server
from gtui.core.control.remote import NotAnswering, RemoteEngine
from gtui.core.control.server import ControlServer, call, request
from gtui.core.control.wire import (
    EVENT_TYPES,
    Hello,
    WireError,
    decode_event,
    decode_gpus,
    decode_settings,
    decode_snapshot,
    decode_spec,
    decode_view,
    encode_event,
    encode_gpus,
    encode_settings,
    encode_snapshot,
    encode_spec,
    encode_view,
    from_json,
    to_json,
)
from gtui.core.errors import GtuiError
from gtui.core.gpus.snapshot import GpuInfo, GpuProcess, GpuSnapshot
from gtui.core.model import (
    Diagnosis,
    DiagnosisRule,
    JobRecord,
    JobSpec,
    JobState,
    Mode,
    Placement,
    Settings,
)
from gtui.core.paths import queue_paths
from gtui.core.state.lock import QueueLock
from gtui.ui.app import GtuiApp
from gtui.ui.port import EnginePort
from gtui.ui.screens.confirm import ConfirmScreen
from tests.conftest import write_queue
from tests.waiting import pilot_until, until, wait_for

FAKE = "2x80G"
QUEUE = """
[settings]
poll = "0.2s"
kill_grace = "1s"

[[jobs]]
name = "long"
cmd = "sleep 120"
gpus = 1
mem = "10G"

[[jobs]]
name = "gate"
cmd = "while [ ! -e go ]; do sleep 0.05; done"
gpus = 0

[[jobs]]
name = "waiting"
cmd = "echo after long"
gpus = 1
after = ["long"]
"""


def _is_an_engine_port(engine: RemoteEngine) -> EnginePort:
    """Type-checked (mypy on this file, or gtui.commands.dashboard.remote_app in app/gtui/): a
    RemoteEngine is what the dashboard takes."""
    return engine


# -- a real scheduler -------------------------------------------------------------------------


class Scheduler:
    """A real ``gtui run QUEUE --fake-gpus 2x80G`` in a subprocess, its event log in a file."""

    def __init__(self, q: Path) -> None:
        self.q = q
        self.log = q.parent / f"run-{time.monotonic_ns()}.out"
        self._out = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gtui", "run", str(q), "--fake-gpus", FAKE],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        wait_for(self.answers, what="the scheduler's control socket")

    def answers(self) -> bool:
        assert self.proc.poll() is None, self.log.read_text()
        reply = request(self.q, "ping")
        return bool(reply and reply.get("pid") == self.proc.pid)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()


def job_processes(q: Path) -> list[psutil.Process]:
    """This queue's job processes, found by the environment the scheduler gives them."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and p.environ().get("GTUI_QUEUE") == str(q.resolve()):
                out.append(p)
        except (psutil.Error, OSError):
            continue
    return out


def kill_jobs(q: Path) -> None:
    for p in job_processes(q):
        with contextlib.suppress(psutil.Error):
            p.kill()


def live_state(q: Path, name: str) -> str | None:
    """The job's state as the running scheduler has it (its ``status``)."""
    reply = request(q, "status")
    if not reply or not reply.get("ok"):
        return None
    return next((str(j["state"]) for j in reply["status"]["jobs"] if j["name"] == name), None)


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def scheduler(queue: Path) -> Iterator[Scheduler]:
    sched = Scheduler(queue)
    try:
        yield sched
    finally:
        sched.stop()
        kill_jobs(queue)


class Recorder:
    """Every event a RemoteEngine publishes, in order."""

    def __init__(self, engine: RemoteEngine) -> None:
        self.events: list[Event] = []
        engine.subscribe(self.events.append)

    def changed(self, name: str, state: JobState) -> bool:
        return any(
            isinstance(e, JobChanged) and e.job.spec.name == name and e.job.record.state == state
            for e in self.events
        )

    def notices(self, level: str, *parts: str) -> list[Notice]:
        return [
            e
            for e in self.events
            if isinstance(e, Notice) and e.level == level and all(p in e.text for p in parts)
        ]

    def count(self, kind: type) -> int:
        return sum(isinstance(e, kind) for e in self.events)


@contextlib.asynccontextmanager
async def attached(q: Path, **kw: Any) -> AsyncIterator[tuple[RemoteEngine, Recorder]]:
    """A started RemoteEngine whose ``run`` follows the scheduler, shut down after."""
    remote = RemoteEngine(q, **kw)
    rec = Recorder(remote)
    await remote.start()
    runner = asyncio.create_task(remote.run())
    try:
        yield remote, rec
    finally:
        await remote.shutdown()
        await asyncio.wait_for(runner, 30)


def state(remote: RemoteEngine, name: str) -> JobState:
    return remote.view(name).record.state


# -- (a) the state, the events, the commands ----------------------------------------------------


async def test_start_gets_every_job_and_the_events_follow(
    queue: Path, scheduler: Scheduler
) -> None:
    async with attached(queue) as (remote, rec):
        assert remote.started and remote.connected and remote.pid == scheduler.proc.pid
        assert remote.queue_path == queue.resolve()
        assert [v.spec.name for v in remote.jobs()] == ["long", "gate", "waiting"]
        assert remote.fake and remote.settings.poll_s == 0.2 and not remote.paused
        await until(lambda: state(remote, "long") == JobState.RUNNING, what="long running")
        await until(lambda: state(remote, "gate") == JobState.RUNNING, what="gate running")
        assert state(remote, "waiting") == JobState.QUEUED
        await until(lambda: remote.gpus is not None and remote.gpus.ours, what="a GPU read")
        assert remote.gpus is not None and len(remote.gpus.snapshot.gpus) == 2
        log = remote.log_path("long")
        assert log is not None and log.is_file()
        with pytest.raises(GtuiError, match="no job named 'nope'"):
            remote.view("nope")

        # A command: its effect is here when it returns, as an event and in the copy.
        await remote.pause(["waiting"])
        assert rec.changed("waiting", JobState.HELD)
        assert state(remote, "waiting") == JobState.HELD
        assert live_state(queue, "waiting") == "held"

        # A job's end arrives as an event.
        (queue.parent / "go").touch()
        await until(lambda: rec.changed("gate", JobState.DONE), what="gate's end, as an event")
        assert state(remote, "gate") == JobState.DONE

        # The queue's pause, both ways.
        await remote.pause_queue()
        assert remote.paused and any(isinstance(e, QueuePaused) and e.paused for e in rec.events)
        await remote.resume_queue()
        assert not remote.paused

        # The scheduler's refusal comes back as a GtuiError with its words.
        with pytest.raises(GtuiError, match="long is running: it keeps the command it started"):
            await remote.edit("long", {"priority": 3})


async def test_edit_move_remove_go_through_the_scheduler(queue: Path, scheduler: Scheduler) -> None:
    async with attached(queue) as (remote, rec):
        await remote.move("waiting", "top")
        assert [v.spec.name for v in remote.jobs()] == ["waiting", "long", "gate"]
        await remote.edit("waiting", {"priority": 7})
        assert remote.view("waiting").spec.priority == 7
        assert "priority = 7" in queue.read_text()
        name = await remote.add({"name": "extra", "cmd": "true", "gpus": 0})
        assert name == "extra" and "extra" in [v.spec.name for v in remote.jobs()]
        await remote.remove("waiting")
        assert "waiting" not in [v.spec.name for v in remote.jobs()]
        assert 'name = "waiting"' not in queue.read_text()
        # The ops on the socket themselves, with a bad request each.
        with pytest.raises(GtuiError, match="move needs where: up, down, top"):
            call(queue, "move", name="long", where="sideways")
        with pytest.raises(GtuiError, match="edit needs the name of a job"):
            call(queue, "edit", fields={"priority": 1})
        with pytest.raises(GtuiError, match="remove needs the name of a job"):
            call(queue, "remove")
        assert not rec.notices("error")


async def test_shutdown_with_kill_jobs_kills_nothing_and_says_so(
    queue: Path, scheduler: Scheduler
) -> None:
    remote = RemoteEngine(queue)
    rec = Recorder(remote)
    await remote.start()
    runner = asyncio.create_task(remote.run())
    await until(lambda: state(remote, "long") == JobState.RUNNING)
    pid = remote.view("long").record.pid
    await remote.shutdown(kill_jobs=True)
    assert await asyncio.wait_for(runner, 30) == 0
    assert rec.notices("warning", "not killed: long", "gtui kill")
    assert not remote.connected
    assert scheduler.answers() and live_state(queue, "long") == "running"
    assert pid is not None and alive(pid)


# -- (b) the scheduler goes away, and comes back -------------------------------------------------


async def test_a_killed_scheduler_is_told_and_a_new_one_is_attached_again(
    queue: Path, scheduler: Scheduler
) -> None:
    second: Scheduler | None = None
    try:
        async with attached(queue) as (remote, rec):
            await until(lambda: state(remote, "long") == JobState.RUNNING)
            old = scheduler.proc.pid
            scheduler.stop(signal.SIGKILL)
            await until(
                lambda: rec.notices("error", "the scheduler of q.toml", f"pid {old}", "stopped"),
                what="the notice that the scheduler stopped",
            )
            assert not remote.connected
            # The last state stays; commands say that nobody answers.
            assert state(remote, "long") == JobState.RUNNING
            with pytest.raises(NotAnswering, match="does not answer"):
                await remote.pause(["waiting"])

            queue_changes = rec.count(QueueChanged)
            second = Scheduler(queue)
            new = second.proc.pid
            await until(
                lambda: rec.notices("info", "attached again", f"pid {new}"),
                what="the remote to attach to the new scheduler",
            )
            assert remote.connected and remote.pid == new
            assert rec.count(QueueChanged) > queue_changes  # the fresh hello, published
            assert state(remote, "long") == JobState.RUNNING  # re-adopted, not started again
            await remote.pause(["waiting"])
            assert state(remote, "waiting") == JobState.HELD
    finally:
        if second is not None:
            second.stop()


async def test_start_without_a_scheduler_says_nobody_answers(queue: Path) -> None:
    with pytest.raises(NotAnswering) as err:
        await RemoteEngine(queue).start()
    assert err.value.exit_code == 3 and "q.toml" in str(err.value)


# -- the server's limits, on a small in-process engine -----------------------------------------


class StubEngine:
    """What ``watch`` reads of an engine, and a bus the test publishes on by hand."""

    def __init__(self, q: Path) -> None:
        self.queue_path = queue_paths(q).queue
        self.bus = EventBus()
        spec = JobSpec("j1", "true")
        self._jobs = [JobView(spec, JobRecord("j1"), 0)]
        self.paused = False
        self.gpus: GpusRead | None = None
        self.settings = Settings()
        self.fake = True

    def subscribe(self, sink: Callable[[Event], None]) -> Callable[[], None]:
        return self.bus.subscribe(lambda event: sink(event))

    def jobs(self) -> list[JobView]:
        return list(self._jobs)

    @property
    def watchers(self) -> int:
        return len(self.bus._sinks)


@contextlib.asynccontextmanager
async def served(q: Path) -> AsyncIterator[tuple[ControlServer, StubEngine]]:
    engine = StubEngine(q)
    srv = ControlServer(q)
    await srv.start(engine)  # type: ignore[arg-type]
    try:
        yield srv, engine
    finally:
        await srv.close()


async def test_a_watcher_that_falls_behind_is_dropped_and_comes_back_fresh(
    queue: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "WATCH_BUFFER", 5)
    async with served(queue) as (_srv, engine), attached(queue) as (remote, rec):
        assert engine.watchers == 1 and rec.count(QueueChanged) == 1
        # 50 events in one go: the scheduler never waits, so the 6th overflows the watcher.
        for i in range(50):
            engine.bus.notice("info", f"n{i}")
        await until(lambda: rec.count(QueueChanged) == 2, what="a fresh hello after the drop")
        assert engine.watchers == 1  # the dropped one unsubscribed, the new one subscribed
        assert remote.connected and not rec.notices("error")  # it came back at once: no alarm
        # What comes after the fresh hello arrives as usual.
        engine.bus.notice("info", "after")
        await until(lambda: rec.notices("info", "after"), what="an event after the drop")


async def test_an_idle_watcher_is_not_dropped_and_a_gone_one_unsubscribes(
    queue: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "IDLE_TIMEOUT_S", 0.3)
    async with served(queue) as (_srv, engine):
        async with attached(queue) as (remote, rec):
            # An idle plain client is dropped: proof that the idle timeout has passed ...
            reader, writer = await asyncio.open_unix_connection(str(queue_paths(queue).socket))
            assert await asyncio.wait_for(reader.read(), 30) == b""
            writer.close()
            # ... and the watcher, which sent nothing either, is still there.
            assert remote.connected and engine.watchers == 1
            engine.bus.notice("info", "still here")
            await until(lambda: rec.notices("info", "still here"))
            assert rec.count(QueueChanged) == 1  # never reconnected
        await until(lambda: engine.watchers == 0, what="the gone watcher to unsubscribe")


# -- (c) the dashboard -----------------------------------------------------------------------


def shown(app: GtuiApp, name: str) -> JobState | None:
    """The job's state in the job table."""
    view = app.main.table.view(name)
    return view.record.state if view is not None else None


def toasts(app: GtuiApp) -> list[str]:
    return [
        " ".join(str(t.render()).split())
        for t in app.screen.query("Toast")
        if t.display and t.region.area
    ]


async def test_dashboard_on_a_remote_engine_shows_the_jobs_and_quitting_leaves_them(
    queue: Path, scheduler: Scheduler
) -> None:
    remote = RemoteEngine(queue)
    app = GtuiApp(remote, host="testhost")
    try:
        async with app.run_test(size=(120, 30), notifications=True) as pilot:
            await pilot_until(
                pilot, lambda: app.main.ready and len(app.main.table) == 3, what="the jobs shown"
            )
            table = app.main.table
            assert table.visible_names == ["long", "gate", "waiting"]
            await pilot_until(
                pilot,
                lambda: shown(app, "long") == JobState.RUNNING,
                what="long shown running",
            )
            header = str(app.main.query_one("#header").render())
            assert "testhost" in header and "SIMULATED GPUs" in header
            pid = remote.view("long").record.pid
            assert pid is not None
            # A key acts on the scheduler: p holds the selected waiting job.
            await pilot_until(pilot, lambda: table.select("waiting"), what="waiting selected")
            await pilot_until(pilot, lambda: table.selected == "waiting")
            await pilot.press("p")
            await pilot_until(
                pilot, lambda: live_state(queue, "waiting") == "held", what="held there"
            )
            await pilot_until(pilot, lambda: shown(app, "waiting") == JobState.HELD)
            # q while a job runs: on a remote scheduler nothing is ours to kill, so no question:
            # the screen goes, the scheduler and its job stay.
            await pilot.press("q")
            await pilot_until(
                pilot, lambda: app.engine_stopped and not app.is_running, what="the exit"
            )
        assert not remote.connected
        assert scheduler.answers() and live_state(queue, "long") == "running" and alive(pid)
    finally:
        await remote.shutdown()


async def test_the_remote_dashboard_says_where_it_is_and_q_never_kills(
    queue: Path, scheduler: Scheduler
) -> None:
    remote = RemoteEngine(queue)
    await remote.start()
    app = remote_app(remote, host="testhost", startup_notice=f"attached to pid {remote.pid}")
    try:
        async with app.run_test(size=(120, 30), notifications=True) as pilot:
            await pilot_until(pilot, lambda: app.main.ready and len(app.main.table) == 3)
            await pilot_until(
                pilot, lambda: any(f"attached to pid {remote.pid}" in t for t in toasts(app))
            )
            await pilot_until(pilot, lambda: state(remote, "long") == JobState.RUNNING)
            pid = remote.view("long").record.pid
            assert pid is not None
            # q quits at once: nothing of the queue runs here, so nothing to ask or kill.
            await pilot.press("q")
            await pilot_until(pilot, lambda: not app.is_running, what="the exit")
            assert not isinstance(app.screen, ConfirmScreen)
        assert scheduler.answers() and live_state(queue, "long") == "running" and alive(pid)
        # Even a quit that asks to kill leaves the scheduler's jobs alone.
        again = RemoteEngine(queue)
        app2 = remote_app(again)
        try:
            async with app2.run_test(size=(120, 30)) as pilot:
                await pilot_until(pilot, lambda: app2.main.ready)
                app2.call_later(app2.shutdown_and_exit, kill_jobs=True)
                await pilot_until(pilot, lambda: not app2.is_running, what="the exit")
        finally:
            await again.shutdown()
        assert live_state(queue, "long") == "running" and alive(pid)
    finally:
        await remote.shutdown()


async def test_two_dashboards_on_one_scheduler_see_each_others_actions_and_one_quits_alone(
    queue: Path, scheduler: Scheduler
) -> None:
    """Two clients of one headless scheduler at once: what one does, the other shows (it comes
    as the scheduler's event, not from the first client); quitting one leaves the scheduler,
    its job and the other client working."""
    one, two = RemoteEngine(queue), RemoteEngine(queue)
    await one.start()
    await two.start()
    app1, app2 = remote_app(one, host="one"), remote_app(two, host="two")
    try:
        async with app1.run_test(size=(120, 30)) as p1, app2.run_test(size=(120, 30)) as p2:

            def ready(app: GtuiApp) -> Callable[[], bool]:
                return lambda: (
                    app.main.ready
                    and len(app.main.table) == 3
                    and shown(app, "long") == JobState.RUNNING
                )

            await pilot_until(p1, ready(app1), what="the jobs, in one")
            await pilot_until(p2, ready(app2), what="the jobs, in two")
            pid = one.view("long").record.pid
            assert pid is not None and two.view("long").record.pid == pid

            # p in the first holds the waiting job: the second shows it held.
            await pilot_until(
                p1, lambda: app1.main.table.select("waiting"), what="waiting selected"
            )
            await p1.press("p")
            await pilot_until(p1, lambda: live_state(queue, "waiting") == "held", what="held there")
            await pilot_until(
                p2, lambda: shown(app2, "waiting") == JobState.HELD, what="held in two"
            )
            # P in the second pauses the queue: the first shows it paused.
            await p2.press("P")
            await pilot_until(p1, lambda: one.paused, what="the pause, in one")
            await pilot_until(p1, lambda: "PAUSED" in str(app1.main.query_one("#header").render()))

            # The first quits: the scheduler, its job and the second go on.
            await p1.press("q")
            await pilot_until(p1, lambda: not app1.is_running, what="the first's exit")
            assert not one.connected and two.connected
            assert scheduler.answers() and live_state(queue, "long") == "running" and alive(pid)
            # The second still acts and still hears: P resumes, p releases the held job.
            await p2.press("P")
            await pilot_until(p2, lambda: not two.paused, what="resumed, in two")
            await pilot_until(
                p2, lambda: app2.main.table.select("waiting"), what="waiting selected"
            )
            await p2.press("p")
            await pilot_until(p2, lambda: live_state(queue, "waiting") == "queued", what="released")
            await pilot_until(
                p2, lambda: shown(app2, "waiting") == JobState.QUEUED, what="shown queued"
            )
            await p2.press("q")
            await pilot_until(p2, lambda: not app2.is_running, what="the second's exit")
        assert scheduler.answers() and live_state(queue, "long") == "running" and alive(pid)
    finally:
        await one.shutdown()
        await two.shutdown()


MEM_QUEUE = """
[settings]
poll = "0.1s"

[[jobs]]
name = "fit"
gpus = 1
mem = "70G"
env = { GTUI_FAKE_USE = "12G" }
cmd = "sleep 1"

[[jobs]]
name = "keep"
gpus = 0
cmd = "sleep 120"
"""


async def test_a_remote_dashboard_shows_the_note_on_a_mem_far_from_the_last_run(
    tmp_path: Path,
) -> None:
    """The scheduler said it in a toast before this dashboard was there; the
    detail view works it out from the history, so a dashboard attached later still says it."""
    from tests.ui.test_ui_detail import detail_shown

    q = write_queue(tmp_path, MEM_QUEUE)
    sched = Scheduler(q)
    remote = RemoteEngine(q)
    try:
        wait_for(lambda: live_state(q, "fit") == "done", what="fit ran once, using 12G")
        await remote.start()
        app = remote_app(remote, host="testhost")
        async with app.run_test(size=(120, 50)) as pilot:
            await pilot_until(pilot, lambda: app.main.ready and len(app.main.table) == 2)
            await pilot_until(pilot, lambda: app.main.table.select("fit"), what="fit selected")
            await pilot_until(pilot, lambda: app.main.table.selected == "fit")
            await pilot.press("enter")
            words = "mem 70G is far above its last run's peak 12G; 15G would do"
            await pilot_until(pilot, lambda: detail_shown(app, "fit", words), what=words)
            assert not any("far above" in t for t in toasts(app))  # told here, not as a toast
            await pilot.press("escape")
            await pilot.press("q")
            await pilot_until(pilot, lambda: not app.is_running, what="the exit")
    finally:
        await remote.shutdown()
        sched.stop()
        kill_jobs(q)


# -- the command line, in a real terminal (tmux panes with $TMUX unset) --------------------------


def _tmux(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=15)


@pytest.fixture
def terminal(tmux_server: Path) -> Callable[..., str]:
    """Panes of the test's private tmux server that stand for plain terminals: ``open(name,
    cwd, cmd)``."""

    def open_terminal(name: str, cwd: Path, command: str) -> str:
        r = _tmux(
            "new-session", "-d", "-x", "120", "-y", "30", "-s", name, "-c", str(cwd),
            f"env -u TMUX {command}; echo rc=$?; sleep 60",
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        return f"={name}:"

    return open_terminal


def screen(target: str) -> str:
    return _tmux("capture-pane", "-p", "-J", "-t", target).stdout


def wait_screen(target: str, text: str) -> str:
    seen = ""

    def shows() -> bool:
        nonlocal seen
        seen = screen(target)
        return text in seen

    try:
        wait_for(shows, what=f"{text!r} on screen")
    except AssertionError:
        raise AssertionError(f"{text!r} never showed; the screen:\n{seen}") from None
    return seen


def flat(text: str) -> str:
    """A screen's words in reading order, without the boxes' borders."""
    return " ".join(text.replace("▌", " ").replace("│", " ").split())


needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")


@needs_tmux
@pytest.mark.slow
@pytest.mark.parametrize("how", ["", "--no-tmux "])
def test_gtui_queue_opens_the_dashboard_of_a_headless_scheduler(
    queue: Path, scheduler: Scheduler, terminal: Callable[..., str], how: str
) -> None:
    py = sys.executable
    wait_for(lambda: live_state(queue, "long") == "running", what="long running")
    pid = next(p.pid for p in job_processes(queue) if p.environ().get("GTUI_JOB") == "long")
    term = terminal("term", queue.parent, f"{py} -m gtui {how}--fake-gpus {FAKE} q.toml")
    # The notice (a toast, wrapped to its box): which scheduler, and that leaving keeps it.
    shown = flat(wait_screen(term, "attached to the"))
    assert f"(pid {scheduler.proc.pid})" in shown and "leaves it and its jobs" in shown, shown
    wait_screen(term, "waiting")
    assert "rc=" not in screen(term)
    _tmux("send-keys", "-t", term, "q")
    assert "rc=0" in wait_screen(term, "rc=")
    made = queue_paths(queue).tmux_session  # gtui-q-<hash>: what `gtui q.toml` would make
    assert _tmux("has-session", "-t", f"={made}").returncode != 0  # no session was made
    assert scheduler.answers() and live_state(queue, "long") == "running" and alive(pid)


@needs_tmux
@pytest.mark.slow
def test_a_holder_that_does_not_answer_still_exits_3(
    queue: Path, terminal: Callable[..., str]
) -> None:
    lock = QueueLock(queue_paths(queue))
    lock.acquire()  # held by this process, which serves no socket
    try:
        term = terminal("term", queue.parent, f"{sys.executable} -m gtui --no-tmux q.toml")
        shown = " ".join(wait_screen(term, "rc=").split())
        assert "rc=3" in shown and f"pid {os.getpid()}" in shown, shown
        assert "does not answer on its control socket" in shown, shown
    finally:
        lock.release()


# -- (d) the wire format -----------------------------------------------------------------------

SPEC = JobSpec(
    name="lr0.1",
    cmd="python train.py --lr {lr} --gpu {gpu}",
    gpus=2,
    mem_mib=20480,
    priority=-3,
    after=("prep", "fetch"),
    retries=-1,
    timeout_s=3600,  # an int where a float may stand: stays an int (and equal)
    cwd="runs",
    env={"SEED": "1", "EMPTY": ""},
    matrix={"lr": "0.1"},
    isolate=False,
    line=12,
    entry=2,
)
RECORD = JobRecord(
    name="lr0.1",
    state=JobState.FAILED,
    attempt=3,
    first_attempt=2,
    gpus=(0, 3),
    mem_mib=25600,
    pid=4242,
    create_time=1700000000.125,
    exit_code=1,
    signal=None,
    started_at=1700000001.5,
    ended_at=1700000099.25,
    log="/tmp/logs/lr0.1.3.log",
    reason="",
    reason_at=None,
    after_edit_of="lr0.1-old",
    quick_fails=2,
    retry_at=1700000200.0,
    diagnosis=Diagnosis("cuda_oom", "CUDA out of memory. Tried to allocate", "ask for more"),
    warnings=["not isolated", "ünïcode ✓"],
    queued_since=1699999999.0,
    peak_mib=14540,
    port=29500,
    status_file="/tmp/.gtui/q.run/lr0.1.3",
    token="abc",
)
VIEW = JobView(SPEC, RECORD, 7)
OTHER = JobView(JobSpec("cpu", "true", gpus=0), JobRecord("cpu"), 8)
SNAPSHOT = GpuSnapshot(
    gpus=(
        GpuInfo(0, "A800 80G", "GPU-0", 81920, 1024, 71, 54, (GpuProcess(11, 512), GpuProcess(12))),
        GpuInfo(3, "A800 80G", "GPU-3", None, None, None, None, (), lost=True, error="gone"),
    ),
    taken_at=1700000000.5,
    source="nvml",
    error=None,
    driver="550.54",
)
GPUS = GpusRead(
    SNAPSHOT,
    ours={0: ("lr0.1",), 3: ()},
    ours_mib={0: 20480},
    available_mib={0: 60000, 3: 0},
    reserved=(3,),
)
SETTINGS = Settings(
    gpus=(0, 3),
    exclude=(1,),
    reserve=1,
    reserve_rule="seed",
    mode=Mode.PACK,
    placement=Placement.BEST_FIT,
    max_parallel=4,
    retries=2,
    oom_grow=1.5,
    poll_s=0.2,
    kill_grace_s=10,
    log_dir="~/logs",
    isolate=False,
    on_failure="pause",
    env={"A": "1"},
    starve_after_s=float("inf"),
    multi_gpu_first=True,
    fake_gpus="80G:16G@35,24G",
    diagnose=(
        DiagnosisRule("nccl", "check the network", pattern=r"NCCL (error|timeout)"),
        DiagnosisRule("killed", "out of host memory", exit_codes=(137,), signals=(9, 15)),
    ),
)

EVENTS: list[Event] = [
    JobChanged(VIEW),
    ReasonChanged(VIEW),
    JobRemoved("gone"),
    QueueChanged((VIEW, OTHER)),
    QueueChanged(()),
    GPUS,
    GpusRead(GpuSnapshot((), 0.0, "none", error="no NVML")),
    LogGrew("lr0.1", "/tmp/logs/lr0.1.3.log", 123456789012),
    Notice("error", "line one\nline two ✓"),
    QueuePaused(True),
    QueuePaused(False),
    WaitingSummary("3 waiting: reserve 1"),
    WaitingSummary(
        "2 waiting: 2 needs 1 GPU with 40G: none eligible (GPU0 31G < 40G)",
        "2 waiting: 2 needs 40G, best GPU has 31G free",
    ),
]


def through_text(obj: Any) -> Any:
    """What the other end reads: the JSON line the server writes, parsed again."""
    import json

    line = server._encode(obj)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    return json.loads(line)


def test_every_event_type_is_covered() -> None:
    assert {type(e).__name__ for e in EVENTS} == set(EVENT_TYPES)
    assert set(EVENT_TYPES.values()) == set(get_args(Event))


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_every_event_round_trips_exactly(event: Event) -> None:
    back = decode_event(through_text(encode_event(event)))
    assert back == event and type(back) is type(event)
    # == does not see a list for a tuple inside a frozen view, nor a str for a StrEnum: look.
    assert to_json(back) == to_json(event)
    assert repr(back) == repr(event)


def test_views_keep_their_tuples_enums_nones_and_int_keys() -> None:
    back = decode_event(through_text(encode_event(JobChanged(VIEW))))
    assert isinstance(back, JobChanged)
    rec, spec = back.job.record, back.job.spec
    assert type(rec.state) is JobState and rec.state is JobState.FAILED
    assert rec.gpus == (0, 3) and type(rec.gpus) is tuple
    assert type(rec.warnings) is list and rec.signal is None and rec.reason_at is None
    assert type(rec.diagnosis) is Diagnosis
    assert spec.after == ("prep", "fetch") and type(spec.after) is tuple
    assert type(spec.timeout_s) is int and spec.isolate is False
    gpus = decode_gpus(through_text(encode_gpus(GPUS)))
    assert gpus == GPUS and gpus is not None
    assert list(gpus.ours) == [0, 3] and all(type(k) is int for k in gpus.ours_mib)
    assert gpus.ours[3] == () and type(gpus.snapshot.gpus[0].processes) is tuple
    assert gpus.snapshot.gpus[0].processes[1].mem_mib is None
    assert decode_gpus(through_text({"g": encode_gpus(None)})["g"]) is None


def test_settings_specs_views_snapshots_round_trip() -> None:
    for value, enc, dec in [
        (SETTINGS, encode_settings, decode_settings),
        (Settings(), encode_settings, decode_settings),
        (SPEC, encode_spec, decode_spec),
        (VIEW, encode_view, decode_view),
        (SNAPSHOT, encode_snapshot, decode_snapshot),
    ]:
        back = dec(through_text(enc(value)))  # type: ignore[operator]
        assert back == value and repr(back) == repr(value)
    back_settings = decode_settings(through_text(encode_settings(SETTINGS)))
    assert back_settings.mode is Mode.PACK and back_settings.placement is Placement.BEST_FIT
    assert back_settings.gpus == (0, 3) and Settings().gpus == "all"
    assert decode_settings(through_text(encode_settings(Settings()))).gpus == "all"
    assert type(back_settings.diagnose[1].exit_codes) is tuple
    hello = Hello(1, "/q.toml", (VIEW, OTHER), True, GPUS, SETTINGS, True)
    assert from_json(Hello, through_text(to_json(hello))) == hello


def test_a_wrong_shape_is_refused_and_unknown_keys_are_ignored() -> None:
    data = through_text(encode_event(JobChanged(VIEW)))
    data["data"]["job"]["record"]["state"] = "exploded"
    with pytest.raises(WireError, match="state"):
        decode_event(data)
    data = through_text(encode_event(JobChanged(VIEW)))
    data["data"]["job"]["record"]["gpus"] = "0,3"
    with pytest.raises(WireError):
        decode_event(data)
    with pytest.raises(WireError, match="unknown event"):
        decode_event({"event": "Exploded", "data": {}})
    with pytest.raises(WireError):
        decode_event({"data": {}})
    with pytest.raises(WireError, match="integer key"):
        from_json(GpusRead, {**to_json(GPUS), "ours": {"zero": []}})
    with pytest.raises(WireError):
        decode_settings({"mode": "sideways"})
    with pytest.raises(WireError):  # a bool is not an int
        decode_spec({"name": "a", "cmd": "b", "gpus": True})
    # A newer gtui's extra field is ignored; a missing one takes its default.
    data = through_text(encode_spec(SPEC))
    data["from_the_future"] = 1
    del data["priority"]
    assert decode_spec(data) == dataclasses.replace(SPEC, priority=0)
