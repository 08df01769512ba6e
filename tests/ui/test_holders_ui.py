"""Who holds each GPU, on the dashboard: a line under the GPU's bar, and ``h`` to
expand it to one line per holder."""

from __future__ import annotations

import re
from pathlib import Path

from gtui.ui.widgets.gpu_panel import GpuPanel
from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard, screen_text
from tests.waiting import pilot_until as until

SPEC = "80G:70G@0[alice 61G 3h python train.py; bob 2G 20m orphan jupyter-lab],80G"


async def test_holders_under_the_gpu_bar_and_h_expands_them(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "mine"
        mem = "10G"
        cmd = "while [ ! -e release ]; do sleep 0.05; done"
        """,
    )
    try:
        async with dashboard(q, fake=SPEC) as (app, pilot, _engine):
            panel = app.main.query_one(GpuPanel)
            summary = "held by alice's python train.py 61G +1 more  2 stale  (h: details)"
            await until(pilot, lambda: summary in panel.render().plain, what=summary)
            # The panel has the line; the screen paints it at its next refresh.
            await until(pilot, lambda: summary in screen_text(app), what=f"{summary} on screen")
            assert "held by" not in panel.render().plain.split("\n", 2)[-1]  # GPU 1: ours only
            await pilot.press("h")
            await until(pilot, lambda: "stale: parent gone" in panel.render().plain)
            lines = panel.render().plain.splitlines()
            (alice,) = [ln for ln in lines if "alice" in ln]
            # Held 3 h when the fake GPUs were read: a second or two more on a busy machine.
            assert "61G" in alice and "python train.py" in alice
            assert re.search(r"\b3:00:0\d\b", alice), alice
            assert alice.rstrip().endswith("stale: idle at 0 % for 3 h")
            assert "mine" not in "".join(ln for ln in lines if "↳" in ln)  # our job: no holder
            await pilot.press("h")
            await until(pilot, lambda: summary in panel.render().plain, what="folded again")
    finally:
        (tmp_path / "release").touch()


async def test_the_dashboard_points_out_mem_far_from_the_last_runs(tmp_path: Path) -> None:
    """At start, a job whose mem is far above its last runs' peak is a warning on
    screen (a toast), as ``gtui validate`` says it."""
    from gtui.core.model import JobRecord, JobState
    from gtui.core.paths import queue_paths
    from gtui.core.state.history import record_attempt
    from gtui.core.state.store import Store
    from tests.dashboard_helpers import shows_toast

    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "big"
        mem = "40G"
        cmd = "true"
        """,
    )
    with Store(queue_paths(q).db) as store:
        rec = JobRecord(name="big", state=JobState.DONE, attempt=1, gpus=(0,), peak_mib=12 * 1024)
        record_attempt(store, rec)
    async with dashboard(q) as (app, pilot, _engine):
        words = ("big: mem 40G is far above its last run's peak 12G", 'mem = "auto"')
        await until(pilot, lambda: shows_toast(app, "warning", *words), what=words)


async def test_the_note_on_mem_stays_in_the_detail_view_and_the_table(tmp_path: Path) -> None:
    """The note on a mem far from the last runs is not only a passing toast:
    the detail view's memory row says it, and the job's note in the table where it fits."""
    from gtui.core.model import JobState
    from tests.ui.test_ui_detail import open_detail

    release = tmp_path / "release"
    wait = f"while [ ! -e {release} ]; do sleep 0.05; done"
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "big"
        mem = "70G"
        env = { GTUI_FAKE_USE = "12G" }
        cmd = "WAIT"
        [[jobs]]
        name = "small"
        mem = "8G"
        env = { GTUI_FAKE_USE = "10G" }
        cmd = "WAIT"
        """.replace("WAIT", wait),
    )
    async with dashboard(q, size=(200, 40)) as (app, pilot, engine):
        # Each run's peak is what the note is made from: the jobs end once the scheduler has
        # seen their use (a 0.5 s job could end between two polls on a busy machine, with no
        # peak to judge by).
        await until(
            pilot,
            lambda: all(engine.view(n).record.peak_mib for n in ("big", "small")),
            what="both jobs' use seen",
        )
        release.touch()
        await until(
            pilot,
            lambda: all(engine.view(n).record.state == JobState.DONE for n in ("big", "small")),
            what="both done",
        )
        table = app.main.table
        await until(
            pilot, lambda: "mem: 15G would do" in table.note("big").plain, what="big's note"
        )
        await until(pilot, lambda: "mem: ask 12G" in table.note("small").plain, what="small's")
        # 200 columns: the note fits (painted a frame after the table has it)
        await until(pilot, lambda: "mem: 15G would do" in screen_text(app), what="the note")
        await open_detail(
            pilot, app, "big", "mem 70G is far above its last run's peak 12G; 15G would do"
        )
