"""What the progress and start estimates cost: reading a job's progress from its log's tail, and the
estimator over a 100,000-job queue (what `gtui status --json` and the dashboard add every 2 s)."""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.common import Row, Section, median
from gtui.core.api import JobView
from gtui.core.model import JobRecord, JobSpec, JobState
from gtui.core.progress import TAIL_BYTES, Progress, parse_progress
from gtui.core.sched.eta import ProgressBook, estimate

LOGS = Path(__file__).resolve().parent.parent / "tests" / "progress_logs"


def _queue(n: int, running: int, now: float) -> tuple[list[JobView], ProgressBook]:
    book = ProgressBook()
    views = []
    for i in range(n):
        active = i < running
        rec = JobRecord(
            f"j{i}",
            JobState.RUNNING if active else JobState.QUEUED,
            attempt=1 if active else 0,
            gpus=(i,) if active else (),
            started_at=now - 600 if active else None,
        )
        views.append(JobView(JobSpec(f"j{i}", "true", entry=i % 10), rec, i))
        if active:
            book.observe(f"j{i}", 1, _progress(), now)
    return views, book


def _progress() -> Progress:
    return Progress(0.5, "tqdm", "500/1000")


def run(quick: bool) -> Section:
    repeats = 3 if quick else 7
    n = 10_000 if quick else 100_000
    parse_ms: dict[str, float] = {}
    for name in ("plain", "lightning", "huggingface"):
        tail = (LOGS / f"{name}.log").read_text()[-TAIL_BYTES:]
        times = []
        for _ in range(repeats * 10):
            t0 = time.perf_counter()
            parse_progress(tail)
            times.append(time.perf_counter() - t0)
        parse_ms[name] = median(times) * 1000
    now = time.time()
    views, book = _queue(n, 8, now)
    runtimes = ({k: 3600.0 for k in range(10)}, {})
    est = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        estimate(views, book, runtimes, now)
        est.append(time.perf_counter() - t0)
    section = Section(
        title="Progress and estimates",
        method=(
            f"parse_progress on the last {TAIL_BYTES // 1024} KiB of the tqdm, Lightning and "
            "Hugging Face sample logs (tests/progress_logs, written by the real tqdm), median "
            f"of {repeats * 10}; estimate() over a {n:,}-job queue, 8 running with progress, the "
            f"rest waiting, median of {repeats}. The scheduler parses a growing log at most "
            "every 2 s per job; `gtui status --json` and the dashboard (every 2 s) run estimate."
        ),
    )
    worst = max(parse_ms.values())
    section.rows = [
        Row(
            "progress from a 16 KiB log tail",
            "<= 5 ms",
            f"{worst:.2f} ms (worst format)",
            "",
            worst <= 5.0,
        ),
        Row(
            f"estimates over {n:,} jobs",
            "<= 250 ms",
            f"{median(est) * 1000:.0f} ms",
            "",
            median(est) <= 0.25,
        ),
    ]
    section.figures = {
        "parse ms": {k: round(v, 3) for k, v in parse_ms.items()},
        "estimate ms": [round(x * 1000, 1) for x in est],
    }
    return section
