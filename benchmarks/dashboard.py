"""The dashboard under load, in process: idle CPU, key-to-screen latency, memory of a huge log.

The real app (``GtuiApp``) over a real Engine on 8 fake 80G GPUs with 10,000 jobs, driven by
Textual's ``App.run_test()`` at 120x30. Textual skips painting when headless; the app here
claims not to be headless, so every frame is composed and encoded to terminal escape codes
exactly as for a terminal, and handed to the (headless) driver's ``write``, which records when
and what was written. So the figures include all of gtui's and Textual's work but no terminal
emulator.

* idle CPU: 8 jobs of ours running (``sleep``), 9,992 waiting, poll 2 s, a waiting job
  selected; CPU time of this process (engine + UI, ``time.process_time``) over a window.
* key-to-screen: one CPU job writes 20 MB/s of tqdm-like lines (carriage returns and all) and
  is selected, its log followed; ``down`` / ``up`` alternately move between it and a waiting
  job; latency = from just before the key is sent to the first frame written that shows the
  newly selected job's name (that frame carries the moved cursor and the new log title).
* memory: RSS while following a running job with an empty log, then while following one whose
  log is 1 GiB (written before it is selected); the difference, and the rise of the peak RSS.

    python -m benchmarks.dashboard [--quick]
"""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.common import Row, Section, median, pct, toml_str

N_JOBS = 10_000
GPUS = 8
BIG_LOG = 1 << 30  # 1 GiB
FLOOD_MB_S = 20

FLOOD = (
    "import sys, time\n"
    "line = ' 42%|####      | 164/391 [00:12<00:17, 13.1it/s]\\r' * 3 + 'epoch 3 | loss 0.412\\n'\n"
    "chunk = (line * (1_000_000 // len(line) + 1))[:1_000_000]\n"
    "t = time.time()\n"
    "end = t + 600\n"
    "while t < end:\n"
    "    sys.stdout.write(chunk)\n"
    "    sys.stdout.flush()\n"
    "    t += 1 / {rate}\n"
    "    time.sleep(max(0.0, t - time.time()))\n"
)
BIG = (
    "yes 'epoch 3 | step 391/391 | loss 0.4120 | acc 0.8710 | lr 0.001 | "
    "100%|##########| 391/391 [01:02<00:00, 6.25it/s]' | head -c {size}; sleep 600"
)


def write_queue(path: Path, *, load: bool, big_log: int = BIG_LOG) -> list[str]:
    """The 10,000-job queue; with ``load``, the flood, the 1 GiB log and the quiet job too.
    Returns the names in queue order."""
    parts = [f'[settings]\npoll = "2s"\nfake_gpus = "{GPUS}x80G"\n\n']
    names: list[str] = []

    def job(name: str, cmd: str, extra: str) -> None:
        names.append(name)
        parts.append(f'[[jobs]]\nname = "{name}"\ncmd = {toml_str(cmd)}\n{extra}\n')

    for i in range(GPUS):
        job(f"train{i}", "sleep 600", 'mem = "70G"\n')
    if load:
        job("quiet", "sleep 600", "gpus = 0\n")
        job("biglog", BIG.format(size=big_log), "gpus = 0\n")
        job(
            "flood",
            f"{sys.executable} -u -c {_sh_quote(FLOOD.format(rate=FLOOD_MB_S))}",
            "gpus = 0\n",
        )
    while len(names) < N_JOBS:
        job(f"job{len(names):05d}", "sleep 600", 'mem = "70G"\n')
    path.write_text("".join(parts))
    return names


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _app_class() -> Any:
    from gtui.ui.app import GtuiApp

    class PaintingApp(GtuiApp):
        """Paints every frame although run headless (see the module's docstring)."""

        frames: list[tuple[float, str]]

        @property
        def is_headless(self) -> bool:
            return False

    return PaintingApp


async def _started(app: Any, pilot: Any, n: int) -> float:
    t0 = time.perf_counter()
    deadline = t0 + 180
    while not (app.main.ready and len(app.main.table) >= n):
        if app.engine_error:
            raise RuntimeError(f"the engine did not start: {app.engine_error}")
        if time.perf_counter() > deadline:
            raise RuntimeError("the dashboard did not show the queue within 180 s")
        await pilot.pause(0.05)
    return time.perf_counter() - t0


def _record_frames(app: Any) -> list[tuple[float, str]]:
    frames: list[tuple[float, str]] = []
    driver = app._driver

    def write(data: str) -> None:
        frames.append((time.perf_counter(), data))
        if len(frames) > 2000:
            del frames[:1000]

    driver.write = write
    return frames


async def idle(workdir: Path, seconds: float) -> dict[str, Any]:
    from gtui.core.sched.build import build_engine

    queue = workdir / "idle.toml"
    write_queue(queue, load=False)
    engine = build_engine(queue, control=False)
    app = _app_class()(engine, host="bench")
    out: dict[str, Any] = {}
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            out["first_screen_s"] = await _started(app, pilot, N_JOBS)
            app.main.table.select("job05000")
            await pilot.pause(3.0)  # let the start-up work settle
            frames = _record_frames(app)
            c0, t0 = time.process_time(), time.perf_counter()
            await asyncio.sleep(seconds)
            cpu, wall = time.process_time() - c0, time.perf_counter() - t0
            out["idle_cpu_pct"] = cpu / wall * 100
            out["idle_frames_per_s"] = len(frames) / wall
            out["running"] = engine.counts()["running"]
    finally:
        await engine.shutdown(kill_jobs=True)
    return out


async def loaded(workdir: Path, presses: int, big_log: int) -> dict[str, Any]:
    from gtui.core.sched.build import build_engine

    queue = workdir / "load.toml"
    names = write_queue(queue, load=True, big_log=big_log)
    after_flood = names[names.index("flood") + 1]
    engine = build_engine(queue, control=False)
    app = _app_class()(engine, host="bench")
    proc = psutil.Process()
    out: dict[str, Any] = {}
    try:
        async with app.run_test(size=(120, 30)) as pilot:
            out["first_screen_s"] = await _started(app, pilot, N_JOBS)
            big = None
            deadline = time.perf_counter() + 120
            while big is None or big.stat().st_size < big_log:
                if time.perf_counter() > deadline:
                    raise RuntimeError("the big log was not written within 120 s")
                path = engine.log_path("biglog")
                big = Path(path) if path else None
                await pilot.pause(0.2)

            # Key to screen, following the flood.
            table = app.main.table
            table.select("flood")
            await pilot.pause(1.5)
            frames = _record_frames(app)
            flood_log = engine.log_path("flood")
            size0 = flood_log.stat().st_size if flood_log else 0
            t_flood = time.perf_counter()
            lat: list[float] = []
            for i in range(presses):
                key, target = ("down", after_flood) if i % 2 == 0 else ("up", "flood")
                await pilot.pause(0.1 + (i % 5) * 0.037)  # presses not in step with anything
                start = len(frames)
                t0 = time.perf_counter()
                await pilot.press(key)
                while True:
                    shown = next(
                        (t for t, data in frames[start:] if f"Log · {target}" in data), None
                    )
                    if shown is not None:
                        break
                    if time.perf_counter() - t0 > 5:
                        shown = t0 + 5
                        break
                    await asyncio.sleep(0.001)
                    start = max(0, min(start, len(frames)))
                lat.append((shown - t0) * 1000)
                if table.selected != target:
                    raise RuntimeError(f"{key} did not select {target}")
            size1 = flood_log.stat().st_size if flood_log else 0
            out["key_to_screen_ms_median"] = median(lat)
            out["key_to_screen_ms_p95"] = pct(lat, 0.95)
            out["key_to_screen_ms_max"] = max(lat)
            out["presses"] = presses
            out["flood_mb_s"] = (size1 - size0) / 1e6 / (time.perf_counter() - t_flood)

            # Memory: following an empty log, then the 1 GiB one.
            table.select("quiet")
            await pilot.pause(2.0)
            gc.collect()
            rss_empty = proc.memory_info().rss
            peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            table.select("biglog")
            await pilot.pause(3.0)
            gc.collect()
            rss_big = proc.memory_info().rss
            peak_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            shown_log = app.main.log_view
            if big is None or shown_log.path is None or shown_log.path.resolve() != big.resolve():
                raise RuntimeError(f"the log panel shows {shown_log.path}, not the big log")
            out["log_panel_file_size_gib"] = shown_log.file_size / (1 << 30)
            out["big_log_gib"] = (big.stat().st_size if big else 0) / (1 << 30)
            out["rss_following_empty_mb"] = rss_empty / 1e6
            out["rss_following_big_log_mb"] = rss_big / 1e6
            out["rss_delta_mb"] = (rss_big - rss_empty) / 1e6
            out["peak_rss_rise_mb"] = max(0, peak_after - peak_before) / 1e6
    finally:
        await engine.shutdown(kill_jobs=True)
    return out


def measure(quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.environ.setdefault("TEXTUAL_ANIMATIONS", "none")
        result = {
            f"idle_{k}" if not k.startswith("idle") else k: v
            for k, v in asyncio.run(idle(work, 3.0 if quick else 20.0)).items()
        }
        big = BIG_LOG // 16 if quick else BIG_LOG  # quick (CI): 64 MiB, less disk and time
        result.update(asyncio.run(loaded(work, 20 if quick else 60, big)))
    return result


def run(quick: bool) -> Section:
    r = measure(quick)
    section = Section(
        title="The dashboard",
        method=(
            "In process: the real app (`GtuiApp`) over a real Engine on 8 fake 80G GPUs with "
            "10,000 jobs, through `App.run_test()` at 120x30, with painting forced on (Textual "
            "skips it when headless): every frame is composed and encoded to escape codes, "
            "then dropped by the driver, which records when it was written. Idle: 8 jobs of "
            "ours running, 9,992 waiting, poll 2 s, a waiting job selected; CPU time of the "
            f"process (engine and UI) over {'3' if quick else '20'} s after 3 s to settle. "
            f"Key to screen: a job writes {FLOOD_MB_S} MB/s of tqdm-like output and is "
            "selected and followed; `down` / `up` alternately select a waiting job and it "
            "again; latency = from sending the key to the first frame written whose log "
            f"title names the newly selected job ({'20' if quick else '60'} presses). "
            "Memory: RSS following a running job with an empty log vs. one whose log is "
            f"{'64 MiB (quick mode)' if quick else '1 GiB'} (written before it is selected), "
            "and how much the process's peak RSS "
            "rose when it was selected. Not included: a terminal emulator's own work, SSH."
        ),
    )
    section.rows = [
        Row(
            "dashboard idle, 8 GPUs, 10,000 jobs, poll 2 s",
            "<= 3 % of one core",
            f"{r['idle_cpu_pct']:.1f} %",
            f"{r['idle_frames_per_s']:.1f} frames/s written",
            r["idle_cpu_pct"] <= 3,
        ),
        Row(
            f"key-to-screen, 10,000 jobs, one job writing {FLOOD_MB_S} MB/s of log, p95",
            "<= 100 ms",
            f"{r['key_to_screen_ms_p95']:.0f} ms (median {r['key_to_screen_ms_median']:.0f})",
            f"the log grew {r['flood_mb_s']:.1f} MB/s meanwhile",
            r["key_to_screen_ms_p95"] <= 100,
        ),
        Row(
            f"dashboard memory following a {r['big_log_gib']:.2g} GiB log vs an empty one",
            "<= 50 MB more",
            f"{r['rss_delta_mb']:+.1f} MB",
            f"RSS {r['rss_following_empty_mb']:.0f} MB following the empty log; peak rose "
            f"{r['peak_rss_rise_mb']:.1f} MB",
            r["rss_delta_mb"] <= 50 and r["peak_rss_rise_mb"] <= 50,
        ),
    ]
    section.figures = {k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()}
    return section


if __name__ == "__main__":
    for key, value in measure(quick="--quick" in sys.argv).items():
        print(f"{key:>28}: {value:.2f}" if isinstance(value, float) else f"{key:>28}: {value}")
