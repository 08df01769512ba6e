"""``python -m soak [--quick] [--only crash,adds,fuzz,dashboard] [--json FILE]``: the figures.

Exit 0 when every check held, 1 otherwise. Run it from the repository root (it uses
tests/reliability/); it needs no GPU (simulated GPUs, fake NVML).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Memory that grows by more than this per 1,000 jobs over the second half of a 2,000-job
# dashboard run, or by more than FLAT_TOTAL_MIB from 10 % done to the end, is not flat.
FLAT_PER_1000_MIB = 5.0
FLAT_TOTAL_MIB = 20.0


@dataclass(frozen=True)
class Mode:
    crash: int  # crash runs
    adds: int  # rounds of parallel adds (every other one with SIGKILLs)
    fuzz: int  # examples for each of the 4 bad-input properties
    jobs: int  # jobs through the dashboard
    sleep: tuple[float, float]  # their run times (uniform)
    parallel: int  # max_parallel


MODES = {
    "quick": Mode(crash=40, adds=4, fuzz=300, jobs=300, sleep=(0.3, 1.5), parallel=12),
    "full": Mode(crash=300, adds=20, fuzz=1500, jobs=2000, sleep=(0.5, 3.0), parallel=12),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m soak", description=__doc__)
    p.add_argument("--quick", action="store_true", help="a few minutes instead of ~15")
    p.add_argument(
        "--only", default="crash,adds,fuzz,dashboard", help="parts to run, comma-separated"
    )
    p.add_argument("--crash-runs", type=int, help="override the number of crash runs")
    p.add_argument("--adds-rounds", type=int, help="override the rounds of parallel adds")
    p.add_argument("--fuzz-examples", type=int, help="override examples per fuzz property")
    p.add_argument("--jobs", type=int, help="override the dashboard soak's job count")
    p.add_argument("--workers", type=int, default=4, help="crash runs at once (default 4)")
    p.add_argument("--json", type=Path, help="also write the figures to this file")
    ns = p.parse_args(argv)
    mode = MODES["quick" if ns.quick else "full"]
    parts = [x.strip() for x in ns.only.split(",") if x.strip()]

    runtime = Path(tempfile.mkdtemp(prefix="gtui-soak-xdg-"))
    runtime.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    os.environ.pop("GTUI_FAKE_GPUS", None)
    os.environ.pop("GTUI_CRASH_AT", None)

    figures: dict[str, Any] = {"mode": "quick" if ns.quick else "full", "started": time.ctime()}
    if "crash" in parts:
        from soak.crash import run_crash

        runs = ns.crash_runs or mode.crash
        print(f"crash: {runs} runs, {ns.workers} at once ...", flush=True)
        figures["crash"] = run_crash(runs, workers=ns.workers)
    if "adds" in parts:
        from soak.adds import run_adds

        rounds = ns.adds_rounds or mode.adds
        print(f"adds: {rounds} rounds of 10 shells adding 15 jobs each ...", flush=True)
        figures["adds"] = run_adds(rounds)
    if "fuzz" in parts:
        from soak.fuzz import run_fuzz

        per = ns.fuzz_examples or mode.fuzz
        print(f"bad input: up to {per} cases for each of 4 properties ...", flush=True)
        figures["fuzz"] = run_fuzz(per)
    if "dashboard" in parts:
        from soak.dashboard import dashboard_soak

        jobs = ns.jobs or mode.jobs
        print(f"dashboard: {jobs} jobs through the headless dashboard ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="gtui-soak-dash-") as tmp:
            figures["dashboard"] = dashboard_soak(
                Path(tmp),
                jobs=jobs,
                sleep=mode.sleep,
                max_parallel=mode.parallel,
                limit_s=max(300.0, jobs * 0.6),
            )
        mem = figures["dashboard"]["rss_mib"]
        # The per-1000 slope is noise over a few hundred jobs (--quick): judged from 2,000 on.
        slope_ok = jobs < 2000 or mem["second_half_growth_per_1000_jobs"] <= FLAT_PER_1000_MIB
        flat = slope_ok and mem["end"] - mem["after_10pct"] <= FLAT_TOTAL_MIB
        mem["flat"] = flat
        if not flat:
            figures["dashboard"]["failures"] += 1
            figures["dashboard"]["problems"].append(f"memory is not flat: {mem}")
    if ns.json:
        ns.json.write_text(json.dumps(figures, indent=2))
    print(report(figures))
    return 0 if all(figures[k]["failures"] == 0 for k in parts if k in figures) else 1


def report(f: dict[str, Any]) -> str:
    lines = ["", f"== gtui soak ({f['mode']}), {f['started']}"]
    if "crash" in f:
        c = f["crash"]
        lines.append(
            f"crash      {c['runs']} runs / {c['failures']} failures; {c['sigkills_landed']} "
            f"SIGKILLs landed ({c['runs_killed_twice']} runs killed twice, "
            f"{c['runs_never_killed']} finished before the kill); {c['seconds']}s"
        )
        for bad in c["failed"][:5]:
            lines.append(f"  FAILED {bad['plan']}: " + "; ".join(bad["problems"][:5]))
    if "adds" in f:
        a = f["adds"]
        lines.append(
            f"adds       {a['rounds']} rounds / {a['failures']} failures; {a['adds']} adds "
            f"({a['adds_failed_loudly']} failed loudly), {a['sigkills_landed']} SIGKILLs "
            f"landed; {a['seconds']}s"
        )
        for bad in a["failed"][:5]:
            lines.append(f"  FAILED round {bad['round']}: " + "; ".join(bad["problems"][:5]))
    if "fuzz" in f:
        z = f["fuzz"]
        by = ", ".join(f"{k} {v}" for k, v in z["by_property"].items())
        lines.append(
            f"bad input  {z['cases']} cases / {z['failures']} failures ({by}); {z['seconds']}s"
        )
        for what, tb in z["failed"].items():
            lines.append(f"  FAILED {what}:\n{tb}")
    if "dashboard" in f:
        d = f["dashboard"]
        m = d["rss_mib"]
        lines.append(
            f"dashboard  {d['jobs']} jobs ({d['attempts']} attempts: "
            + ", ".join(f"{v} {k}" for k, v in sorted(d["by_final_state"].items()))
            + f") in {d['seconds']}s, {d['keys_pressed']} keys; {d['failures']} failures"
        )
        lines.append(
            f"  RSS start {m['start']} MiB, at 10% {m['after_10pct']} MiB, end {m['end']} MiB, "
            f"peak {m['peak']} MiB; second half {m['second_half_growth_per_1000_jobs']:+} MiB "
            f"per 1000 jobs ({'flat' if m.get('flat') else 'NOT FLAT'}); state db {d['db_mib']} MiB"
        )
        for problem in d["problems"][:10]:
            lines.append(f"  FAILED {problem}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
