"""Crash runs at scale: tests/reliability/mixed.py's ``crash_run``, several at once."""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.reliability.mixed import RunResult, crash_run, kill_queue_processes


def run_crash(runs: int, *, workers: int = 4, base_seed: int = 10_000) -> dict[str, Any]:
    """``runs`` crash runs; the figures, and the failures in full."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gtui-soak-crash-") as tmp:

        def one(seed: int) -> RunResult:
            where = Path(tmp) / f"run{seed}"
            where.mkdir()
            try:
                return crash_run(where, seed)
            finally:
                kill_queue_processes(where / "q.toml")

        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(one, range(base_seed, base_seed + runs)))
    failures = [r for r in results if not r.ok]
    return {
        "runs": len(results),
        "failures": len(failures),
        "sigkills_landed": sum(r.kills_landed for r in results),
        "runs_killed_twice": sum(1 for r in results if r.kills_landed >= 2),
        "runs_never_killed": sum(1 for r in results if r.kills_landed == 0),
        "jobs_checked": runs * 12,
        "seconds": round(time.monotonic() - t0, 1),
        "failed": [{"plan": r.plan, "problems": r.problems} for r in failures],
    }
