"""The dashboard and groups: F folds a group into one line with its counts (done / running /
waiting) and shows its jobs again; the filter matches a group's name."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard, screen_text
from tests.waiting import pilot_until as until

QUEUE = """
[settings]
poll = "0.1s"
[groups.sweep]
max_parallel = 1
[[jobs]]
name = "first"
gpus = 0
group = "sweep"
cmd = "true"
[[jobs]]
name = "gated"
gpus = 0
group = "sweep"
cmd = "while [ ! -e release ]; do sleep 0.05; done"
[[jobs]]
name = "last"
gpus = 0
group = "sweep"
cmd = "true"
[[jobs]]
name = "outside"
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"
"""


async def test_f_folds_a_group_into_one_line_with_its_counts(tmp_path: Path) -> None:
    queue = write_queue(tmp_path, QUEUE)
    async with dashboard(queue, size=(120, 30), fake="1x80G") as (app, pilot, _engine):
        table = app.main.table

        def state_of(name: str) -> str | None:
            v = table.view(name)
            return None if v is None else v.record.state.value

        await until(pilot, lambda: state_of("gated") == "running", what="gated runs")
        await until(pilot, lambda: state_of("first") == "done", what="first done")
        table.set_fold_done(False)  # every job in its place
        await pilot.press("F")
        await until(pilot, lambda: table.visible_names == ["first", "outside"], what="folded")
        assert table.group_row("first") == "sweep" and table.group_row("outside") is None
        await until(
            pilot,
            lambda: any(
                "sweep" in line and "1 done · 1 running · 1 waiting" in line
                for line in screen_text(app).splitlines()
            ),
            what="the group's line with its counts",
        )
        (tmp_path / "release").touch()  # the counts follow the jobs
        await until(
            pilot,
            lambda: "3 done · 0 running · 0 waiting" in screen_text(app),
            what="the counts after the group ended",
        )
        await pilot.press("F")  # its jobs again
        await until(pilot, lambda: table.visible_names == ["first", "gated", "last", "outside"])
        assert table.group_row("first") is None

        await pilot.press("slash", *"sweep", "enter")  # the filter matches the group's name
        await until(pilot, lambda: table.visible_names == ["first", "gated", "last"])
