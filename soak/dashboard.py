"""The dashboard soak: thousands of jobs of mixed outcome through the headless dashboard.

A real Engine with real processes on simulated GPUs, driven by the real ``GtuiApp`` under
Textual's Pilot (headless) while a simulated user moves through the table, opens logs and
toggles follow. The process's RSS is sampled throughout; at the end every job's final state,
attempts, exit statuses and logs are checked as in the crash tests.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
from pathlib import Path
from typing import Any

import psutil

from gtui.core.model import FINAL_STATES
from gtui.core.paths import queue_paths
from gtui.core.sched.engine import Engine
from gtui.ui.app import GtuiApp
from tests.reliability.mixed import (
    check_logs,
    check_no_orphans,
    check_runs,
    check_states,
    check_status_files,
    kill_queue_processes,
    make_mixed,
)

MIB = 1024 * 1024
# What a person does while watching: move through the table (the log panel follows the
# selected job), jump, toggle following. Nothing that changes a job's fate.
KEYS = ["down", "down", "down", "up", "pagedown", "down", "home", "end", "f", "f", "pageup"]


def rss_mib() -> float:
    return float(psutil.Process().memory_info().rss) / MIB


async def run_dashboard_soak(
    workdir: Path,
    *,
    jobs: int,
    sleep: tuple[float, float],
    max_parallel: int,
    limit_s: float,
    seed: int = 7,
    progress: bool = True,
) -> dict[str, Any]:
    mixed = make_mixed(
        workdir,
        random.Random(seed),
        jobs,
        sleep=sleep,
        fake_gpus="8x80G",
        poll="1s",
        extra_settings=f"max_parallel = {max_parallel}\n",
    )
    engine = Engine(mixed.queue)
    app = GtuiApp(engine, host="soak")
    samples: list[tuple[float, int, float]] = []  # (seconds, jobs finished, RSS MiB)
    keys = 0
    timed_out = False
    t0 = time.monotonic()
    try:
        async with app.run_test(headless=True, size=(120, 30)) as pilot:
            while not app.main.ready:
                await pilot.pause(0.05)
            gc.collect()
            samples.append((0.0, 0, rss_mib()))
            last_sample = time.monotonic()
            rng = random.Random(seed)
            while True:
                finished = sum(1 for v in engine.jobs() if v.record.state in FINAL_STATES)
                if finished == len(mixed.expect):
                    break
                if time.monotonic() - t0 > limit_s:
                    timed_out = True
                    break
                await pilot.press(rng.choice(KEYS))
                keys += 1
                await pilot.pause(0.25)
                if time.monotonic() - last_sample >= 5:
                    last_sample = time.monotonic()
                    samples.append((last_sample - t0, finished, rss_mib()))
                    if progress:
                        print(
                            f"  dashboard: {finished}/{len(mixed.expect)} jobs finished, "
                            f"RSS {samples[-1][2]:.1f} MiB, {last_sample - t0:.0f}s",
                            flush=True,
                        )
            await pilot.pause(1.0)  # let the last events reach the screen
            gc.collect()
            samples.append((time.monotonic() - t0, len(mixed.expect), rss_mib()))
            shown = len(app.main.table)
    finally:
        await engine.shutdown(kill_jobs=True)
    seconds = time.monotonic() - t0
    problems: list[str] = []
    if timed_out:
        problems.append(f"not finished within {limit_s:.0f}s")
    problems += check_states(mixed) + check_runs(mixed) + check_status_files(mixed)
    problems += check_logs(mixed) + check_no_orphans(mixed.queue)
    if shown != len(mixed.expect):
        problems.append(f"the table shows {shown} rows for {len(mixed.expect)} jobs")
    kill_queue_processes(mixed.queue)
    attempts = sum(e.attempts for e in mixed.expect.values())
    state = queue_paths(mixed.queue).state_dir
    return {
        "jobs": len(mixed.expect),
        "attempts": attempts,
        "by_final_state": _count(e.state for e in mixed.expect.values()),
        "seconds": round(seconds, 1),
        "keys_pressed": keys,
        "rss_mib": _memory(samples),
        "db_mib": round(sum(p.stat().st_size for p in state.glob("*.db*")) / MIB, 2),
        "failures": len(problems),
        "problems": problems[:50],
    }


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def _memory(samples: list[tuple[float, int, float]]) -> dict[str, Any]:
    """Start / warm / end RSS, the peak, and the growth over the second half of the run per
    1,000 jobs finished (a leak shows there; the first minutes fill caches and the table)."""
    start = samples[0][2]
    end = samples[-1][2]
    total = samples[-1][1] or 1
    warm = next((s for s in samples if s[1] >= total * 0.1), samples[0])
    half = [s for s in samples if s[1] >= total / 2] or samples[-1:]
    first, last = half[0], half[-1]
    jobs = max(1, last[1] - first[1])
    return {
        "start": round(start, 1),
        "after_10pct": round(warm[2], 1),
        "end": round(end, 1),
        "peak": round(max(s[2] for s in samples), 1),
        "second_half_growth_per_1000_jobs": round((last[2] - first[2]) * 1000 / jobs, 2),
        "samples": len(samples),
    }


def dashboard_soak(workdir: Path, **kw: Any) -> dict[str, Any]:
    return asyncio.run(run_dashboard_soak(workdir, **kw))
