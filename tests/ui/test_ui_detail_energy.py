"""The job detail view shows the job's GPU energy: each attempt's kWh and the job's total,
marked as the GPU's energy over the job's time when another job shared its GPU. Pilot over a
real Engine, real processes, simulated GPUs; every wait is on a condition."""

from __future__ import annotations

from pathlib import Path

from gtui.core.model import JobState
from gtui.core.state.energyreport import kwh_text
from gtui.core.state.history import attempts
from gtui.ui.attempt_notes import SHARED_WORDS
from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard, screen_text, state
from tests.ui.test_ui_detail import flat, open_detail
from tests.waiting import pilot_until as until

QUEUE = """
[settings]
mode = "pack"
poll = "0.1s"

[[jobs]]
name = "alone"
gpus = 1
mem = "10G"
cmd = "while [ ! -f go.alone ]; do sleep 0.05; done"

[[jobs]]
name = "pair-a"
gpus = 1
mem = "10G"
after = ["alone"]
cmd = "while [ ! -f go.pair ]; do sleep 0.05; done"

[[jobs]]
name = "pair-b"
gpus = 1
mem = "10G"
after = ["alone"]
cmd = "while [ ! -f go.pair ]; do sleep 0.05; done"
"""


async def test_the_detail_view_shows_the_jobs_kwh_and_when_its_gpu_was_shared(
    tmp_path: Path,
) -> None:
    queue = write_queue(tmp_path, QUEUE)
    async with dashboard(queue, size=(120, 60), fake="80G") as (app, pilot, engine):

        async def run_a_while(*names: str, go: str) -> None:
            await until(
                pilot,
                lambda: all(state(engine, n) == JobState.RUNNING for n in names),
                what=f"{names} running",
            )
            began = max(engine.view(n).record.started_at or 0.0 for n in names)
            await until(
                pilot,
                lambda: engine.gpus is not None and engine.gpus.snapshot.taken_at > began + 0.5,
                what="a GPU reading half a second in",
            )
            (tmp_path / go).write_text("")
            await until(
                pilot,
                lambda: all(state(engine, n) == JobState.DONE for n in names),
                what=f"{names} done",
            )

        await run_a_while("alone", go="go.alone")
        await run_a_while("pair-a", "pair-b", go="go.pair")
        (alone,) = attempts(engine.paths.db, "alone")
        assert alone.energy_kwh is not None and not alone.energy_shared
        kwh = kwh_text(alone.energy_kwh)
        await open_detail(pilot, app, "alone", f"energy {kwh} over 1 attempt")
        shown = flat(screen_text(app))
        assert "#1 " in shown and f"· {kwh}" in shown  # the attempt's own figure
        assert SHARED_WORDS not in shown
        await pilot.press("escape")
        (pair,) = attempts(engine.paths.db, "pair-a")
        assert pair.energy_kwh is not None and pair.energy_shared
        await open_detail(pilot, app, "pair-a", f"energy {kwh_text(pair.energy_kwh)}", SHARED_WORDS)
        assert "(shared GPU)" in flat(screen_text(app))
