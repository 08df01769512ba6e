"""The screen keeps what matters in view: whole names and notes at 120 columns, sweep members
cut to their parameters, done jobs folded (E) so what runs and waits stays on an 80x24 screen,
a cut diagnosis that says it scrolls, done jobs' notes without figures, the detail view's cwd
as an absolute path. Pilot over a real Engine, real processes and files; only the GPUs are fake.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console
from textual.pilot import Pilot

from gtui.core.api import JobView
from gtui.core.model import JobRecord, JobSpec, JobState
from gtui.ui.app import GtuiApp
from gtui.ui.format import cut_middle, note_cell
from gtui.ui.screens.detail import DetailScreen
from gtui.ui.screens.help import help_text
from gtui.ui.widgets.diagnosis import DiagnosisPanel
from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard, screen_text, select, state
from tests.waiting import pilot_until as until

LR01 = "sweep-resnet50-imagenet-lr0.1-bs32"
LR001 = "sweep-resnet50-imagenet-lr0.01-bs32"
KEY = "needs 40G, best GPU has 31G free"
GPUS = "40G:9G"  # 31G free: a 40G job waits, its note says so

QUEUE = """
[settings]
poll = "0.2s"
kill_grace = "1s"
mode = "shared"

[[jobs]]
name = "prep-shard{i}"
matrix = { i = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14] }
gpus = 0
cmd = "true"

[[jobs]]
name = "sweep-resnet50-imagenet-lr{lr}-bs{bs}"
matrix = { lr = ["0.1", "0.01"], bs = [32] }
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"

[[jobs]]
name = "big-eval"
gpus = 1
mem = "40G"
cmd = "true"

[[jobs]]
name = "summary"
gpus = 0
after = ["sweep-resnet50-imagenet-lr{lr}-bs{bs}"]
cmd = "true"
"""
PREP = [f"prep-shard{i}" for i in range(1, 15)]


def rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if "│" in line]


async def settled(pilot: Pilot[int], app: GtuiApp) -> None:
    """Every prep job done, both sweep members running, on the screen as in the engine."""
    table = app.main.table

    def shown(name: str, st: JobState) -> bool:
        v = table.view(name)
        return v is not None and v.record.state == st

    await until(pilot, lambda: all(shown(n, JobState.DONE) for n in PREP), what="prep done")
    await until(pilot, lambda: shown(LR01, JobState.RUNNING) and shown(LR001, JobState.RUNNING))


# -- 120 columns: whole names and notes ----------------------------------------------------------


async def test_at_120_columns_names_and_notes_are_whole(tmp_path: Path) -> None:
    """The log no longer squeezes the queue to 70 columns: it goes under the queue where the
    queue would lose its names' or notes' room beside it."""
    queue = write_queue(tmp_path, QUEUE)
    async with dashboard(queue, size=(120, 35), fake=GPUS) as (app, pilot, _engine):
        await settled(pilot, app)
        await until(pilot, lambda: KEY in screen_text(app), what=repr(KEY))
        text = screen_text(app)
        for name in (LR01, LR001, "big-eval", "summary"):
            assert any(name in r for r in rows(text)), text
        row = next(r for r in rows(text) if "big-eval" in r)
        assert f"{KEY} " in row or row.rstrip(" │").endswith(KEY), row  # not cut
        assert app.main.table.size.width >= 110


async def test_at_200_columns_the_log_sits_beside_a_queue_that_keeps_its_room(
    tmp_path: Path,
) -> None:
    queue = write_queue(tmp_path, QUEUE)
    async with dashboard(queue, size=(200, 50), fake=GPUS) as (app, pilot, _engine):
        await settled(pilot, app)
        await until(pilot, lambda: KEY in screen_text(app), what=repr(KEY))
        log, table = app.main.log_view, app.main.table
        assert log.region.x > table.region.right  # beside it
        assert any(LR001 in r for r in rows(screen_text(app)))


# -- sweep members: the cut keeps the parameters -------------------------------------------------


def test_a_sweep_members_cut_keeps_its_parameters_not_the_shared_prefix() -> None:
    from gtui.ui.format import cut_name, sweep_start

    names = [LR01, LR001]
    start = sweep_start(names)
    assert names[0][start:] == "lr0.1-bs32"  # back to the word's start, past "0." shared
    for width in (12, 14, 17, 20):
        cut = [cut_name(n, width, start) for n in names]
        assert all(len(c) == width for c in cut), cut
        assert cut[0].endswith("lr0.1-bs32") and cut[1].endswith("lr0.01-bs32"), cut
    assert cut_name(LR01, 8, start) != cut_name(LR001, 8, start)  # even too narrow
    assert cut_name(LR01, 60, start) == LR01
    assert sweep_start([LR01]) == 0  # no siblings: nothing known shared
    other = "train-vit-base-patch16-224-lr0.01-seed3"  # not a sweep member: cut in the middle
    assert cut_name(other, 24) == cut_middle(other, 24)


async def test_at_80_columns_sweep_members_read_their_parameters(tmp_path: Path) -> None:
    queue = write_queue(tmp_path, QUEUE)
    async with dashboard(queue, size=(80, 24), fake=GPUS) as (app, pilot, _engine):
        await settled(pilot, app)

        def sweep_rows() -> list[str]:
            return [r for r in rows(screen_text(app)) if "sweep-" in r and "running" in r]

        await until(pilot, lambda: len(sweep_rows()) == 2, what="both sweep rows")
        first, second = sweep_rows()
        assert "lr0.1-bs32 " in first and "lr0.01-bs32 " in second, (first, second)


# -- 80x24: what runs and waits stays in view ----------------------------------------------------


async def test_at_80x24_running_and_waiting_jobs_stay_in_view_done_ones_fold(
    tmp_path: Path,
) -> None:
    """14 done jobs before 2 running and 2 waiting ones: the table (5 rows at 80x24) showed
    done jobs only. Done jobs fold; the title says how many and the key; E shows them."""
    queue = write_queue(tmp_path, QUEUE)
    async with dashboard(queue, size=(80, 24), fake=GPUS) as (app, pilot, _engine):
        await settled(pilot, app)
        await select(pilot, app, "summary")  # the cursor off the done jobs
        await until(pilot, lambda: app.main.table.folded == 14, what="14 done folded")
        text = screen_text(app)
        for name in ("lr0.1-bs32", "lr0.01-bs32", "big-eval", "summary"):
            assert any(name in r for r in rows(text)), text
        assert "14 done folded (E shows)" in text
        assert not any("prep-shard" in r for r in rows(text)), text

        await pilot.press("E")  # shown in their place
        await until(pilot, lambda: "prep-shard1" in app.main.table.visible_names)
        assert app.main.table.visible_names[:14] == PREP
        assert app.main.table.selected == "summary"  # the cursor stays on its job
        await until(pilot, lambda: "done folded" not in screen_text(app))
        await pilot.press("E")  # folded again
        await until(pilot, lambda: app.main.table.folded == 14)

        await pilot.press("slash", *"@done", "enter")  # a filter shows what it matches
        await until(pilot, lambda: app.main.table.visible_names == PREP)
        await pilot.press("escape")  # the filter cleared: the done job picked through it stays
        await until(pilot, lambda: app.main.table.filter_name == "all")
        assert app.main.table.selected == "prep-shard1" and app.main.table.folded == 13

    console = Console(width=100, record=True)
    console.print(help_text())
    assert re.search(r"\nE +show the done jobs in their place", console.export_text())


async def test_the_selected_job_is_not_folded_away_when_it_ends(tmp_path: Path) -> None:
    """A job whose log the user reads stays on screen when it is done."""
    queue = write_queue(tmp_path, QUEUE)
    async with dashboard(queue, size=(80, 24), fake=GPUS) as (app, pilot, engine):
        await settled(pilot, app)
        await select(pilot, app, LR001)
        (tmp_path / "release").touch()
        await until(pilot, lambda: state(engine, LR001) == JobState.DONE)
        await until(pilot, lambda: app.main.table.view(LR001).record.state == JobState.DONE)
        assert app.main.table.selected == LR001
        assert LR001 in app.main.table.visible_names


# -- a cut diagnosis says that it scrolls --------------------------------------------------------

LONG_HINT = "check the shard list; " * 30
FAILING = f"""
[settings]
poll = "0.2s"

[[jobs]]
name = "fetch"
gpus = 0
cmd = "echo 'shard 17 missing'; exit 2"

[[diagnose]]
kind = "missing_shard"
pattern = "shard [0-9]+ missing"
hint = "{LONG_HINT.strip()}"
"""


async def test_at_80x24_a_cut_diagnosis_says_that_it_scrolls(tmp_path: Path) -> None:
    queue = write_queue(tmp_path, FAILING)
    async with dashboard(queue, size=(80, 24), fake="1x80G") as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "fetch") == JobState.FAILED)
        await select(pilot, app, "fetch")
        panel = app.main.query_one(DiagnosisPanel)
        await until(pilot, lambda: panel.display and panel.size.height > 0, what="the panel")
        await until(pilot, lambda: "more ↓" in screen_text(app), what="the scroll mark")
        panel.scroll_end(animate=False)  # scrolled to its end: nothing more below
        await until(pilot, lambda: "more ↓" not in screen_text(app), what="the mark gone")


async def test_a_whole_diagnosis_has_no_scroll_mark(tmp_path: Path) -> None:
    queue = write_queue(tmp_path, FAILING.replace(LONG_HINT.strip(), "check the shard list"))
    async with dashboard(queue, size=(80, 24), fake="1x80G") as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "fetch") == JobState.FAILED)
        await select(pilot, app, "fetch")
        await until(pilot, lambda: "check the shard list" in screen_text(app))
        assert "more ↓" not in screen_text(app)


# -- ended jobs' notes: only what the user acts on -----------------------------------------------


def test_a_done_jobs_note_leaves_what_it_used_to_the_detail_view() -> None:
    g = 1024
    rec = JobRecord(name="a", state=JobState.DONE, attempt=1, mem_mib=12 * g, peak_mib=9 * g)
    rec.gpus, rec.started_at, rec.ended_at, rec.host_peak_mib = (0,), 0.0, 1800.0, 10
    done = JobView(JobSpec(name="a", cmd="x", mem_mib=12 * g), rec, 0)
    assert note_cell(done).plain == ""  # was "peak 9G of 12G · host 10M · 0.50 GPU-h"
    running = JobRecord(name="a", state=JobState.RUNNING, attempt=1, mem_mib=12 * g)
    running.peak_mib = 9 * g
    assert note_cell(JobView(JobSpec(name="a", cmd="x"), running, 0)).plain == "peak 9G of 12G"


async def test_the_detail_view_shows_the_working_directory_as_an_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "work").mkdir()
    queue = write_queue(
        tmp_path,
        '[settings]\npoll = "0.2s"\n\n[[jobs]]\nname = "one"\ngpus = 0\ncwd = "work"\n'
        'cmd = "true"\n',
    )
    monkeypatch.chdir(tmp_path)  # where a relative path would be shown
    async with dashboard(queue, size=(200, 50)) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "one") == JobState.DONE)
        await select(pilot, app, "one")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, DetailScreen))
        where = str((tmp_path / "work").resolve())

        def cwd_row() -> str:
            return next((r for r in screen_text(app).splitlines() if " cwd " in r), "")

        await until(pilot, lambda: cwd_row(), what="the cwd row")
        assert where in cwd_row(), cwd_row()
