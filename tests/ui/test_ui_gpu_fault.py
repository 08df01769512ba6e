"""A job queued again after its GPU failed shows in the queue as any waiting job: the state
word ``queued`` (not the diagnosis kind ``gpu_fault``), and its note says which GPU failed.

A real job on a simulated GPU whose spec is a file, rewritten mid-run to inject an Xid: the
health watch quarantines the only GPU, so the job stays queued for the test to read."""

from __future__ import annotations

from pathlib import Path

from gtui.core.model import JobState
from gtui.ui.app import GtuiApp
from tests.dashboard_helpers import dashboard, screen_text, state
from tests.waiting import pilot_until as until

QUEUE = """\
[settings]
mode = "exclusive"
fake_gpus = "@{gpus}"
poll = "0.1s"

[[jobs]]
name = "train"
gpus = 1
cmd = "sleep 600"
"""


def row(app: GtuiApp, name: str) -> str:
    """The queue table's line of ``name`` as the user reads it."""
    return next((line for line in screen_text(app).splitlines() if f" {name} " in line), "")


async def test_a_job_requeued_after_a_gpu_fault_shows_as_waiting(tmp_path: Path) -> None:
    gpus = tmp_path / "gpus.txt"
    gpus.write_text("80G\n")
    q = tmp_path / "q.toml"
    q.write_text(QUEUE.format(gpus=gpus))
    async with dashboard(q, fake=f"@{gpus}") as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "train") == JobState.RUNNING, what="running")
        gpus.write_text("80G!xid79\n")
        await until(
            pilot,
            lambda: engine.view("train").record.requeued_as == "gpu_fault",
            what="queued again after the fault",
        )
        await until(pilot, lambda: "requeued: GPU 0 fault" in row(app, "train"), what="the note")
        line = row(app, "train")
        assert "gpu_fault" not in line and " queued " in line, line
