"""The bash script's extreme-mode case 1, scaled: 100 jobs x 10G x 1 s on 4 x 80G, pack vs
exclusive.

The case, as quick_start_serial.sh's documentation gives it: 100 evaluations of 10 GB and 5
minutes each on 4 x A800 80GB; it says its EXTREME_MODE runs 7 per GPU, 28 at once, about 7x
faster than one per GPU. Here each
job is ``sleep 1`` (real processes, fake GPUs): 8 x 10G fit an 80G GPU, 32 run at once, so the
ideal makespan is ceil(100 / 32) x 1 s = 4 s. Makespan = the last job's end - the first job's
start, from the jobs' own ``date +%s%N`` stamps. Exclusive mode (one job per idle GPU) runs the
same queue for comparison: ideal 25 x 1 s.

    python -m benchmarks.extreme [--quick]
"""

from __future__ import annotations

import asyncio
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Row, Section, read_stamps, stamp_cmd, toml_str
from gtui.core.sched.build import build_engine

JOBS, MEM_G, GPUS, GPU_G = 100, 10, 4, 80


async def run_mode(mode: str, duration: float, workdir: Path) -> dict[str, float]:
    stamps = workdir / f"{mode}.stamps"
    cmd = toml_str(stamp_cmd(stamps, f"sleep {duration}"))
    jobs = "".join(
        f'[[jobs]]\nname = "eval{i:03d}"\nmem = "{MEM_G}G"\ncmd = {cmd}\n\n' for i in range(JOBS)
    )
    queue = workdir / f"{mode}.toml"
    queue.write_text(
        f'[settings]\nmode = "{mode}"\npoll = "2s"\nfake_gpus = "{GPUS}x{GPU_G}G"\n'
        f'log_dir = "logs-{mode}"\n\n{jobs}'
    )
    engine = build_engine(queue, control=False)
    t0 = time.perf_counter()
    code = await engine.run(exit_when_idle=True)
    wall = time.perf_counter() - t0
    if code != 0:
        raise RuntimeError(f"{mode} queue failed: {engine.counts()}")
    starts, ends = read_stamps(stamps)
    return {"makespan_s": (max(ends) - min(starts)) / 1e9, "engine_wall_s": wall}


def measure(duration: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        pack = asyncio.run(run_mode("pack", duration, Path(tmp)))
        exclusive = asyncio.run(run_mode("exclusive", duration, Path(tmp)))
    per_gpu = GPU_G // MEM_G
    ideal = math.ceil(JOBS / (per_gpu * GPUS)) * duration
    return {
        "duration_s": duration,
        "ideal_pack_s": ideal,
        "ideal_exclusive_s": math.ceil(JOBS / GPUS) * duration,
        "pack_makespan_s": pack["makespan_s"],
        "pack_engine_wall_s": pack["engine_wall_s"],
        "exclusive_makespan_s": exclusive["makespan_s"],
        "exclusive_engine_wall_s": exclusive["engine_wall_s"],
        "pack_over_ideal": pack["makespan_s"] / ideal,
        "speedup_over_exclusive": exclusive["makespan_s"] / pack["makespan_s"],
    }


def run(quick: bool) -> Section:
    duration = 0.5 if quick else 1.0
    r = measure(duration)
    section = Section(
        title="Extreme mode (pack), the bash script's case 1 scaled",
        method=(
            f"{JOBS} jobs of `sleep {duration:g}` declaring {MEM_G}G on {GPUS} fake "
            f'{GPU_G}G GPUs, `mode = "pack"`, real processes; makespan = last end stamp - '
            "first start stamp (the jobs' `date +%s%N`). Ideal = ceil(100 / 32) x the "
            'duration. The same queue in `mode = "exclusive"` for comparison. One run each '
            "(the makespan is dominated by the sleeps, not by noise)."
            + (" Quick mode: 0.5 s jobs instead of 1 s." if quick else "")
        ),
    )
    section.rows = [
        Row(
            f"extreme case 1 scaled: {JOBS} x {MEM_G}G x {duration:g} s on {GPUS}x{GPU_G}G, pack",
            f"makespan <= 1.15 x {r['ideal_pack_s']:g} s",
            f"{r['pack_makespan_s']:.2f} s ({r['pack_over_ideal']:.3f} x ideal)",
            f"exclusive {r['exclusive_makespan_s']:.2f} s: pack is "
            f"{r['speedup_over_exclusive']:.1f}x faster (ideal "
            f"{r['ideal_exclusive_s'] / r['ideal_pack_s']:.2f}x: 25 rounds vs 4; the bash "
            "script claims 7x, from 7 jobs per GPU)",
            r["pack_over_ideal"] <= 1.15,
        )
    ]
    section.figures = {k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}
    return section


if __name__ == "__main__":
    for key, value in measure(0.5 if "--quick" in sys.argv else 1.0).items():
        print(f"{key:>24}: {value:.3f}" if isinstance(value, float) else f"{key:>24}: {value}")
