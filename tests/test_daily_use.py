"""Issue 17: the dashboard for a whole day's work. Names that stay distinguishable, waiting
reasons that lead with their key part, a filter that does not trap, honest screens, bulk
actions. Pilot over a real Engine, real processes and files; only the GPUs are fake.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gtui.core.model import JobState
from gtui.ui.format import cut_middle, reason_key
from tests.conftest import write_queue
from tests.test_ui_app import dashboard, state, until

# -- names cut in the middle (17.5) ---------------------------------------------------------------

SWEEP = [f"train-vit-base-patch16-224-lr{lr}-seed{s}" for lr in ("0.1", "0.01") for s in (1, 3)]


def test_long_names_are_cut_in_the_middle_and_sweep_members_stay_distinct() -> None:
    cut = [cut_middle(n, 24) for n in SWEEP]
    assert all(len(c) == 24 for c in cut), cut
    assert len(set(cut)) == len(SWEEP), cut  # every member differs on screen
    assert cut_middle("train-vit-base-patch16-224-lr0.01-seed3", 24) == "train-vit-…-lr0.01-seed3"
    for c, n in zip(cut, SWEEP, strict=True):
        assert "…" in c and n.startswith(c.split("…")[0]) and n.endswith(c.split("…")[1])
    assert cut_middle("short", 24) == "short"
    assert cut_middle("abcdefghij", 5) == "ab…ij"


def test_the_waiting_reason_leads_with_its_key_part() -> None:
    full = "needs 1 GPU with 40G: none eligible (GPU0 31G < 40G, GPU1 12G < 40G, GPU2 ours)"
    assert reason_key(full) == "needs 40G, best GPU has 31G free"
    two = "needs 2 GPUs with 35G: 1 eligible (GPU1 ours, GPU2 10G < 35G, reserve 1 keeps 1)"
    assert reason_key(two) == "needs 2x35G, 1 eligible"
    assert reason_key("after prep (running)") == "after prep (running)"


QUEUE = """
[settings]
poll = "0.2s"
kill_grace = "1s"

[[jobs]]
name = "train-vit-base-patch16-224-lr{lr}-seed{seed}"
matrix = { lr = ["0.1", "0.01"], seed = [1, 3] }
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"

[[jobs]]
name = "big"
gpus = 1
mem = "70G"
cmd = "true"
"""


@pytest.fixture
def queue(tmp_path: Path) -> Path:
    return write_queue(tmp_path, QUEUE)


def rows(app: object) -> list[str]:
    """The queue table's lines as painted."""
    table = app.main.table  # type: ignore[attr-defined]
    return [
        "".join(seg.text for seg in table.render_line(y)) for y in range(1, table.size.height)
    ]


async def test_at_80_columns_sweep_members_differ_on_screen(queue: Path) -> None:
    try:
        async with dashboard(queue, size=(80, 24), fake="1x80G:40G") as (app, pilot, engine):
            names = [v.spec.name for v in engine.jobs()][:4]
            await until(pilot, lambda: all(state(engine, n) == JobState.RUNNING for n in names))
            await until(pilot, lambda: "big" in "".join(rows(app)), what="rows painted")
            shown = [r for r in rows(app) if " train" in r]
            assert len(shown) == 4
            cells = [next(w for w in r.split() if w.startswith("train")) for r in shown]
            assert len(set(cells)) == 4, shown
            assert all("…" in c for c in cells), shown  # cut in the middle
            assert sum(c.endswith("-seed3") for c in cells) == 2, shown  # the end is kept
            # At 80 columns the note has 20 cells: the key part is what fits.
            key = "needs 70G, best G"
            await until(pilot, lambda: key in "".join(rows(app)), what="big's reason, key first")
            assert "needs 1 GPU with 70G" in engine.view("big").record.reason  # the full one
    finally:
        (queue.parent / "release").touch()

