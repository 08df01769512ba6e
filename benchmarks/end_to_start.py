"""A job's end to the next job's start on the freed GPU, against plain asyncio subprocesses.

Each job is a bash command that stamps the clock (`date +%s%N`) as its first and last act, so
the gap is measured from the jobs' own point of view: from the moment one job's shell is done
to the moment the next job's shell runs its first command. Jobs declare 70G on one fake 80G GPU,
so only one fits at a time: every start waits for the previous end. The baseline runs the same
commands with `asyncio.create_subprocess_exec("bash", "-c", cmd)` in a loop, awaiting each one:
the least any scheduler could do. Per-job overhead = gtui's median gap - the baseline's, from
the same repeat (they run back to back, so they share the machine's load).

    python -m benchmarks.end_to_start [N]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import Row, Section, fmt_ms, median, pct, read_stamps, spread, stamp_cmd
from gtui.core.sched.build import build_engine


def gaps_ms(stamps: Path) -> list[float]:
    starts, ends = read_stamps(stamps)
    return [(s - e) / 1e6 for e, s in zip(ends[:-1], starts[1:], strict=True)]


async def run_gtui(n: int, workdir: Path) -> list[float]:
    stamps = workdir / "gtui.stamps"
    jobs = "".join(
        f'[[jobs]]\nname = "j{i}"\nmem = "70G"\ncmd = \'{stamp_cmd(stamps)}\'\n\n' for i in range(n)
    )
    queue = workdir / "bench.toml"
    queue.write_text(f'[settings]\npoll = "10s"\nfake_gpus = "1x80G"\n\n{jobs}')
    engine = build_engine(queue, control=False)
    code = await engine.run(exit_when_idle=True)
    if code != 0:
        raise RuntimeError(f"benchmark queue failed: {engine.counts()}")
    return gaps_ms(stamps)


async def run_baseline(n: int, workdir: Path) -> list[float]:
    stamps = workdir / "plain.stamps"
    cmd = stamp_cmd(stamps)
    for _ in range(n):
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", cmd, stdin=asyncio.subprocess.DEVNULL
        )
        await proc.wait()
    return gaps_ms(stamps)


def measure(n: int = 500) -> dict[str, Any]:
    """One repeat: gtui's gaps and the baseline's, back to back."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ours = asyncio.run(run_gtui(n, work))
        base = asyncio.run(run_baseline(n, work))
    return {
        "jobs": n,
        "gtui_median_ms": median(ours),
        "gtui_p99_ms": pct(ours, 0.99),
        "gtui_max_ms": max(ours),
        "baseline_median_ms": median(base),
        "baseline_p99_ms": pct(base, 0.99),
        "overhead_median_ms": median(ours) - median(base),
        "ratio_median": median(ours) / max(1e-9, median(base)),
    }


def run(quick: bool) -> Section:
    n, repeats = (150, 2) if quick else (500, 3)
    results = [measure(n) for _ in range(repeats)]

    def col(key: str) -> list[float]:
        return [float(r[key]) for r in results]

    med, p99 = median(col("gtui_median_ms")), median(col("gtui_p99_ms"))
    over = median(col("overhead_median_ms"))
    b_med, b_p99 = median(col("baseline_median_ms")), median(col("baseline_p99_ms"))
    section = Section(
        title="End to start, and per-job overhead",
        method=(
            f"{n} jobs of 70G on one fake 80G GPU, so each start waits for the previous end; "
            "each job stamps `date +%s%N` first and last, and the gap is the next job's first "
            "stamp minus this job's last (the jobs' own view, all of gtui's work in between: "
            "the wrapper's exit, the status file, the exit noticed, the commit, the placement "
            "pass, the intent commit, the launch, the wrapper's start). Baseline: the same "
            "commands through `asyncio.create_subprocess_exec('bash', '-c', cmd)` one after "
            f"another, right after gtui in the same repeat. {repeats} repeats; each figure is "
            "the median over repeats of the per-repeat median / p99 (min-max over repeats in "
            "parentheses). Overhead = gtui's median gap - the baseline's median gap."
        ),
    )
    section.rows = [
        Row(
            f"end -> next start on the freed GPU, median / p99 over {n} jobs",
            "<= 10 ms / <= 50 ms",
            f"{fmt_ms(med)} / {fmt_ms(p99)}",
            f"plain asyncio {fmt_ms(b_med)} / {fmt_ms(b_p99)}",
            med <= 10 and p99 <= 50,
        ),
        Row(
            "per-job overhead vs plain asyncio subprocesses, median",
            "<= 5 ms",
            fmt_ms(over),
            f"gtui {median(col('ratio_median')):.2f}x the baseline's gap",
            over <= 5,
        ),
    ]
    section.figures = {
        "jobs per repeat": n,
        "repeats": repeats,
        "gtui median gap ms": spread(col("gtui_median_ms")),
        "gtui p99 gap ms": spread(col("gtui_p99_ms")),
        "gtui max gap ms": spread(col("gtui_max_ms")),
        "baseline median gap ms": spread(col("baseline_median_ms")),
        "baseline p99 gap ms": spread(col("baseline_p99_ms")),
        "overhead median ms": spread(col("overhead_median_ms")),
        "gtui / baseline median": spread(col("ratio_median")),
    }
    return section


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    for key, value in measure(count).items():
        print(f"{key:>20}: {value:.2f}" if isinstance(value, float) else f"{key:>20}: {value}")
