"""Snapshot tests of the dashboard (pytest-textual-snapshot), on a real engine and queue file.

Deterministic by construction: the jobs are run to final or held states before the app opens
(nothing runs, so no clock or utilization moves), the host name is fixed, the queue path is
shown relative to the working directory, the fake GPUs are fixed. Update the pictures with
``pytest tests/ui/test_ui_snapshots.py --snapshot-update`` and look at them before committing.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
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
from tests.dashboard_helpers import type_text

# poll: nothing runs while a picture is taken, and the jobs reach their final states on their
# own ends, not on a poll; a poll every 0.2 s published a GPU read 5 times a second, each a
# repaint of the whole screen (most of these tests' time). Comments stay out of the file: the
# broken-file banner shows a line number.
QUEUE = """
[settings]
poll = "30s"
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


@dataclass(frozen=True)
class Typed:
    """A step of a snapshot's script: type ``text`` into the focused input, then wait until it
    holds it (tests/dashboard_helpers.py's type_text)."""

    text: str


Step = str | Until | Typed


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
        # The done jobs folded, the first row is the failed one: its log.
        and "CUDA out of memory" in main.log_view.text().plain
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
            elif isinstance(step, Typed):
                await type_text(pilot, step.text)
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
        focused("name"),
        "tab",
        focused("cmd"),
        Typed("python train.py"),
        "tab",
        focused("gpus"),
        "1",
        "tab",
        focused("mem"),
        Typed("lots"),
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
        return bool(panel.display) and "CUDA OOM" in panel.text.plain

    steps = [
        selected("eval-ckpt7"),  # the first row (the done jobs before it are folded)
        Until("its diagnosis", diagnosed),
        Until(
            "its log",
            lambda app: "OutOfMemoryError" in app.main.log_view.text().plain,
        ),
    ]
    assert snap_compare(make_app(), terminal_size=(120, 30), run_before=settled(*steps))


# -- the job detail view and the zoomed log ------------------------------------------------------

DETAIL_QUEUE = """
[settings]
poll = "30s"  # as in QUEUE: no repaint 5 times a second
mode = "shared"
fake_gpus = "80G:30G@20,80G"
env = { WANDB_MODE = "offline" }

[[jobs]]
name = "prep-data"
cmd = "echo preparing; echo 'wrote 1200 shards'"
gpus = 0

[[jobs]]
name = "train-lr0.1"
cmd = "sh train.sh --lr 0.1 --gpu {gpu}"
gpus = 1
mem = "10G"
retries = 1
after = ["prep-data"]
env = { LR = "0.1" }

[[jobs]]
name = "eval-lr0.1"
cmd = "echo evaluating"
gpus = 1
mem = "8G"
after = ["train-lr0.1"]
"""

# A PyTorch CUDA OOM as a training script prints it (a shell script: no Python needed), with a
# frame longer than 80 columns.
TRAIN_SH = """\
echo "epoch 1 | loss 0.412 | acc 0.871"
echo "Traceback (most recent call last):"
echo '  File "train.py", line 88, in <module>'
echo "    main(args)"
echo '  File "train.py", line 61, in main'
echo "    loss = model(batch).loss"
echo '  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1736, in _wrapped_call_impl'
echo "    return self._call_impl(*args, **kwargs)"
echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.20 GiB is free."
exit 1
"""

DETAIL_FINAL = {
    "prep-data": JobState.DONE,
    "train-lr0.1": JobState.FAILED,
    "eval-lr0.1": JobState.BLOCKED,
}
T0 = 1767258000.0  # 2026-01-01 09:00:00 UTC: the pictures show fixed times


def _freeze(path: Path) -> None:
    """Make what the detail view shows of the runs the same at every run: times, pids, tokens,
    and the GPU memory peaks (sampled, so present or not by chance), in the records and in the
    attempts history."""
    import sqlite3

    from gtui.core.paths import queue_paths
    from gtui.core.state.store import Store

    db = queue_paths(path).db
    with Store(db) as store:
        recs = store.load()
        for i, (name, rec) in enumerate(recs.items()):
            start = T0 + 60 * i
            rec.token = f"{i + 1:032x}"
            rec.queued_since = T0
            if rec.reason_at is not None:
                rec.reason_at = start
            if rec.attempt:
                rec.pid, rec.create_time = 4000 + i, T0
                rec.started_at = start + 5 * (rec.attempt - 1)
                rec.ended_at = rec.started_at + 2
                rec.peak_mib = 10 * 1024 if rec.gpus else None
                if name == "train-lr0.1":
                    rec.mem_mib = 12800
                    rec.warnings = [
                        w
                        if not w.startswith("CUDA OOM:")
                        else "CUDA OOM: the retry asks 12800 MiB instead of 10240"
                        for w in rec.warnings
                    ]
            elif rec.ended_at is not None:
                rec.ended_at = start
        store.save_many(recs.values())
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT name, attempt FROM attempts").fetchall()
        for name, attempt in rows:
            i = list(recs).index(name)
            started = T0 + 60 * i + 5 * (attempt - 1)
            peak = 10 * 1024 if recs[name].gpus else None
            conn.execute(
                "UPDATE attempts SET started_at = ?, ended_at = ?, peak_mib = ? "
                "WHERE name = ? AND attempt = ?",
                (started, started + 2, peak, name, attempt),
            )


async def _prepare_detail(path: Path) -> None:
    engine = Engine(path)
    await engine.start()
    task = asyncio.create_task(engine.run())
    try:
        deadline = time.monotonic() + 30
        while any(engine.view(n).record.state != s for n, s in DETAIL_FINAL.items()) or (
            engine.view("train-lr0.1").record.attempt != 2
        ):
            assert time.monotonic() < deadline, [v.record for v in engine.jobs()]
            await asyncio.sleep(0.05)
    finally:
        await engine.shutdown()
        task.cancel()


@pytest.fixture
def make_detail_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], SnapApp]]:
    # The detail view shows the job's absolute paths, wrapped: a folder whose path has the same
    # length wherever the test runs (pytest's tmp_path grows with its run number, and more under
    # a pytest-xdist worker), so the picture does not change with it.
    tmp_path = Path(tempfile.mkdtemp(prefix="gtui-snapshot-", dir="/tmp"))
    (tmp_path / "train.sh").write_text(TRAIN_SH)
    path = write_queue(tmp_path, DETAIL_QUEUE)
    asyncio.run(_prepare_detail(path))
    _freeze(path)
    monkeypatch.chdir(tmp_path)  # paths show relative to it: `logs/train-lr0.1.2.log`
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()

    def make() -> SnapApp:
        return SnapApp(Engine(path), host="lab-3")

    yield make
    monkeypatch.undo()
    time.tzset()
    shutil.rmtree(tmp_path, ignore_errors=True)


def _detail_steady(app: GtuiApp) -> bool:
    main = app.main
    read = main.query_one(GpuPanel).read if main.ready else None
    return (
        main.ready
        and len(main.table) == 3
        and read is not None
        and len(read.snapshot.gpus) == 2
        and main.table.selected == "train-lr0.1"  # the first row: prep-data, done, is folded
        and "CUDA out of memory" in main.log_view.text().plain
    )


def detail_settled(*steps: Step) -> Callable[[Pilot[int]], Awaitable[None]]:
    """``settled`` for the detail queue: its own steady picture, then the steps."""

    async def run_before(pilot: Pilot[int]) -> None:
        app = pilot.app
        assert isinstance(app, GtuiApp)
        for step in (Until("the engine's state, GPUs and log on screen", _detail_steady), *steps):
            # Every job of this queue has ended: the first screen's note on running it again
            # (a toast, tests/ui/test_ui_app.py) would lie over the views these pictures are of.
            app.clear_notifications()
            if isinstance(step, str):
                await pilot.press(step)
                continue
            deadline = time.monotonic() + 30
            while not step.check(app):
                if time.monotonic() > deadline:
                    log = app.main.log_view
                    raise AssertionError(
                        f"timed out waiting for {step.what}; the log panel "
                        f"({log.region.width}x{log.region.height} of {app.size}, "
                        f"zoomed: {app.main.zoomed}, {log.status()}) shows "
                        f"{log.text().plain[-400:]!r}"
                    )
                await pilot.pause(0.05)
        await pilot.wait_for_scheduled_animations()

    return run_before


def _detail_of(name: str, attempts: int) -> Until:
    """The detail view of ``name`` is shown with its ``attempts`` recorded attempts, its log
    loaded."""

    def check(app: GtuiApp) -> bool:
        from gtui.ui.screens.detail import DetailScreen

        screen = app.screen
        if not isinstance(screen, DetailScreen) or screen.job != name:
            return False
        log = screen.log_view.text().plain
        return "torch.OutOfMemoryError" in log and len(screen.history) == attempts

    return Until(f"{name}'s details and log", check)


def _zoomed(app: GtuiApp) -> bool:
    main = app.main
    return (
        main.zoomed
        and not main.query_one("#queue-box").display
        and main.log_view.region.width == app.size.width
        and "torch.OutOfMemoryError" in main.log_view.text().plain
        # The zoomed panel's own read is in: the whole log fits it, its first line included
        # (until then it shows the lines the smaller pane had read).
        and "epoch 1 |" in main.log_view.text().plain
    )


TRAIN = [selected("train-lr0.1")]  # the first row: prep-data, done, is folded


def test_detail_view_at_80x24_leads_with_the_state_diagnosis_and_traceback(  # type: ignore[no-untyped-def]
    snap_compare, make_detail_app
) -> None:
    """enter on a job that failed twice, at 80x24: its state, the diagnosis and its hint on top
    (every value wrapped), the traceback's last frames in the log below; the rest scrolls."""
    steps = [*TRAIN, "enter", _detail_of("train-lr0.1", 2)]
    assert snap_compare(
        make_detail_app(), terminal_size=(80, 24), run_before=detail_settled(*steps)
    )


def test_detail_view_at_120x30_shows_every_attempt(  # type: ignore[no-untyped-def]
    snap_compare, make_detail_app
) -> None:
    """At 120x30 every attempt is on screen under the diagnosis: when it ran, how it ended, it
    was retried, its peak, GPU, log file, and its own diagnosis."""
    steps = [*TRAIN, "enter", _detail_of("train-lr0.1", 2)]
    assert snap_compare(
        make_detail_app(), terminal_size=(120, 30), run_before=detail_settled(*steps)
    )


def test_detail_view_scrolled_shows_the_job_and_its_environment(  # type: ignore[no-untyped-def]
    snap_compare, make_detail_app
) -> None:
    """The rest of the details at 120x30: command after placeholders, cwd, GPUs and memory
    asked and given, whom it waits for and who waits for it, the environment gtui sets."""

    def at_end(app: GtuiApp) -> bool:
        box = app.screen.query_one("#detail-box")
        return box.scroll_y >= box.max_scroll_y > 0

    steps = [*TRAIN, "enter", _detail_of("train-lr0.1", 2), "end", Until("scrolled", at_end)]
    assert snap_compare(
        make_detail_app(), terminal_size=(120, 30), run_before=detail_settled(*steps)
    )


@pytest.mark.parametrize("size", [(80, 24), (120, 30)], ids=["80x24", "120x30"])
def test_zoomed_log_fills_the_screen_and_wraps_the_traceback(  # type: ignore[no-untyped-def]
    snap_compare, make_detail_app, size
) -> None:
    """z on a failed job: the log alone, its traceback's last frames wrapped (nothing cut at the
    right edge), the footer still there."""
    steps = [*TRAIN, "z", Until("the log, zoomed", _zoomed)]
    assert snap_compare(make_detail_app(), terminal_size=size, run_before=detail_settled(*steps))
