"""Where a headless ``gtui run`` spends its time per job, beside task-spooler's workloads.

Runs the peers' chain (N trivial jobs one after another) and throughput (N jobs on 8 slots)
queues under py-spy (sampling, so gtui runs at nearly full speed), and sorts the samples of
the scheduler's threads into the costs a reader can act on: the fork and exec of each job's
wrapper, SQLite commits, psutil, the placement pass and the engine's bookkeeping, the start-up
imports, and the time it waits for the jobs themselves. docs/benchmarks.md's "Where the time goes"
quotes its output.

    python -m benchmarks.where_time_goes [--jobs 400] [--rate 500]

Needs py-spy (``pip install py-spy``) and the right to trace a child (root, or
ptrace_scope 0); says so and exits 2 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.peers import SLOTS, write_queue

# (label, a frame name that marks it): the first that a sample's stack holds wins, so the more
# specific come first. Frames are py-spy's "function (file:line)".
CATEGORIES: list[tuple[str, tuple[str, ...]]] = [
    ("start-up: imports", ("_find_and_load",)),
    ("start-up: the queue's load and the store's opening", ("Engine.start ",)),
    ("fork + exec of the job's wrapper (subprocess.Popen)", ("Popen._execute_child",)),
    # Read right after the fork: the kernel answers once the child's exec is through.
    ("the new process's start time from /proc (waits out its exec)", ("create_time_of",)),
    ("the job's log file created, its status file and environment", ("launch (",)),
    ("psutil (process checks, host memory)", ("psutil/",)),
    ("SQLite: records and attempts history committed", ("Store.", "record_attempt", "history")),
    ("the event log (`gtui run`'s lines)", ("EventLog",)),
    ("the placement pass and the engine's bookkeeping", ("_schedule", "_decide", "explain")),
    ("reaping the job and reading its exit status", ("wait_exit", "_reap", "read_status_file")),
    ("waiting in the event loop (for the job, or a timer)", ("EpollSelector.select",)),
]
Counts = tuple[collections.Counter[str], int]  # samples per category, and in all
IDLE_THREAD = "_worker (concurrent/futures/thread.py"  # a pool thread waiting for work


def categorize(raw: Path) -> Counts:
    """Samples per category from py-spy's raw output (one "stack count" per line)."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        frames = stack.split(";")
        if frames[-1].startswith(IDLE_THREAD) or frames[-1].startswith("Condition.wait"):
            continue  # an idle pool thread: not the scheduler's time
        total += int(n)
        for label, marks in CATEGORIES:
            if any(m in f for f in frames for m in marks):
                counts[label] += int(n)
                break
        else:
            counts["other"] += int(n)
    return counts, total


def profile(jobs: int, parallel: int, rate: int, work: Path) -> Counts:
    queue = work / f"q{parallel}.toml"
    stamps = work / f"stamps{parallel}"
    write_queue(queue, parallel, [(f"j{i}", f"date +%s%N >> {stamps}") for i in range(jobs)])
    raw = work / f"prof{parallel}.txt"
    cmd = ["py-spy", "record", "-o", str(raw), "-f", "raw", "-r", str(rate), "--"]
    cmd += [sys.executable, "-m", "gtui", "run", str(queue)]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    if proc.returncode != 0 or not raw.exists():
        raise SystemExit(f"py-spy failed ({proc.returncode}): {proc.stderr[-500:]}")
    return categorize(raw)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--rate", type=int, default=500, help="samples per second")
    ns = ap.parse_args()
    if shutil.which("py-spy") is None:
        print("py-spy is not installed (pip install py-spy)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gtui-where-") as tmp:
        for name, parallel in (("chain", 1), (f"throughput ({SLOTS} slots)", SLOTS)):
            counts, total = profile(ns.jobs, parallel, ns.rate, Path(tmp))
            per_job_ms = 1000.0 / ns.rate / ns.jobs
            print(f"\n{name}, {ns.jobs} jobs: {total} samples of the scheduler's threads")
            print("| cost | share | ms per job (sampled) |\n| --- | --- | --- |")
            for label, n in counts.most_common():
                print(f"| {label} | {100 * n / total:.0f} % | {n * per_job_ms:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
