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
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static

from gtui.core.model import JobState
from gtui.core.sched.engine import Engine
from gtui.ui.app import GtuiApp
from gtui.ui.screens.confirm import ConfirmScreen
from gtui.ui.screens.help import HelpScreen
from gtui.ui.screens.job_form import JobForm
from gtui.ui.widgets.diagnosis import DiagnosisPanel
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


@dataclass(frozen=True)
class Until:
    """A step of a snapshot's script: wait (with a deadline) until ``check`` holds."""

    what: str
    check: Callable[[GtuiApp], object]


Step = str | Until


def _queue_summary(app: GtuiApp) -> str:
    return str(app.main.query_one("#queue-box").border_subtitle or "")


def _steady(app: GtuiApp) -> bool:
    """Everything the picture shows has arrived: the engine's state, a GPU read from its loop
    (the summary of what waits is published by the loop's first pass), the selected job's log."""
    main = app.main
    if not main.ready:
        return False
    read = main.query_one(GpuPanel).read
    return (
        len(main.table) == 6
        and read is not None
        and len(read.snapshot.gpus) == 3
        and _queue_summary(app).startswith("1 waiting")
        and "wrote 1200 shards" in main.log_view.text().plain
    )


def focused(field: str) -> Until:
    """The job form is open with the cursor in ``field``: the next keys type there."""

    def check(app: GtuiApp) -> bool:
        return isinstance(app.screen, JobForm) and getattr(app.focused, "id", None) == (
            f"field-{field}"
        )

    return Until(f"the cursor in the form's {field} field", check)


def selected(name: str) -> Until:
    """``name`` is selected and its log panel is shown (the log's title names it)."""

    def check(app: GtuiApp) -> bool:
        return app.main.table.selected == name and str(app.main.log_view.border_title).startswith(
            f"Log · {name}"
        )

    return Until(f"{name} selected, its log shown", check)


def settled(*steps: Step) -> Callable[[Pilot[int]], Awaitable[None]]:
    """Wait until the screen is steady, then press each key, and after a key wait for each
    condition that follows it (with a deadline): never a pause that guesses a duration."""

    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, GtuiApp)

        async def until(step: Until) -> None:
            deadline = time.monotonic() + 30
            while not step.check(app):
                if time.monotonic() > deadline:
                    raise AssertionError(f"timed out waiting for {step.what}")
                await pilot.pause(0.05)

        await until(Until("the engine's state, GPUs, summary and log on screen", _steady))
        for step in steps:
            if isinstance(step, str):
                await pilot.press(step)
            else:
                await until(step)
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

    def error_on_mem(app: GtuiApp) -> bool:
        err = str(app.screen.query_one("#form-error", Static).render())
        return "mem" in err and getattr(app.focused, "id", None) == "field-mem"

    steps = [
        "a",
        focused("cmd"),
        *"python train.py",
        "tab",
        focused("gpus"),
        "1",
        "tab",
        focused("mem"),
        *"lots",
        "ctrl+s",
        Until("the engine's error in the form, the cursor on mem", error_on_mem),
    ]
    assert snap_compare(make_app(), terminal_size=(100, 30), run_before=settled(*steps))


def test_kill_asks_for_confirmation(snap_compare, make_app) -> None:  # type: ignore[no-untyped-def]
    def asks(app: GtuiApp) -> bool:
        screen = app.screen
        return (
            isinstance(screen, ConfirmScreen)
            and screen.title_text == "Kill sweep-lr0.001?"
            and getattr(app.focused, "id", None) == "choice-cancel"
        )

    steps = [
        "end",  # the last job: sweep-lr0.001, waiting for memory
        selected("sweep-lr0.001"),
        "x",
        Until("the kill question, Cancel focused", asks),
    ]
    assert snap_compare(make_app(), terminal_size=(100, 30), run_before=settled(*steps))


def test_help_screen(snap_compare, make_app) -> None:  # type: ignore[no-untyped-def]
    def shown(app: GtuiApp) -> bool:
        return isinstance(app.screen, HelpScreen) and bool(app.screen.query("#help-body"))

    steps = ["question_mark", Until("the help screen", shown)]
    assert snap_compare(make_app(), terminal_size=(120, 40), run_before=settled(*steps))


def test_failed_job_shows_diagnosis(snap_compare, make_app) -> None:  # type: ignore[no-untyped-def]
    def diagnosed(app: GtuiApp) -> bool:
        panel = app.main.query_one(DiagnosisPanel)
        return bool(panel.display) and "CUDA OOM" in str(panel.render())

    steps = [
        "down",
        "down",  # eval-ckpt7
        selected("eval-ckpt7"),
        Until("its diagnosis", diagnosed),
        Until(
            "its log",
            lambda app: "OutOfMemoryError" in app.main.log_view.text().plain,
        ),
    ]
    assert snap_compare(make_app(), terminal_size=(120, 30), run_before=settled(*steps))
