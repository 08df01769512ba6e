"""The dashboard under load: 10,000 jobs in the queue and one job writing its log flat out.

Two measurements, printed as figures (no pass/fail):

* in process (Textual headless, a real Engine on fake GPUs): time to first screen with 10,000
  jobs; key to frame (cursor down, from the key event to the first terminal write after the
  cursor moved) with the log flood selected; a burst of 10,000 JobChanged events folded into a
  few screen updates (how many, and how long until the screen showed them);
* in a real terminal (tmux, the real `gtui --no-tmux` process): key-to-screen latency, measured
  from `tmux send-keys` until `tmux capture-pane` shows the cursor moved, and the CPU the gtui
  process uses while idle and while following the flooding log.

    python -m benchmarks.ui_latency [--quick]
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FLOOD = (
    "import sys, time\n"
    "end = time.time() + {secs}\n"
    "n = 0\n"
    "w = sys.stdout.write\n"
    "while time.time() < end and n < {cap}:\n"
    "    for i in range(1000):\n"
    "        w(f' {{i%100:3d}}%|#####     | {{n}}/391 [00:01<00:02]\\r'\n"
    "          f' epoch {{n}} | loss 0.4\\n')\n"
    "    n += 1000\n"
)


def write_queue(path: Path, n_jobs: int, flood_secs: int) -> None:
    cap = 25_000_000  # lines (~1.8 GB) at most, whatever the machine's speed
    script = path.parent / "flood.py"
    script.write_text(FLOOD.format(secs=flood_secs, cap=cap))
    parts = [
        '[settings]\npoll = "1s"\nmax_parallel = 3\nfake_gpus = "2x80G"\n\n',
        f'[[jobs]]\nname = "flood"\ngpus = 0\ncmd = "{sys.executable} -u {script}"\n\n',
    ]
    for i in range(n_jobs - 1):
        parts.append(f'[[jobs]]\nname = "job{i:05d}"\ncmd = "sleep 600"\nmem = "70G"\n\n')
    path.write_text("".join(parts))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- in process ---------------------------------------------------------------------------------


async def in_process(queue: Path, presses: int) -> dict[str, Any]:
    from gtui.core.api import JobChanged
    from gtui.core.sched.build import build_engine
    from gtui.ui.app import GtuiApp
    from gtui.ui.widgets.log_view import LogView

    out: dict[str, Any] = {}
    engine = build_engine(queue, control=False)
    app = GtuiApp(engine, host="bench")
    t0 = time.perf_counter()
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            while not (app.main.ready and len(app.main.table) >= 10_000 - 1):
                if app.return_code is not None:
                    raise RuntimeError("gtui stopped at start (bad benchmark queue?)")
                await pilot.pause(0.01)
            out["first_screen_10k_jobs_s"] = time.perf_counter() - t0
            while (
                app.main.table.view("flood") is None
                or not app.main.table.view("flood").record.active
            ):
                await pilot.pause(0.05)
            table = app.main.table
            table.select("flood")
            log = app.main.query_one(LogView)
            await pilot.pause(1.0)
            # Key to frame: from the key to the first frame after the cursor moved. Headless
            # Textual composes frames but writes nothing; the hook turns each frame into the
            # bytes a terminal would get (as App._display does), so that cost is counted too.
            frames: list[float] = []
            moves: list[float] = []
            display = app._display
            move = table._move_to

            def timed_display(screen: Any, renderable: Any) -> None:
                display(screen, renderable)
                if renderable is not None and hasattr(renderable, "render_segments"):
                    renderable.render_segments(app.console)
                    frames.append(time.perf_counter())

            def timed_move(index: int) -> None:
                move(index)
                moves.append(time.perf_counter())

            app._display = timed_display
            table._move_to = timed_move
            sizes = log.file_size
            lat = []
            for i in range(presses):
                t = time.perf_counter()
                app.simulate_key("down" if i % 2 == 0 else "up")
                while time.perf_counter() - t < 10:
                    await asyncio.sleep(0.001)
                    if moves and moves[-1] >= t:
                        after = [w for w in frames if w >= moves[-1]]
                        if after:
                            lat.append((after[0] - t) * 1000)
                            break
                await asyncio.sleep(0.05)
            app._display = display
            table._move_to = move
            out["key_to_frame_ms_median"] = statistics.median(lat)
            out["key_to_frame_ms_p95"] = pct(lat, 0.95)
            out["log_grew_mb_during_presses"] = (log.file_size - sizes) / 1e6
            # A burst: every job changes at once (what a reload of a 10k queue publishes).
            views = engine.jobs()
            before = app.flushes
            t = time.perf_counter()
            for v in views:
                app._sink(JobChanged(v))
            while app.flushes == before:
                await pilot.pause(0.005)
            out["burst_10k_events_to_screen_ms"] = (time.perf_counter() - t) * 1000
            await pilot.pause(0.5)
            out["burst_screen_updates"] = app.flushes - before
    finally:
        await engine.shutdown(kill_jobs=True)
    return out


# -- in a real terminal -------------------------------------------------------------------------


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True).stdout


def cursor_row(session: str) -> int:
    for i, line in enumerate(tmux("capture-pane", "-p", "-t", session).splitlines()):
        if "› " in line:
            return i
    return -1


def gtui_pid(pane_pid: int) -> int:
    import psutil

    for p in [psutil.Process(pane_pid), *psutil.Process(pane_pid).children(recursive=True)]:
        if "gtui" in " ".join(p.cmdline()) and "--no-tmux" in p.cmdline():
            return p.pid
    raise RuntimeError("gtui not found in the tmux pane")


def cpu_percent(pid: int, secs: float) -> float:
    import psutil

    p = psutil.Process(pid)
    a = p.cpu_times()
    time.sleep(secs)
    b = p.cpu_times()
    return ((b.user - a.user) + (b.system - a.system)) / secs * 100


def in_tmux(queue: Path, presses: int, sample_s: float) -> dict[str, Any]:
    if shutil.which("tmux") is None:
        return {"tmux": "not installed: skipped"}
    out: dict[str, Any] = {}
    sock = Path(tempfile.mkdtemp(prefix="gtbench", dir="/tmp"))
    env = dict(os.environ, TMUX_TMPDIR=str(sock))
    env.pop("TMUX", None)
    os.environ["TMUX_TMPDIR"] = str(sock)
    session = "bench"
    cmd = f"{sys.executable} -m gtui --no-tmux {queue}"
    try:
        subprocess.run(
            ["tmux", "new-session", "-d", "-x", "200", "-y", "50", "-s", session, cmd],
            env=env,
            check=True,
        )
        pane = int(tmux("list-panes", "-t", session, "-F", "#{pane_pid}").split()[0])
        deadline = time.monotonic() + 120
        while "job09998" not in tmux("capture-pane", "-p", "-t", session) and "flood" not in (
            tmux("capture-pane", "-p", "-t", session)
        ):
            if time.monotonic() > deadline:
                raise RuntimeError("gtui did not show the queue")
            time.sleep(0.2)
        time.sleep(2)
        pid = gtui_pid(pane)
        # Idle: the cursor on a waiting job (no log to follow), 10k jobs on screen.
        tmux("send-keys", "-t", session, "G")
        time.sleep(1)
        out["cpu_idle_10k_jobs_pct"] = cpu_percent(pid, sample_s)
        # The flood's log selected and followed.
        tmux("send-keys", "-t", session, "g")
        time.sleep(1)
        out["cpu_following_flood_pct"] = cpu_percent(pid, sample_s)
        lat = []
        for i in range(presses):
            before = cursor_row(session)
            t = time.perf_counter()
            tmux("send-keys", "-t", session, "Down" if i % 2 == 0 else "Up")
            while cursor_row(session) == before:
                if time.perf_counter() - t > 5:
                    break
            lat.append((time.perf_counter() - t) * 1000)
        out["key_to_screen_ms_median"] = statistics.median(lat)
        out["key_to_screen_ms_p95"] = pct(lat, 0.95)
        import psutil

        out["gtui_rss_mb"] = psutil.Process(pid).memory_info().rss / 1e6
    finally:
        tmux("kill-server")
        shutil.rmtree(sock, ignore_errors=True)
    return out


def measure(quick: bool = False) -> dict[str, Any]:
    presses = 20 if quick else 60
    sample = 2.0 if quick else 5.0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        queue = work / "bench.toml"
        write_queue(queue, 10_000, flood_secs=30 if quick else 45)
        result: dict[str, Any] = {"jobs": 10_000}
        result.update(asyncio.run(in_process(queue, presses)))
        # a fresh state for the terminal run: the flood starts again
        shutil.rmtree(work / ".gtui", ignore_errors=True)
        shutil.rmtree(work / "logs", ignore_errors=True)
        result.update(in_tmux(queue, presses, sample))
        result["flood_log_mb_at_end"] = (
            sum(f.stat().st_size for f in (work / "logs").glob("flood.*.log")) / 1e6
            if (work / "logs").exists()
            else 0.0
        )
        for p in (work / "logs").glob("*.log") if (work / "logs").exists() else []:
            p.unlink()
    return result


def run(quick: bool) -> Any:
    """The suite's entry (``python -m benchmarks``): the real-terminal figures as a Section."""
    from benchmarks.common import Row, Section

    r = measure(quick)
    section = Section(
        title="The dashboard in a real terminal (tmux)",
        method=(
            "The real `gtui --no-tmux` process in a tmux pane at 200x50 on 2 fake GPUs, 10,000 "
            "jobs (3 running, one of them writing its log as fast as it can, tqdm-like lines "
            "with carriage returns). Key to screen: from `tmux send-keys Down` to the first "
            "`tmux capture-pane` that shows the cursor moved (polled back to back, so it "
            "includes tmux's own work). CPU: the gtui process's user+system time over a "
            "window, with a waiting job selected (idle) and with the flooding job followed. "
            "In process (headless): key to frame, from the key to the first frame composed "
            "after the cursor moved, encoded to escape codes."
        ),
    )
    if "key_to_screen_ms_p95" in r:
        section.rows.append(
            Row(
                "key-to-screen in tmux, 10,000 jobs, a log flooding, p95",
                "<= 100 ms",
                f"{r['key_to_screen_ms_p95']:.0f} ms (median {r['key_to_screen_ms_median']:.0f})",
                f"in process, key to frame: p95 {r['key_to_frame_ms_p95']:.0f} ms",
                r["key_to_screen_ms_p95"] <= 100,
            )
        )
        section.rows.append(
            Row(
                "gtui CPU in tmux, 10,000 jobs: idle / following the flooding log",
                "-",
                f"{r['cpu_idle_10k_jobs_pct']:.1f} % / {r['cpu_following_flood_pct']:.1f} %",
                f"RSS {r['gtui_rss_mb']:.0f} MB",
            )
        )
    section.figures = {k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()}
    return section


if __name__ == "__main__":
    for key, value in measure(quick="--quick" in sys.argv).items():
        print(f"{key:>32}: {value:.2f}" if isinstance(value, float) else f"{key:>32}: {value}")
