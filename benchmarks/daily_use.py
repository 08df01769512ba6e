"""The daily-use figures: key to screen for typing a filter, and for opening a job's detail view,
with 10,000 jobs in the queue (in process: Textual headless, a real Engine on fake GPUs).

* filter: ``/`` opens the filter line, then each typed character re-filters the 10,000 rows;
  timed from the key to the first frame composed (and encoded for a terminal) after the table
  was re-filtered;
* detail view: ``enter`` on a job, timed from the key to the first frame after the detail
  screen is on top with its details filled in; ``esc`` back, and again.

    python -m benchmarks.daily_use [--quick]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

N_JOBS = 10_000


def write_queue(path: Path, n_jobs: int) -> None:
    parts = ['[settings]\npoll = "1s"\nmax_parallel = 3\nfake_gpus = "2x80G"\n\n']
    for i in range(n_jobs):
        parts.append(f'[[jobs]]\nname = "job{i:05d}"\ncmd = "sleep 600"\nmem = "70G"\n\n')
    path.write_text("".join(parts))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def in_process(queue: Path, presses: int) -> dict[str, Any]:
    from gtui.core.sched.build import build_engine
    from gtui.ui.app import GtuiApp
    from gtui.ui.screens.detail import DetailScreen

    out: dict[str, Any] = {}
    engine = build_engine(queue, control=False)
    app = GtuiApp(engine, host="bench")
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            while not (app.main.ready and len(app.main.table) >= N_JOBS):
                if app.return_code is not None:
                    raise RuntimeError("gtui stopped at start (bad benchmark queue?)")
                await pilot.pause(0.01)
            await pilot.pause(1.0)
            table = app.main.table
            frames: list[float] = []
            display = app._display

            def timed_display(screen: Any, renderable: Any) -> None:
                # Headless Textual composes frames but writes nothing: encode each frame as a
                # terminal would get it (as App._display does), so that cost counts too.
                display(screen, renderable)
                if renderable is not None and hasattr(renderable, "render_segments"):
                    renderable.render_segments(app.console)
                    frames.append(time.perf_counter())

            app._display = timed_display

            async def key_to_frame(key: str, happened: Callable[[], float | None]) -> float:
                """ms from ``key`` to the first frame after ``happened`` returned a time."""
                t = time.perf_counter()
                app.simulate_key(key)
                while time.perf_counter() - t < 10:
                    await asyncio.sleep(0.001)
                    at = happened()
                    if at is not None and at >= t:
                        after = [f for f in frames if f >= at]
                        if after:
                            return (after[0] - t) * 1000
                raise RuntimeError(
                    f"{key}: nothing on screen within 10 s "
                    f"(screen {app.screen!r}, focused {app.focused!r})"
                )

            # -- typing a filter ------------------------------------------------------------
            reorders: list[float] = []
            reorder = table._reorder

            def timed_reorder() -> None:
                reorder()
                reorders.append(time.perf_counter())

            table._reorder = timed_reorder  # type: ignore[method-assign]
            app.simulate_key("slash")
            while not app.main.query_one("#filter-bar").has_focus:
                await pilot.pause(0.01)
            typed: list[float] = []
            text = "job0123"
            for i in range(presses):
                key = text[i % len(text)] if (i // len(text)) % 2 == 0 else "backspace"
                typed.append(await key_to_frame(key, lambda: reorders[-1] if reorders else None))
                await asyncio.sleep(0.02)
            table._reorder = reorder  # type: ignore[method-assign]
            app.simulate_key("escape")
            while len(table.visible_names) < N_JOBS or not table.has_focus:
                await pilot.pause(0.01)
            out["filter_key_to_frame_ms_median"] = statistics.median(typed)
            out["filter_key_to_frame_ms_p95"] = pct(typed, 0.95)

            # -- opening the detail view ----------------------------------------------------
            table.select("job05000")
            opened: list[float] = []

            def detail_shown() -> float | None:
                screen = app.screen
                if isinstance(screen, DetailScreen) and screen.is_mounted:
                    if not shown_at:
                        shown_at.append(time.perf_counter())
                    return shown_at[0]
                return None

            for _ in range(max(5, presses // 4)):
                shown_at: list[float] = []
                opened.append(await key_to_frame("enter", detail_shown))
                app.simulate_key("escape")
                while isinstance(app.screen, DetailScreen):
                    await pilot.pause(0.01)
                await asyncio.sleep(0.05)
            app._display = display
            out["detail_key_to_frame_ms_median"] = statistics.median(opened)
            out["detail_key_to_frame_ms_p95"] = pct(opened, 0.95)
    finally:
        await engine.shutdown(kill_jobs=True)
    return out


def measure(quick: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        queue = Path(tmp) / "bench.toml"
        write_queue(queue, N_JOBS)
        result: dict[str, Any] = {"jobs": N_JOBS}
        result.update(asyncio.run(in_process(queue, 14 if quick else 42)))
    return result


def run(quick: bool) -> Any:
    """The suite's entry (``python -m benchmarks``)."""
    from benchmarks.common import Row, Section

    r = measure(quick)
    section = Section(
        title="Daily use: typing a filter, opening a job's details (10,000 jobs)",
        method=(
            "In process (Textual headless at 120x30, a real Engine on 2 fake GPUs, 10,000 jobs, "
            "3 running). Filter: after `/`, each typed character (and backspace) re-filters "
            "every row; from the key to the first frame composed and encoded after the table "
            "was re-filtered. Details: `enter` on a job, from the key to the first frame after "
            "the detail screen is mounted; `esc` back between tries."
        ),
    )
    section.rows.append(
        Row(
            "filter typing, key to frame, 10,000 jobs, p95",
            "<= 100 ms",
            f"{r['filter_key_to_frame_ms_p95']:.0f} ms "
            f"(median {r['filter_key_to_frame_ms_median']:.0f})",
            "",
            r["filter_key_to_frame_ms_p95"] <= 100,
        )
    )
    section.rows.append(
        Row(
            "open the detail view, key to frame, 10,000 jobs, p95",
            "<= 100 ms",
            f"{r['detail_key_to_frame_ms_p95']:.0f} ms "
            f"(median {r['detail_key_to_frame_ms_median']:.0f})",
            "",
            r["detail_key_to_frame_ms_p95"] <= 100,
        )
    )
    section.figures = {k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()}
    return section


if __name__ == "__main__":
    figures = measure(quick="--quick" in sys.argv)
    for k, v in figures.items():
        print(f"{k}: {v:.1f}" if isinstance(v, float) else f"{k}: {v}")
