"""What measuring each job's use and naming each GPU's holders cost the scheduler at each GPU
poll: the walk of /proc for the running jobs' host memory (``runner.trees_rss_mib``) and naming
the processes on the GPUs (``HolderReader.describe``), with real processes.

    python -m benchmarks.usage [--quick]

Targets: the walk (at most once a second, for all jobs at once) under 10 ms, naming a process
under a millisecond, so a poll every 2 s with dozens of running jobs spends a fraction of a
percent of a core on them.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

from benchmarks.common import Row, Section, median
from gtui.core.exec.runner import trees_rss_mib
from gtui.core.gpus.holders import REFRESH_S, HolderReader
from gtui.core.gpus.snapshot import GpuInfo, GpuProcess, GpuSnapshot

G = 1024


def _timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def run(quick: bool) -> Section:
    jobs = 4 if quick else 16
    repeat = 20 if quick else 100
    procs = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        for _ in range(jobs)
    ]
    try:
        roots = {f"job{i}": p.pid for i, p in enumerate(procs)}
        walk = _timed(lambda: trees_rss_mib(roots), repeat)
        gpu = GpuInfo(
            0, "g", "u", 80 * G, jobs * G, 50, 40, tuple(GpuProcess(p.pid, G) for p in procs)
        )
        snap = GpuSnapshot((gpu,), 0.0, "nvml")
        first = []
        for _ in range(max(3, repeat // 10)):  # a new reader: every pid looked up
            t0 = time.perf_counter()
            HolderReader().describe(snap, 0.0)
            first.append(time.perf_counter() - t0)
        reader = HolderReader()
        reader.describe(snap, 0.0)
        cached = _timed(lambda: reader.describe(snap, REFRESH_S / 2), repeat)
        refresh_t = [0.0]

        def refreshed() -> None:
            refresh_t[0] += REFRESH_S
            reader.describe(snap, refresh_t[0])

        refresh = _timed(refreshed, repeat)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    per_job_ms = {
        "first look-up": median(first) * 1000 / jobs,
        "cached (within 2 s)": median(cached) * 1000 / jobs,
        "refresh (every 2 s)": median(refresh) * 1000 / jobs,
    }
    walk_ms = median(walk) * 1000
    rows = [
        Row(
            f"host memory walk of /proc, per poll ({jobs} running jobs)",
            "< 10 ms",
            f"{walk_ms:.2f} ms",
            met=walk_ms < 10.0,
        )
    ] + [
        Row(
            f"naming GPU processes, {what}, per process ({jobs})",
            "< 1 ms",
            f"{ms:.3f} ms",
            met=ms < 1.0,
        )
        for what, ms in per_job_ms.items()
    ]
    return Section(
        title="What each job used and who holds each GPU: their cost at each poll",
        method=(
            f"{jobs} real sleeping processes stand for running jobs. The /proc walk for their "
            "host memory (one walk for all of them) and the naming of the processes a GPU "
            f"lists (psutil: user, command, start, parent, state), median of {repeat} calls, "
            "divided by the number of jobs."
        ),
        rows=rows,
        figures={"walk_ms": walk_ms, "per_job_ms": per_job_ms, "jobs": jobs, "repeat": repeat},
    )


if __name__ == "__main__":
    section = run("--quick" in sys.argv)
    for row in section.rows:
        print(f"{row.what}: {row.measured} (target {row.target})")
