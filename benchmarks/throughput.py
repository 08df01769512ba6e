"""Throughput: many trivial CPU jobs with ``max_parallel = 8``, against plain asyncio.

gtui runs N jobs of `true` (``gpus = 0``) with ``max_parallel = 8`` headless (``gtui run``'s
engine, in process); the figure is N / the wall time of ``Engine.run`` from call to return, so
loading the queue, every commit, every placement pass and every launch count. The baseline runs
the same N commands through ``asyncio.create_subprocess_exec('bash', '-c', 'true')`` with a
semaphore of 8.

    python -m benchmarks.throughput [N]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Row, Section, median, spread
from gtui.core.sched.build import build_engine

PARALLEL = 8


async def run_gtui(n: int, workdir: Path) -> float:
    jobs = "".join(f'[[jobs]]\nname = "t{i}"\ngpus = 0\ncmd = "true"\n\n' for i in range(n))
    queue = workdir / "tp.toml"
    queue.write_text(
        f'[settings]\npoll = "10s"\nfake_gpus = "1x80G"\nmax_parallel = {PARALLEL}\n\n{jobs}'
    )
    engine = build_engine(queue, control=False)
    t0 = time.perf_counter()
    code = await engine.run(exit_when_idle=True)
    wall = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError(f"throughput queue failed: {engine.counts()}")
    return wall


async def run_baseline(n: int) -> float:
    sem = asyncio.Semaphore(PARALLEL)

    async def one() -> None:
        async with sem:
            proc = await asyncio.create_subprocess_exec(
                "bash", "-c", "true", stdin=asyncio.subprocess.DEVNULL
            )
            await proc.wait()

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return time.perf_counter() - t0


def measure(n: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        ours = asyncio.run(run_gtui(n, Path(tmp)))
    base = asyncio.run(run_baseline(n))
    return {
        "jobs": n,
        "gtui_jobs_per_s": n / ours,
        "baseline_jobs_per_s": n / base,
        "ratio": base / ours,
        "gtui_s": ours,
    }


def run(quick: bool) -> Section:
    n, repeats = (200, 1) if quick else (2000, 3)
    results = [measure(n) for _ in range(repeats)]
    ours = [r["gtui_jobs_per_s"] for r in results]
    base = [r["baseline_jobs_per_s"] for r in results]
    ratio = [r["ratio"] for r in results]
    section = Section(
        title="Throughput of trivial CPU jobs",
        method=(
            f"{n} jobs of `true` with `gpus = 0` and `max_parallel = {PARALLEL}`, run by the "
            "engine headless in process; jobs/s = jobs / the wall time of `Engine.run` (queue "
            "load, commits, passes, launches, waits: everything). Baseline: the same commands "
            f"through `asyncio.create_subprocess_exec` with a semaphore of {PARALLEL}, right "
            f"after. {repeats} repeats, median (min-max)."
            + (f" Quick mode runs {n} jobs, not 2,000." if quick else "")
        ),
    )
    section.rows = [
        Row(
            f"throughput, {n} trivial CPU jobs, max_parallel = {PARALLEL}",
            ">= 100 jobs/s",
            f"{median(ours):.0f} jobs/s",
            f"plain asyncio {median(base):.0f} jobs/s (gtui {median(ratio):.2f}x its time)",
            median(ours) >= 100,
        )
    ]
    section.figures = {
        "jobs": n,
        "repeats": repeats,
        "gtui jobs/s": spread(ours),
        "baseline jobs/s": spread(base),
        "gtui time / baseline time": spread(ratio),
    }
    return section


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for key, value in measure(count).items():
        print(f"{key:>20}: {value:.2f}" if isinstance(value, float) else f"{key:>20}: {value}")
