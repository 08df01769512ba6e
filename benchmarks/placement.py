"""One placement pass (``gtui.core.policy.place``) over 1k / 10k / 100k waiting jobs on 8 GPUs.

The worst case for a pass: almost nothing fits, so every job needs a reason. 8 fake 80G GPUs,
others use 50-75G of each; the jobs ask 1, 2, 4 or 8 GPUs and 5-75G in 5G steps (60 request
shapes), priorities 0-3, one in ten has an ``after`` on an earlier job; a few fit and start.
Pack mode with ``reserve = 1`` (the pass that does the most work) and shared mode. Each size is
timed over several passes; the figure is the median. The Candidates are built once outside the
timing (the engine keeps them between passes).

    python -m benchmarks.placement
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from typing import Any

from benchmarks.common import Row, Section, median
from gtui.core.gpus.snapshot import GpuInfo, GpuSnapshot
from gtui.core.model import Mode, Settings
from gtui.core.policy import Candidate, place

GIB = 1024


def snapshot(rng: random.Random) -> GpuSnapshot:
    gpus = tuple(
        GpuInfo(
            index=i,
            name="Fake A800 80G",
            uuid=f"GPU-{i}",
            mem_total_mib=80 * GIB,
            mem_used_mib=rng.choice([50, 55, 60, 65, 70, 75]) * GIB,
            util=rng.choice([0, 30, 90]),
            temperature=40,
        )
        for i in range(8)
    )
    return GpuSnapshot(gpus=gpus, taken_at=0.0, source="fake")


def candidates(n: int, rng: random.Random) -> list[Candidate]:
    out = []
    for i in range(n):
        after = (f"job{rng.randrange(i)}",) if i and rng.random() < 0.1 else ()
        out.append(
            Candidate(
                name=f"job{i}",
                gpus=rng.choice([1, 1, 1, 2, 2, 4, 8]),
                mem_mib=rng.randrange(1, 16) * 5 * GIB,
                priority=rng.randrange(4),
                order=i,
                after=after,
                waiting_since=1000.0 + i,
            )
        )
    return out


def time_pass(n: int, settings: Settings, repeats: int) -> dict[str, Any]:
    rng = random.Random(n)
    snap = snapshot(rng)
    cands = candidates(n, rng)
    deps = {c.name: "done" if rng.random() < 0.5 else "queued" for c in cands}
    times = []
    starts = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        decision = place(snap, cands, [], settings, dep_states=deps, running_count=0, now=2000.0)
        times.append((time.perf_counter() - t0) * 1000)
        starts = len(decision.starts)
    return {"ms": median(times), "min_ms": min(times), "starts": starts}


def run(quick: bool) -> Section:
    sizes = [1_000, 10_000, 100_000]
    base = Settings(mode=Mode.PACK, reserve=1)
    rows: dict[str, dict[int, dict[str, Any]]] = {}
    for label, settings in (
        ("pack, reserve 1", base),
        ("shared", replace(base, mode=Mode.SHARED, reserve=0)),
    ):
        rows[label] = {}
        for n in sizes:
            repeats = 3 if n == 100_000 or quick else 7
            rows[label][n] = time_pass(n, settings, repeats)
    pack = rows["pack, reserve 1"]
    worst = max(pack[100_000]["ms"], rows["shared"][100_000]["ms"])
    per_job = {n: max(rows[k][n]["ms"] for k in rows) / n * 1000 for n in sizes}  # us per job
    linear = per_job[100_000] <= per_job[1_000] * 1.5
    section = Section(
        title="One placement pass",
        method=(
            "`gtui.core.policy.place` on 8 fake 80G GPUs with others using 50-75G of each; "
            "waiting jobs of 1/2/4/8 GPUs x 5-75G (60 shapes), priorities 0-3, 10 % with an "
            "`after`; almost none fit, so nearly every job gets a reason (the worst case). "
            "Median of 7 passes (3 at 100k, and in quick mode). 'Linear' means the time per "
            "job at 100k is at most 1.5x the time per job at 1k."
        ),
    )
    section.rows = [
        Row(
            "one placement pass, 8 GPUs, 1k / 10k / 100k waiting jobs",
            "<= 50 ms at 100k, no worse than linear",
            " / ".join(f"{max(rows[k][n]['ms'] for k in rows):.1f}" for n in sizes) + " ms",
            "per job: " + " / ".join(f"{per_job[n]:.2f}" for n in sizes) + " us",
            worst <= 50 and linear,
        )
    ]
    for label, by_n in rows.items():
        for n, r in by_n.items():
            section.figures[f"{label}, {n:,} jobs"] = (
                f"{r['ms']:.2f} ms median (min {r['min_ms']:.2f}), {r['starts']} started"
            )
    return section


if __name__ == "__main__":
    s = run(quick=False)
    for row in s.rows:
        print(row)
    for k, v in s.figures.items():
        print(f"{k}: {v}")
