"""The bridge from engine events to the dashboard, driven by Pilot.

``gtui QUEUE.toml`` starts the engine (and its control socket) before the Textual app runs, as
tests here do. Events the engine publishes then, or later from a task born outside the app (a
`gtui kill` from another shell, served by the control socket), must reach the screen: nothing
may be lost, and no "flush pending" flag may stay stuck so that the table freezes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from gtui.core.model import JobState
from gtui.core.sched.engine import Engine
from gtui.ui.app import GtuiApp
from tests.conftest import gtui, write_queue
from tests.dashboard_helpers import screen_text, state
from tests.waiting import pilot_until as until

QUEUE = """
[settings]
poll = "30s"  # few events of its own: a command's event meets an empty buffer
kill_grace = "1s"

[[jobs]]
name = "long"
cmd = "while [ ! -e release ]; do sleep 0.05; done"
gpus = 1
mem = "10G"
"""


async def test_a_kill_from_another_shell_reaches_the_table_and_later_events_too(
    tmp_path: Path,
) -> None:
    """The engine is started before the app (as the dashboard command does), so its control
    socket serves requests in tasks that know nothing of the app."""
    queue = write_queue(tmp_path, QUEUE)
    engine = Engine(queue, fake_gpus="2x80G")
    await engine.start()
    app = GtuiApp(engine, host="testhost")
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: app.main.ready, what="the dashboard to start")
            await until(
                pilot,
                lambda: app.main.table.view("long").record.state == JobState.RUNNING,
                what="long running on screen",
            )
            # A real `gtui kill` from another process, through the control socket.
            r = await asyncio.to_thread(gtui, "kill", str(queue), "long")
            assert r.returncode == 0, r.stderr
            assert state(engine, "long") == JobState.KILLED
            await until(
                pilot,
                lambda: app.main.table.view("long").record.state == JobState.KILLED,
                timeout=10,
                what="the kill on screen",
            )
            # And the screen keeps following: a job added from another shell shows up.
            r = await asyncio.to_thread(
                gtui,
                "add",
                str(queue),
                "--name",
                "added",
                "--gpus",
                "0",
                "--",
                "true",
                cwd=tmp_path,
            )
            assert r.returncode == 0, r.stderr
            await until(
                pilot,
                lambda: app.main.table.view("added") is not None,
                timeout=10,
                what="the added job on screen",
            )
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)


async def test_events_published_before_the_app_runs_are_shown_once_it_runs(
    tmp_path: Path,
) -> None:
    """A notice is not state that the first full read brings back: one published before the app
    runs (here: a broken queue file the engine refuses) must still be shown."""
    queue = write_queue(tmp_path, QUEUE)
    engine = Engine(queue, fake_gpus="2x80G")
    app = GtuiApp(engine, host="testhost")
    try:
        await engine.start()
        queue.write_text(QUEUE + "\n[[jobs]\n")  # not TOML
        await engine.reload()
        async with app.run_test(size=(120, 30), notifications=True) as pilot:
            await until(pilot, lambda: app.main.ready, what="the dashboard to start")
            # A broken file is a banner that stays until it loads, not a toast.
            banner = app.main.query_one("#file-banner")
            await until(
                pilot,
                lambda: banner.display and "queue file not reloaded" in screen_text(app),
                timeout=10,
                what="the refused reload's notice on screen",
            )
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)
