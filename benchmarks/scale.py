"""A long sweep as a user meets it: 10,000 and 100,000 waiting jobs in one queue file.

Each size gets a queue file as a sweep generator writes one (one ``[[jobs]]`` table per job,
explicit names, 70G each on 8 fake 80G GPUs, ``max_parallel = 2``), then, through the real
command line and a real headless scheduler (``gtui run``):

- ``gtui validate`` (spawn to exit);
- scheduler up and placing: from spawning ``gtui run`` to the first job's own stamp;
- ``gtui add`` into that running queue, one job at a time (spawn to exit, median);
- ``gtui status --json`` (spawn to exit, into a pipe);
- a live edit of one job in the file (another job's ``mem``) until the scheduler has taken it
  (the scheduler's own event log says ``reloaded``);
- the scheduler's resident memory once it is up and placing;
- the dashboard's first screen: ``GtuiApp`` in process, on a copy of the queue, from its start
  until the job table holds every job.

Each figure at 100,000 is set beside the same at 10,000: growth no worse than linear means a
ratio of at most 10.

    python -m benchmarks.scale
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

import psutil

from benchmarks.common import Row, Section, median, missed_by

GIB = 1024
TARGETS = {  # at 100,000 jobs
    "validate": 2.0,
    "up": 2.0,
    "add": 0.150,
    "status": 1.0,
    "edit": 0.5,
    "rss": 150.0,
    "rss_peak": 150.0,
    "restart": 2.0,
    "rss_restart": 150.0,
    "first_screen": 1.0,
}


# Where the time (or memory) of a missed row goes, from the profiles (docs/benchmarks.md, "The
# 100,000-job queue: what the profiles showed").
_LOAD = "one full read of the 9 MB file: TOML parse and per-job expansion and checks in Python"
WHY = {
    "validate": _LOAD + " (~1.2-1.5 s)",
    "up": _LOAD + ", then the job book and the first placement pass over 100,000 candidates",
    "restart": _LOAD + " (about half of the start), and every waiting record read back from "
    "the store (its documents now hold only the fields that differ from a new record's: half "
    "the CPU they took)",
    "add": "the file read, hashed and written whole again (fsync) at each add, and the "
    "interpreter's start",
    "status": "a document of ~45 MB made, sent and written out",
    "rss": "what lives on, ~1.2 KB a job: a record (~310 bytes) and a spec (~210) with slots, "
    "the name and command strings (~140), the waiting job's Candidate (~130) and the planner's "
    "name set, the file's text (~90), the book's indexes; plus ~15 MB of CPython's small-object "
    "arenas that the parse left partly used (the C heap's freed pages now go back, "
    "malloc_trim). Under 150 MB needs records made only when a job first runs",
    "rss_peak": "as the RSS after start; a reload that parses the whole file while every job "
    "is resident adds the parse's peak on top (seen once, ~400 MB: an add whose write the file "
    "watcher took for an edit, it seems)",
    "rss_restart": "as at the first start: what lives on, and the parse's partly used "
    "arenas; the records read back share their equal values",
    "first_screen": "the engine's start before the table can hold the jobs: the full load "
    "(~1 s at 100,000 jobs), the job book, a full collection before gc.freeze and every job's "
    "view for the screen; the dashboard's own fill and first frame after it are ~0.15 s",
}


def write_queue(path: Path, n: int) -> None:
    parts = ['[settings]\nmode = "pack"\nmax_parallel = 2\n\n']
    for i in range(n):
        stamp = " date +%s%N > first.stamp;" if i == 0 else ""
        parts.append(
            f'[[jobs]]\nname = "train-{i:06d}"\n'
            f'cmd = "{stamp} exec sleep 3600 # lr {i}"\ngpus = 1\nmem = "70G"\n\n'
        )
    path.write_text("".join(parts))


def gtui(*args: str, cwd: Path) -> list[str]:
    return [sys.executable, "-m", "gtui", *args]


def timed(args: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[2:])} failed ({proc.returncode}): {proc.stderr[-400:]}")
    return took


def wait_until(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.005)


def stop(proc: subprocess.Popen[bytes], queue: Path) -> None:
    """The scheduler, then the jobs it left running (they carry GTUI_QUEUE)."""
    from gtui.core.exec.runner import processes_with_env

    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in processes_with_env("GTUI_QUEUE", str(queue)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def first_screen(queue: Path, n: int) -> float:
    """Seconds from the dashboard's start to a table that holds every job (in process)."""
    from gtui.core.sched.build import build_engine
    from gtui.ui.app import GtuiApp

    async def run() -> float:
        t0 = time.perf_counter()
        engine = build_engine(queue, fake_gpus="8x80G", control=False, dispatch=False)
        app = GtuiApp(engine, host="bench")
        try:
            async with app.run_test(size=(120, 30)) as pilot:
                while not (app.main.ready and len(app.main.table) >= n):
                    await pilot.pause(0.005)
                return time.perf_counter() - t0
        finally:
            await engine.shutdown()

    return asyncio.run(run())


def spread(values: list[float]) -> tuple[float, float]:
    return (min(values), max(values))


def peak_rss_mib(pid: int) -> float:
    """The process's highest resident memory so far (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return psutil.Process(pid).memory_info().rss / 2**20


def start_scheduler(root: Path, log: IO[str]) -> subprocess.Popen[bytes]:
    """A headless `gtui run` of the queue, its event log to ``log``."""
    return subprocess.Popen(
        gtui("run", "q.toml", "--fake-gpus", "8x80G", cwd=root),
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def restart(root: Path) -> tuple[float, float]:
    """A second `gtui run` on the queue's saved state: seconds until its socket answers, and
    its RSS then (MiB)."""
    with open(root / "run2.log", "w") as log:
        t0 = time.perf_counter()
        proc = start_scheduler(root, log)
        try:
            wait_until(lambda: _answers(root / "q.toml"), 120, "the restarted scheduler")
            took = time.perf_counter() - t0
            rss = psutil.Process(proc.pid).memory_info().rss / 2**20
        finally:
            stop(proc, root / "q.toml")
    return took, rss


def _answers(queue: Path) -> bool:
    """Whether the queue's scheduler answers on its control socket (a ping)."""
    from gtui.core.control.rpc import request
    from gtui.core.errors import GtuiError

    try:
        return request(queue, "ping", timeout=5) is not None
    except GtuiError:
        return False


def measure(n: int, adds: int, repeats: int) -> dict[str, float]:
    out: dict[str, float] = {}
    spreads: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gtui-scale-") as tmp:
        root = Path(tmp)
        q = root / "q.toml"
        write_queue(q, n)
        runs = [
            timed(gtui("validate", str(q), "--fake-gpus", "8x80G", cwd=root), root)
            for _ in range(repeats)
        ]
        out["validate"], spreads["validate"] = median(runs), spread(runs)
        log = open(root / "run.log", "w")  # noqa: SIM115 - closed below
        t0 = time.perf_counter()
        proc = start_scheduler(root, log)
        try:
            stamp = root / "first.stamp"
            wait_until(lambda: stamp.exists() and stamp.read_text().strip(), 300, "first job")
            out["up"] = time.perf_counter() - t0
            out["rss"] = psutil.Process(proc.pid).memory_info().rss / 2**20
            # The socket answers once the start is through: wait for it before adding.
            wait_until(
                lambda: (
                    subprocess.run(
                        gtui("status", "q.toml", cwd=root), cwd=root, capture_output=True
                    ).returncode
                    == 0
                ),
                120,
                "the scheduler's socket",
            )
            add_times = [
                timed(
                    gtui(
                        "add",
                        "q.toml",
                        "--name",
                        f"extra-{i}",
                        "--gpus",
                        "0",
                        "--",
                        "sleep 3600",
                        cwd=root,
                    ),
                    root,
                )
                for i in range(adds)
            ]
            out["add"], spreads["add"] = median(add_times), spread(add_times)
            runs = [
                timed(gtui("status", "q.toml", "--json", cwd=root), root) for _ in range(repeats)
            ]
            out["status"], spreads["status"] = median(runs), spread(runs)
            # A live edit of one waiting job, well after the last add.
            text = q.read_text()
            edited = re.sub(
                r'(name = "train-000500"\ncmd = "[^"]*"\ngpus = 1\nmem = )"70G"',
                r'\1"60G"',
                text,
                count=1,
            )
            before = (root / "run.log").read_text().count("reloaded")
            tmp_file = root / "q.toml.tmp"
            tmp_file.write_text(edited)
            t1 = time.perf_counter()
            os.replace(tmp_file, q)
            wait_until(
                lambda: (root / "run.log").read_text().count("reloaded") > before, 120, "reload"
            )
            out["edit"] = time.perf_counter() - t1
            out["rss_peak"] = peak_rss_mib(proc.pid)
        finally:
            stop(proc, q)
            log.close()
        # The same queue opened again, as a user who comes back finds it: every record is
        # read back from the store (the first start made them from the file).
        out["restart"], out["rss_restart"] = restart(root)
        runs = []
        for _ in range(max(1, repeats - 1)):
            shutil.rmtree(root / ".gtui", ignore_errors=True)  # each a first open of the queue
            runs.append(first_screen(q, n + adds))
        out["first_screen"], spreads["first_screen"] = median(runs), spread(runs)
    for key, (lo, hi) in spreads.items():
        out[f"{key} min"], out[f"{key} max"] = lo, hi
    return out


def run(quick: bool) -> Section:
    sizes = (1_000, 5_000) if quick else (10_000, 100_000)  # quick: the smoke run's counts
    adds, repeats = (3, 1) if quick else (10, 3)
    small, big = sizes
    a = measure(small, adds, repeats)
    b = measure(big, adds, repeats)
    section = Section(
        title=f"A long sweep: {small:,} and {big:,} waiting jobs",
        method=(
            f"Queue files of {small:,} and {big:,} jobs as a sweep generator writes them (one "
            "[[jobs]] table each, 70G on 8 fake 80G GPUs, max_parallel 2), driven through the "
            "real command line and a real headless `gtui run` (benchmarks/scale.py). Times are "
            f"spawn to exit of each command (median of {repeats}; `gtui add`: median of "
            f"{adds}); scheduler up = spawn of `gtui run` to the first job's own stamp; live "
            "edit = the file replaced with one job's mem changed, until the scheduler's event "
            "log says reloaded; the first screen is GtuiApp in process until its table holds "
            f"every job (median of {max(1, repeats - 1)}, a fresh state each); peak memory is the "
            "scheduler's VmHWM after the adds, statuses and the edit; opened again = a second "
            "`gtui run` on the saved state (every record read back from the store) until its "
            "socket answers a ping, and its RSS then. Growth is the "
            "figure at the larger size over the smaller (10x the jobs: at most 10 is linear); "
            "min-max over the repeats in the figures."
        ),
    )
    labels = {
        "validate": ("`gtui validate`", "s"),
        "up": ("scheduler up and placing", "s"),
        "add": ("`gtui add` into the running queue", "ms"),
        "status": ("`gtui status --json`", "s"),
        "edit": ("live edit of one job applied", "s"),
        "rss": ("scheduler memory (RSS)", "MB"),
        "rss_peak": ("scheduler peak memory (VmHWM) after the adds, statuses and edit", "MB"),
        "restart": ("scheduler opened again on its saved state, up and answering", "s"),
        "rss_restart": ("scheduler memory (RSS) opened again on its saved state", "MB"),
        "first_screen": ("dashboard's first screen", "s"),
    }
    for key, (what, unit) in labels.items():
        why = WHY.get(key, "")
        scale = 1000.0 if unit == "ms" else 1.0
        target = TARGETS[key] * scale
        small_v, big_v = a[key] * scale, b[key] * scale
        growth = big_v / small_v if small_v else float("nan")
        fmt = "{:.0f}" if unit in ("ms", "MB") else "{:.2f}"
        section.rows.append(
            Row(
                what=f"{what}, {big:,} jobs",
                target=f"< {fmt.format(target)} {unit}, growth <= 10x" if not quick else "-",
                measured=f"{fmt.format(big_v)} {unit}",
                baseline=f"{fmt.format(small_v)} {unit} at {small:,} (growth {growth:.1f}x)",
                met=None if quick else (big_v < target and growth <= 10.5),
                why="; ".join(p for p in (missed_by(big_v, target), why) if p),
            )
        )
        section.figures[f"{key} at {small}"] = round(small_v, 3)
        section.figures[f"{key} at {big}"] = round(big_v, 3)
        for size, got in ((small, a), (big, b)):
            if f"{key} min" in got:
                lo, hi = got[f"{key} min"] * scale, got[f"{key} max"] * scale
                section.figures[f"{key} at {size}, min-max"] = f"{lo:.3f}-{hi:.3f}"
    return section


if __name__ == "__main__":
    result = run("--quick" in sys.argv)
    for row in result.rows:
        print(f"{row.what}: {row.measured} ({row.baseline}) target {row.target} met {row.met}")
