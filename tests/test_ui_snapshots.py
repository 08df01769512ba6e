"""Snapshot tests of the dashboard (pytest-textual-snapshot), on a real engine and queue file.

Deterministic by construction: the jobs are run to final or held states before the app opens
(nothing runs, so no clock or utilization moves), the host name is fixed, the queue path is
shown relative to the working directory, the fake GPUs are fixed. Update the pictures with
``pytest tests/test_ui_snapshots.py --snapshot-update`` and look at them before committing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from gtui.core.engine import Engine
from gtui.core.model import JobState
from gtui.ui.app import GtuiApp
from gtui.ui.widgets.gpu_panel import GpuPanel
from tests.conftest import write_queue

QUEUE = """
[settings]
poll = "0.2s"
mode = "shared"
exclude = [2]
fake_gpus = "80G:30G@20,80G:45G@60,24G"

[[jobs]]
name = "prep-data"
cmd = "echo preparing; echo 'wrote 1200 shards'"
gpus = 0

[[jobs]]
name = "lr0.1"
cmd = "echo 'epoch 1 | loss 0.412 | acc 0.871'"
gpus = 1
mem = "12G"

[[jobs]]
name = "eval-ckpt7"
cmd = "echo 'Traceback (most recent call last):'; echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'; exit 1"
gpus = 1
mem = "10G"

[[jobs]]
name = "after-eval"
cmd = "echo report"
gpus = 1
mem = "8G"
after = ["eval-ckpt7"]

[[jobs]]
name = "big-ddp"
cmd = "torchrun --nproc_per_node 2 train.py"
gpus = 2
mem = "70G"

[[jobs]]
name = "sweep-lr0.001"
cmd = "python train.py --lr 0.001"
gpus = 1
mem = "60G"
"""

FINAL = {
    "prep-data": JobState.DONE,
    "lr0.1": JobState.DONE,
    "eval-ckpt7": JobState.FAILED,
    "after-eval": JobState.BLOCKED,
}


async def _prepare(path: Path) -> None:
    """Run the queue until its short jobs are final; hold big-ddp; leave sweep waiting."""
    engine = Engine(path)
    await engine.start()
    await engine.pause(["big-ddp"])
    task = asyncio.create_task(engine.run())
    try:
        deadline = time.monotonic() + 30
        while any(engine.view(n).record.state != s for n, s in FINAL.items()):
            assert time.monotonic() < deadline, [v.record for v in engine.jobs()]
            await asyncio.sleep(0.05)
    finally:
        await engine.shutdown()
        task.cancel()


class SnapApp(GtuiApp):
    """The real app, which also stops its engine when the snapshot is taken."""

    async def on_unmount(self) -> None:
        super().on_unmount()
        await self.stop_engine()


@pytest.fixture
def make_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], SnapApp]:
    path = write_queue(tmp_path, QUEUE)
    asyncio.run(_prepare(path))
    monkeypatch.chdir(tmp_path)  # the header shows the queue as `q.toml`

    def make() -> SnapApp:
        return SnapApp(Engine(path), host="lab-3")

    return make


def settled(*keys: str) -> Callable[[Pilot[int]], Awaitable[None]]:
    """Wait for the first GPU read, then press ``keys`` and let the screen settle."""

    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, GtuiApp)
        deadline = time.monotonic() + 15
        while not (app.main.ready and app.main.query_one(GpuPanel).read is not None):
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        for k in keys:
            await pilot.press(k)
            await pilot.pause(0.02)
        await pilot.pause(0.3)
        for inp in app.screen.query(Input):
            inp.cursor_blink = False  # a blinking cursor would make the picture random
        await pilot.wait_for_scheduled_animations()

    return run_before


def test_main_screen_80x24(snap_compare, make_app) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=settled())


def test_main_screen_160x48(snap_compare, make_app) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(), terminal_size=(160, 48), run_before=settled())


def test_add_form(snap_compare, make_app) -> None:  # type: ignore[no-untyped-def]
    """The form after a mistake: the engine's message, in the form, on the field it names."""
    keys = ["a", *"python train.py", "tab", "1", "tab", *"lots", "ctrl+s"]
    assert snap_compare(make_app(), terminal_size=(100, 30), run_before=settled(*keys))


def test_kill_asks_for_confirmation(snap_compare, make_app) -> None:  # type: ignore[no-untyped-def]
    keys = ["end", "x"]  # the last job: sweep-lr0.001, waiting for memory
    assert snap_compare(make_app(), terminal_size=(100, 30), run_before=settled(*keys))


def test_help_screen(snap_compare, make_app) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app(), terminal_size=(120, 40), run_before=settled("question_mark"))


def test_failed_job_shows_diagnosis(snap_compare, make_app) -> None:  # type: ignore[no-untyped-def]
    keys = ["down", "down"]  # eval-ckpt7
    assert snap_compare(make_app(), terminal_size=(120, 30), run_before=settled(*keys))
