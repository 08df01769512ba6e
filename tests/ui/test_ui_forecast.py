"""The dashboard's progress column, ETA and start estimate, on a real engine with a
real job that prints its progress, fake GPUs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gtui.core.model import JobState
from gtui.ui.screens.detail import DetailScreen
from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard, screen_text, select, state
from tests.waiting import pilot_until as until


@pytest.mark.parametrize(("size", "column"), [((200, 30), True), ((80, 30), False)])
async def test_progress_bar_eta_and_starts_in_are_shown(
    tmp_path: Path, size: tuple[int, int], column: bool
) -> None:
    """A wide table has a progress column; a narrower one leads each note with it."""
    go = tmp_path / "go"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.2s"
        kill_grace = "1s"

        [[jobs]]
        name = "s{{i}}"
        matrix = {{ i = [0, 1, 2] }}
        mem = "10G"
        cmd = "if [ {{i}} = 0 ]; then exit 0; fi; printf ' 42%%|####  | 420/1000 [00:10<00:14]\\\\r'; while [ ! -e {go} ]; do sleep 0.05; done"
        """,
    )
    try:
        async with dashboard(q, size=size, fake="1x80G") as (app, pilot, engine):
            names = [v.spec.name for v in engine.jobs()]
            first, running, waiting = names
            await until(pilot, lambda: state(engine, first) == JobState.DONE, what="first done")
            await until(pilot, lambda: state(engine, running) == JobState.RUNNING)
            table = app.main.table
            await until(
                pilot,
                lambda: (
                    running in table.estimates
                    and table.estimates[running].progress is not None
                    and waiting in table.estimates
                ),
                timeout=30,
                what="the running job's progress and the waiting job's start",
            )
            text = screen_text(app)
            header = next(line for line in text.splitlines() if " name " in line)
            assert ("progress" in header) == column  # the column's title
            row = next(
                line for line in text.splitlines() if f" {running} " in line and "running" in line
            )
            assert "42%" in row and "██" in row
            wrow = next(
                line for line in text.splitlines() if f" {waiting} " in line and "queued" in line
            )
            if column:
                assert "starts ~" in wrow
            else:
                # Narrower, the waiting reason's key part leads and the start
                # estimate follows only where it fits whole: here it does not (the detail view
                # and `gtui status` still give it).
                assert "needs 10G" in wrow
            await select(pilot, app, running)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, DetailScreen), what="detail")
            await until(pilot, lambda: "finishes" in screen_text(app), what="detail's ETA")
            detail = screen_text(app)
            assert "42%  (420/1000" in detail and "estimate" in detail
            await pilot.press("escape")
            go.touch()
            await until(
                pilot,
                lambda: table.view(running).record.state == JobState.DONE,
                what="the running job ended on screen",
            )
            row = next(
                line
                for line in screen_text(app).splitlines()
                if f" {running} " in line and " done " in line
            )
            assert "42%" not in row  # the estimate made while it ran is not shown any more
    finally:
        go.touch()


def test_with_the_counts_no_walk_finds_what_none_runs(tmp_path: Path) -> None:
    """The header's counts spare the walks over every job (0.2-0.3 s every 2 s at
    100,000 waiting jobs): none running, no estimate and no log to read, as the walk finds;
    some running, the same estimates as without the counts."""
    from gtui.core.api import freeze
    from gtui.core.model import JobRecord, JobSpec
    from gtui.core.progress import Progress
    from gtui.ui.forecast import UiForecast
    from gtui.ui.format import count_states

    def view(i: int, state: JobState) -> object:
        rec = JobRecord(name=f"j{i}", state=state, log=str(tmp_path / f"j{i}.log"), gpus=(0,))
        rec.started_at = 1000.0 if state == JobState.RUNNING else None
        rec.attempt = 1
        return freeze(JobSpec(name=f"j{i}", cmd="true"), rec, i)

    waiting = [view(i, JobState.QUEUED) for i in range(5)]
    forecast = UiForecast(tmp_path / "none.db")
    assert forecast.update(waiting, 1010.0) == {} and forecast.running == []
    assert forecast.update(waiting, 1010.0, counts=count_states(waiting)) == {}
    assert forecast.running == []
    views = [view(9, JobState.RUNNING), *waiting]
    forecast.book.observe("j9", 1, Progress(0.5, "gtui", "0.5"), 1005.0)
    without = forecast.update(views, 1010.0)
    running = list(forecast.running)
    assert without and running
    assert forecast.update(views, 1010.0, counts=count_states(views)) == without
    assert forecast.running == running
