"""M on a waiting job: the dashboard asks first, naming the jobs it would preempt (nothing is
stopped before y), then the scheduler stops them as a preemption does."""

from __future__ import annotations

from pathlib import Path

from gtui.core.model import JobState
from gtui.ui.screens.confirm import ConfirmScreen
from tests.dashboard_helpers import dashboard, screen_text, select
from tests.waiting import pilot_until as until


def _queue(tmp_path: Path, *, urgent: bool) -> Path:
    q = tmp_path / "q.toml"
    text = """
[settings]
poll = "0.2s"
kill_grace = "1s"

[[jobs]]
name = "train"
cmd = "sleep 300"
mem = "60G"
preemptible = true
grace = "1s"
"""
    if urgent:
        text += '\n[[jobs]]\nname = "urgent"\ncmd = "true"\nmem = "60G"\npriority = 5\n'
    q.write_text(text)
    return q


async def test_make_room_asks_naming_the_victims_then_preempts(tmp_path: Path) -> None:
    q = _queue(tmp_path, urgent=False)
    async with dashboard(q, fake="1x80G") as (app, pilot, engine):
        await until(pilot, lambda: engine.view("train").record.state is JobState.RUNNING)
        await engine.pause_queue()  # so that only the key makes room
        _queue(tmp_path, urgent=True)
        await until(pilot, lambda: any(v.record.name == "urgent" for v in engine.jobs()))
        await select(pilot, app, "urgent")
        await pilot.press("M")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await until(pilot, lambda: "Preempt train for urgent?" in screen_text(app))
        await pilot.press("escape")  # cancelled: nothing stopped
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert engine.view("train").record.preempt_for is None
        await pilot.press("M")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: engine.view("train").record.requeued_as == "preempted")
        assert engine.view("train").record.preempted_by == "urgent"
