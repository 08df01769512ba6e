"""The detail view shows the tracker run link a real job printed (Pilot over a real Engine, fake
GPUs) on its attempt's row: a running attempt's, and each attempt's own."""

from __future__ import annotations

from pathlib import Path

from gtui.core.model import JobState
from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard, state
from tests.ui.test_ui_detail import open_detail
from tests.waiting import pilot_until as until

RUN = "https://wandb.ai/alice-lab/mnist/runs/3kq9x2ab"
FIRST = "https://wandb.ai/alice-lab/mnist/runs/first1"


async def test_the_detail_view_shows_the_run_links_of_the_job_and_its_attempts(
    tmp_path: Path,
) -> None:
    go = tmp_path / "go"
    queue = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.2s"

        [[jobs]]
        name = "train"
        mem = "5G"
        cmd = '''echo 'wandb: 🚀 View run glorious-sun-12 at: {RUN}'
        while [ ! -e {go} ]; do sleep 0.05; done'''

        [[jobs]]
        name = "flaky"
        gpus = 0
        retries = 1
        cmd = '''if [ {{attempt}} = 1 ]; then echo 'wandb: 🚀 View run a at: {FIRST}'; exit 3; fi
        echo 'wandb: 🚀 View run b at: {RUN}' '''
        """,
    )
    async with dashboard(queue, size=(140, 50)) as (app, pilot, engine):
        await until(pilot, lambda: engine.view("train").record.links, what="train's link read")
        assert state(engine, "train") == JobState.RUNNING
        await open_detail(pilot, app, "train", f"runs W&B {RUN}")
        await pilot.press("escape")
        await until(pilot, lambda: state(engine, "flaky") == JobState.DONE, what="flaky done")
        # each attempt's own link, on its row
        await open_detail(pilot, app, "flaky", f"runs W&B {RUN}", f"runs W&B {FIRST}")
        go.touch()
