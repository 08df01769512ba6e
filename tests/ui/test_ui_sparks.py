"""Per-GPU sparklines of memory and utilization: the pure parts, and the dashboard
on fake GPUs whose spec file changes between polls (other users come and go)."""

from __future__ import annotations

from pathlib import Path

from gtui.ui.widgets.gpu_sparks import MIN_ROWS, GpuSparks, bucket, sparkline
from tests.conftest import REPO, write_queue
from tests.dashboard_helpers import dashboard, read_help_through, screen_text
from tests.waiting import pilot_until as until


def test_sparkline_blocks_and_blanks() -> None:
    assert sparkline([0.0, 0.5, 1.0, None]) == "▁▄█ "
    assert sparkline([0.13, 0.26]) == "▂▃"


def test_history_of_readings_fills_from_the_right() -> None:
    """Readings of the real fake-GPU layer, a minute apart: oldest left, newest right."""
    from gtui.core.api import GpusRead
    from gtui.core.gpus.fake import FakeBackend
    from gtui.ui.widgets.gpu_sparks import GpuHistory

    hist = GpuHistory()
    for i, spec in enumerate(["80G:8G@10", "80G:40G@50", "80G:80G@100"]):
        hist.add(GpusRead(FakeBackend(spec).read(())), 1000.0 + 60 * i)
    line = sparkline(bucket(hist.mem[0], 1120.0, 10, window=300))
    assert line == "      ▁ ▄█"  # 2 min ago low, 1 min ago half, now full


def test_bucket_keeps_each_slices_highest_and_drops_old_readings() -> None:
    now = 1000.0
    samples = [(now - 400, 1.0), (now - 290, 0.2), (now - 280, 0.9), (now - 5, 0.5)]
    cells = bucket(samples, now, 10, window=300)
    assert cells[0] == 0.9  # 0.2 and 0.9 share the first slice: the spike stays
    assert cells[-1] == 0.5
    # The slice under way shows the latest reading: a GPU just freed reads free at once.
    assert bucket([(now - 20, 0.9), (now - 1, 0.1)], now, 10, window=300)[-1] == 0.1
    assert cells[1:-1] == [None] * 8  # no reading there yet
    assert 1.0 not in cells  # older than the window


async def test_dashboard_shows_memory_and_utilization_history(tmp_path: Path) -> None:
    spec = tmp_path / "gpus.spec"
    spec.write_text("80G:8G@10,80G\n")
    q = write_queue(tmp_path, '[settings]\npoll = "0.1s"\n\n[[jobs]]\ncmd = "true"\ngpus = 0\n')
    async with dashboard(q, size=(120, MIN_ROWS), fake=f"@{spec}") as (app, pilot, _engine):
        sparks = app.main.query_one(GpuSparks)
        assert sparks.display

        def gpu0() -> tuple[str, str]:
            rows = [t.plain for t in sparks.lines(100) if t.plain.strip().startswith("0 mem")]
            mem, _, util = (rows[0] if rows else "").partition("util")
            return mem, util

        await until(pilot, lambda: "▁" in gpu0()[0] and "▁" in gpu0()[1], what="a low reading")
        assert "█" not in "".join(gpu0())
        spec.write_text("80G:76G@100,80G\n")  # another user fills GPU 0
        # The slice under way shows the latest reading: it turns full.
        await until(pilot, lambda: "█" in gpu0()[0] and "█" in gpu0()[1], what="GPU 0 full")
        text = screen_text(app)
        assert "last 5 min" in text and " 0 mem " in text and " 1 mem " in text


async def test_sparklines_stay_out_of_a_small_terminal(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[settings]\npoll = "0.1s"\n\n[[jobs]]\ncmd = "true"\ngpus = 0\n')
    async with dashboard(q, size=(80, 24), fake="1x80G") as (app, _pilot, _engine):
        assert not app.main.query_one(GpuSparks).display


async def test_s_shows_the_sparklines_on_a_small_terminal_and_hides_them_again(
    tmp_path: Path,
) -> None:
    """On the common 80x24 terminal the sparklines are one key away."""
    q = write_queue(tmp_path, '[settings]\npoll = "0.1s"\n\n[[jobs]]\ncmd = "true"\ngpus = 0\n')
    async with dashboard(q, size=(80, 24), fake="80G:40G@50,80G") as (app, pilot, _engine):
        sparks = app.main.query_one(GpuSparks)
        assert not sparks.display and " 0 mem " not in screen_text(app)
        await pilot.press("s")

        def shown() -> bool:
            text = screen_text(app)
            return all(w in text for w in (" 0 mem ", " 1 mem ", "util", "last 5 min"))

        await until(pilot, shown, what="both GPUs' sparklines on screen")
        (line,) = [ln for ln in screen_text(app).splitlines() if " 0 mem " in ln]
        assert "▄" in line and "50%" in line  # half its memory, half busy
        await pilot.press("s")
        await until(pilot, lambda: " 0 mem " not in screen_text(app), what="hidden again")


async def test_s_hides_them_on_a_tall_terminal_too(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[settings]\npoll = "0.1s"\n\n[[jobs]]\ncmd = "true"\ngpus = 0\n')
    async with dashboard(q, size=(120, MIN_ROWS), fake="1x80G") as (app, pilot, _engine):
        await until(pilot, lambda: " 0 mem " in screen_text(app), what="shown by themselves")
        await pilot.press("s")
        await until(pilot, lambda: " 0 mem " not in screen_text(app), what="hidden")
        await pilot.resize_terminal(120, MIN_ROWS + 5)  # a choice made stays made
        await pilot.pause(0.2)
        assert not app.main.query_one(GpuSparks).display


async def test_the_panel_keys_are_in_the_help_the_palette_and_the_readme(tmp_path: Path) -> None:
    from gtui.ui.keys import PANEL_KEYS

    assert {k.shown for k in PANEL_KEYS} == {"h", "s"}
    # The keys table lives in the dashboard's reference page (the README links to it).
    keys_doc = (REPO / "docs" / "dashboard.md").read_text()
    section = keys_doc.split("\n## Keys\n", 1)[1]
    (keys_table,) = [b for b in section.split("\n\n") if b.startswith("| key |")][:1]
    for k in PANEL_KEYS:
        assert f"| `{k.shown}` | {k.help} |" in keys_table
    q = write_queue(tmp_path, '[settings]\npoll = "0.1s"\n\n[[jobs]]\ncmd = "true"\ngpus = 0\n')
    async with dashboard(q, size=(120, 40), fake="1x80G") as (app, pilot, _engine):
        titles = {c.title for c in app.get_system_commands(app.main)}
        assert {k.palette for k in PANEL_KEYS} <= titles
        text = await read_help_through(pilot, app)  # page by page, as a user at 120x40
        for k in PANEL_KEYS:
            assert f"{k.shown} {k.help[:40]}" in text
