"""[notify]: the section's checks, the command with the job's facts in its
environment, Apprise through a real install to a local json:// receiver, and deliveries that
hang or fail: said once, never holding up the scheduler. Real processes, fake GPUs."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import psutil
import pytest

from gtui.core.api import Event, Notice
from gtui.core.errors import QueueFileError
from gtui.core.queue.queuefile import load_queue
from gtui.core.sched import engine as engine_mod
from gtui.core.sched.engine import Engine
from tests.conftest import write_queue
from tests.waiting import DEADLINE_S, until

JOBS = """
[[jobs]]
name = "ok"
gpus = 0
cmd = "true"

[[jobs]]
name = "bad"
gpus = 0
after = ["ok"]
cmd = "echo 'ModuleNotFoundError: No module named foo'; exit 3"

[[jobs]]
name = "last"
gpus = 0
after = ["ok"]
cmd = "true"
"""


def notices(engine: Engine) -> list[str]:
    seen: list[str] = []

    def sink(e: Event) -> None:
        if isinstance(e, Notice) and "notification" in e.text:
            seen.append(e.text)

    engine.subscribe(sink)
    return seen


# -- the section ------------------------------------------------------------------------------


def test_notify_section_is_read_with_its_defaults(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[notify]\ncommand = "echo hi"\n' + JOBS)
    n = load_queue(q).settings.notify
    assert n.command == "echo hi" and n.on == ("failure", "queue_done")
    assert n.timeout_s == 30 and not n.bell and not n.desktop and n.apprise == ()
    assert load_queue(write_queue(tmp_path, JOBS, "plain.toml")).settings.notify.command is None


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('on = ["fail"]', "q.toml:3: on: unknown value 'fail'"),
        ('apprise = ["slack"]', "is not an Apprise URL"),
        ('timeout = "soon"', "q.toml:3: timeout: expected a duration"),
        ('bell = "yes"', "bell: expected true or false"),
        ("colour = 1", "unknown key in [notify]; known keys: command, apprise, on"),
        ("on = 3", "on: expected a list of strings"),
    ],
)
def test_notify_mistakes_name_line_and_key(tmp_path: Path, line: str, message: str) -> None:
    q = write_queue(tmp_path, f'[notify]\ncommand = "true"\n{line}\n' + JOBS)
    with pytest.raises(QueueFileError) as e:
        load_queue(q)
    assert message in str(e.value)


# -- delivery through the scheduler -------------------------------------------------------------


async def test_command_gets_each_end_and_queue_done_with_the_facts(tmp_path: Path) -> None:
    out = tmp_path / "told"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"

        [notify]
        on = ["end", "failure", "queue_done"]
        command = "echo \\"$GTUI_EVENT|$GTUI_JOB_NAME|$GTUI_JOB_STATE|$GTUI_EXIT_CODE|$GTUI_DIAGNOSIS|$GTUI_DONE|$GTUI_FAILED\\" >> {out}"
        """
        + JOBS,
    )
    engine = Engine(q, fake_gpus="1x80G", control=False)
    assert await asyncio.wait_for(engine.run(exit_when_idle=True), 60) == 1
    lines = out.read_text().splitlines()
    assert sorted(lines[:3]) == sorted(
        ["end|ok|done|0|||", "end|last|done|0|||", "failure|bad|failed|3|import_error||"]
    )
    assert lines[3:] == ["queue_done|||||2|1"]  # delivered before `gtui run` would exit


async def test_a_hanging_command_never_holds_up_the_scheduler(tmp_path: Path) -> None:
    release = tmp_path / "release"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"

        [notify]
        on = ["end"]
        timeout = "120s"
        command = "touch {tmp_path}/told.$GTUI_JOB_NAME; while [ ! -e {release} ]; do sleep 0.05; done"
        """
        + JOBS,
    )
    engine = Engine(q, fake_gpus="1x80G", control=False)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: (tmp_path / "told.ok").exists(), what="the first notification")
        # The first delivery hangs; the jobs after it run and end all the same.
        await until(
            lambda: {v.record.state.value for v in engine.jobs()} == {"done", "failed"},
            what="every job ended while the notification hangs",
        )
        assert not (tmp_path / "told.bad").exists()  # one delivery at a time, still the first
        release.touch()
        await until(lambda: (tmp_path / "told.last").exists(), what="the others delivered")
    finally:
        release.touch()
        await engine.shutdown(kill_jobs=True)
        task.cancel()


async def test_timeouts_and_failures_are_said_once_and_leave_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three ends, each delivery timing out after 1 s one after the other: a quitting
    # dashboard's 3 s for deliveries under way is too short for them on a busy machine (then it
    # says so, a second notice). What is tested is the timeouts: every wait's deadline.
    monkeypatch.setattr(engine_mod, "QUIT_NOTIFY_S", DEADLINE_S)
    pids = tmp_path / "pids"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"

        [notify]
        on = ["end"]
        timeout = "1s"
        command = "echo $$ >> {pids}; exec sleep 300"
        """
        + JOBS,
    )
    engine = Engine(q, fake_gpus="1x80G", control=False)
    said = notices(engine)
    await asyncio.wait_for(engine.run(exit_when_idle=True), 60)
    assert len(said) == 1, said
    assert "notification not delivered (command, end): timed out after 1 s (killed)" in said[0]
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 3  # each end was tried
    assert not [
        p for p in started if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
    ]

    text = q.read_text().replace("exec sleep 300", "echo no route; exit 7")
    q.write_text(text.replace('timeout = "1s"', 'timeout = "60s"'))  # a busy machine: no race
    engine = Engine(q, fake_gpus="1x80G", control=False)
    said = notices(engine)
    # Run the queue again: retry everything so there are ends to tell.
    await engine.start()
    await engine.retry(["ok", "bad", "last"])
    await asyncio.wait_for(engine.run(exit_when_idle=True), 60)
    assert len(said) == 1 and said[0].endswith(
        "exit 7: no route; further failures of it are not shown until it works again"
    ), said


# -- Apprise ------------------------------------------------------------------------------------


class _Receiver(BaseHTTPRequestHandler):
    got: list[dict[str, object]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        _Receiver.got.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[int, list[dict[str, object]]]]:
    """A local HTTP endpoint on 127.0.0.1 for Apprise's json:// (the test's, not gtui's)."""
    _Receiver.got = []
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], _Receiver.got
    finally:
        server.shutdown()
        server.server_close()


async def test_apprise_delivers_a_failure_through_a_real_install(
    tmp_path: Path,
    receiver: tuple[int, list[dict[str, object]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("apprise")
    # The engine stops here as a quitting dashboard does, giving deliveries 3 s; on a busy
    # machine Apprise's first load alone can take longer. The delivery is what is tested: the
    # generous deadline of every wait in the tests.
    monkeypatch.setattr(engine_mod, "QUIT_NOTIFY_S", DEADLINE_S)
    port, got = receiver
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"

        [notify]
        apprise = ["json://127.0.0.1:{port}/hook", "nope://unknown"]
        """
        + JOBS,
    )
    engine = Engine(q, fake_gpus="1x80G", control=False)
    said = notices(engine)
    await asyncio.wait_for(engine.run(exit_when_idle=True), 60)
    # Apprise refuses an unknown scheme: said once; the first URL is never tried with it.
    assert len(said) == 1 and "Apprise does not know the URL 'nope://unknown'" in said[0]

    q.write_text(q.read_text().replace(', "nope://unknown"', ""))
    engine = Engine(q, fake_gpus="1x80G", control=False)
    said = notices(engine)
    await engine.start()
    await engine.retry(["bad"])
    await asyncio.wait_for(engine.run(exit_when_idle=True), 60)
    assert said == []
    titles = [str(m.get("title")) for m in got]
    assert "gtui: bad failed (import_error)" in titles
    assert any("queue done" in t for t in titles)


def test_notify_settings_reach_a_remote_dashboard_whole(tmp_path: Path) -> None:
    """A dashboard attached over the socket gets [settings] on the wire: bell / desktop too."""
    from gtui.core.control.wire import decode_settings, encode_settings

    q = write_queue(
        tmp_path, '[notify]\non = ["end"]\nbell = true\napprise = ["ntfy://t"]\n' + JOBS
    )
    settings = load_queue(q).settings
    assert decode_settings(encode_settings(settings)) == settings
    assert decode_settings(encode_settings(settings)).notify.bell


async def test_a_quitting_dashboards_engine_does_not_wait_out_a_hung_delivery(
    tmp_path: Path,
) -> None:
    """Not a `gtui run`: shutdown gives deliveries a few seconds, says what it left, and
    leaves no notification process behind."""
    pid = tmp_path / "pid"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"

        [notify]
        on = ["end"]
        timeout = "600s"
        command = "echo $$ > {pid}; exec sleep 600"
        """
        + JOBS,
    )
    engine = Engine(q, fake_gpus="1x80G", control=False)
    said = notices(engine)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: pid.exists() and pid.read_text().strip(), what="a delivery hangs")
    finally:
        await asyncio.wait_for(engine.shutdown(kill_jobs=True), 60)
        task.cancel()
    assert any("not delivered: the scheduler stopped after waiting 3 s" in t for t in said), said
    p = int(pid.read_text())
    assert not psutil.pid_exists(p) or psutil.Process(p).status() == "zombie"
