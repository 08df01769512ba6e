"""A job's end to the next job's start on the freed GPU, against plain asyncio subprocesses.

Each job is a bash command that stamps the clock (`date +%s%N`) as its first and last act, so
the gap is measured from the jobs' own point of view: from the moment one job's shell is done
to the moment the next job's shell runs its first command. Jobs declare 70G on one fake 80G GPU,
so only one fits at a time: every start waits for the previous end. The baseline runs the same
commands with `asyncio.create_subprocess_exec("bash", "-c", cmd)` in a loop, awaiting each one:
the least any scheduler could do.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from gtui.core.engine import Engine


def stamp_cmd(stamps: Path) -> str:
    return f'echo "s $(date +%s%N)" >> {stamps}; echo "e $(date +%s%N)" >> {stamps}'


def gaps_ms(stamps: Path) -> list[float]:
    marks = [line.split() for line in stamps.read_text().splitlines()]
    starts = [int(v) for k, v in marks if k == "s"]
    ends = [int(v) for k, v in marks if k == "e"]
    return [(s - e) / 1e6 for e, s in zip(ends[:-1], starts[1:], strict=True)]


async def run_gtui(n: int, workdir: Path) -> list[float]:
    stamps = workdir / "gtui.stamps"
    jobs = "".join(
        f'[[jobs]]\nname = "j{i}"\nmem = "70G"\ncmd = \'{stamp_cmd(stamps)}\'\n\n' for i in range(n)
    )
    queue = workdir / "bench.toml"
    queue.write_text(f'[settings]\npoll = "10s"\nfake_gpus = "1x80G"\n\n{jobs}')
    engine = Engine(queue, control=False)
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


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(n: int = 200) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        ours = asyncio.run(run_gtui(n, work))
        base = asyncio.run(run_baseline(n, work))
    return {
        "jobs": n,
        "gtui_median_ms": statistics.median(ours),
        "gtui_p99_ms": pct(ours, 0.99),
        "baseline_median_ms": statistics.median(base),
        "baseline_p99_ms": pct(base, 0.99),
        "overhead_median_ms": statistics.median(ours) - statistics.median(base),
        "ratio_median": statistics.median(ours) / max(1e-9, statistics.median(base)),
    }


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    for key, value in measure(n).items():
        print(f"{key:>20}: {value:.2f}" if isinstance(value, float) else f"{key:>20}: {value}")
