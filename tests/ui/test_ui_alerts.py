"""The dashboard's bell and OSC 9 desktop notifications: off by default, on with
[notify] bell / desktop, for the events [notify] on names. Real engine, real jobs, fake GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gtui.core.model import JobState
from gtui.ui.alerts import Alerts, osc9
from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard
from tests.waiting import pilot_until as until

JOBS = """
[settings]
poll = "0.2s"

[[jobs]]
name = "ok"
gpus = 0
cmd = "while [ ! -e go ]; do sleep 0.05; done"

[[jobs]]
name = "bad"
gpus = 0
cmd = "while [ ! -e go ]; do sleep 0.05; done; exit 2"
"""


def test_osc9_is_one_safe_line_and_wrapped_for_tmux() -> None:
    assert osc9("gtui: a done") == "\x1b]9;gtui: a done\x07"
    # A job name cannot end the sequence early or move the cursor.
    assert osc9("x\x07y\x1b[2Jz\nw") == "\x1b]9;xyz w\x07"
    assert osc9("a", in_tmux=True) == "\x1bPtmux;\x1b\x1b]9;a\x07\x1b\\"


def test_alerts_write_bell_and_desktop_only_when_asked() -> None:
    from gtui.core.model import Notify

    written: list[str] = []
    alerts = Alerts(written.append)
    alerts.say(Notify(), ["gtui: a done"])
    assert written == []
    alerts.say(Notify(bell=True, desktop=True), ["gtui: a done", "gtui: b failed"])
    assert written == ["\a", "\x1b]9;gtui: a done (+1 more)\x07"]


@pytest.mark.parametrize("on", [True, False])
async def test_dashboard_rings_for_ends_and_queue_done_only_when_on(
    tmp_path: Path, on: bool
) -> None:
    notify = '\n[notify]\non = ["end", "queue_done"]\nbell = true\ndesktop = true\n' if on else ""
    q = write_queue(tmp_path, JOBS + notify)
    async with dashboard(q, fake="1x80G") as (app, pilot, _engine):
        table = app.main.table
        await until(
            pilot,
            lambda: all(table.view(n).record.state == JobState.RUNNING for n in ("ok", "bad")),
            what="both running on screen",
        )
        (tmp_path / "go").touch()
        await until(
            pilot,
            lambda: (
                {table.view(n).record.state for n in ("ok", "bad")}
                == {JobState.DONE, JobState.FAILED}
            ),
            what="both jobs ended on screen",
        )
        sent = app.main.alerts.sent
        if on:
            await until(pilot, lambda: "gtui: queue done" in app.main.alerts.sent, what="done")
            assert "gtui: ok done" in sent and any(s.startswith("gtui: bad failed") for s in sent)
        else:
            assert sent == []
