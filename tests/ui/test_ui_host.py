"""The dashboard's GPU panel header shows the host's cores and memory in use on a simulated
host, and stays as it was for a queue that asks the real host for nothing."""

from __future__ import annotations

from pathlib import Path

from gtui.core.model import JobState
from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard, state
from tests.waiting import pilot_until as until

GATED = 'cmd = "while [ ! -e go ]; do sleep 0.05; done"\n'


async def test_the_gpu_header_shows_cores_and_memory_in_use(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        '[settings]\npoll = "0.1s"\nfake_host = "8c/32G"\n\n'
        f'[[jobs]]\nname = "prep"\ngpus = 0\ncpus = 6\nram = "20G"\n{GATED}',
    )
    async with dashboard(q) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "prep") == JobState.RUNNING)
        want = "GPUs  ▓ others █ ours ░ free · host (simulated) 6/8 cores asked · RAM 20G/32G used"
        box = app.main.query_one("#gpus-box")
        await until(pilot, lambda: str(box.border_title) == want, what=want)
        (tmp_path / "go").touch()


async def test_a_queue_that_asks_nothing_keeps_the_header(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path, f'[settings]\npoll = "0.1s"\n\n[[jobs]]\nname = "a"\ngpus = 0\n{GATED}'
    )
    async with dashboard(q) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "a") == JobState.RUNNING)
        await until(pilot, lambda: app.main.query_one("#gpus").read is not None)
        assert str(app.main.query_one("#gpus-box").border_title) == "GPUs  ▓ others █ ours ░ free"
        (tmp_path / "go").touch()
