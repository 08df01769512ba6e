"""``gtui validate`` of a 10,000-job queue file, as a user runs it (a new process).

The file has 10,000 ``[[jobs]]`` tables with the keys people use (cmd with placeholders, gpus,
mem, priority, env, retries; one in ten has an ``after`` on an earlier job; a few matrix
entries), and ``fake_gpus`` so the pool checks run. Timed: ``python -m gtui validate FILE``
from spawn to exit, output to a pipe; beside it, the same interpreter importing gtui and doing
nothing (the floor any Python CLI pays), and ``load_queue`` alone in process.

    python -m benchmarks.validate
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import Row, Section, median, spread
from gtui.core.queue.queuefile import load_queue

N = 10_000


def write_queue(path: Path, n: int = N) -> None:
    parts = ['[settings]\nfake_gpus = "8x80G"\nmode = "pack"\nretries = 1\n\n']
    names: list[str] = []
    i = 0
    while i < n:
        if i % 500 == 499 and n - i >= 4:  # a matrix entry: 4 jobs
            parts.append(
                f'[[jobs]]\nname = "sweep{i}-lr{{lr}}-s{{seed}}"\n'
                'cmd = "python train.py --lr {lr} --seed {seed}"\n'
                'matrix = { lr = [0.1, 0.01], seed = [1, 2] }\nmem = "12G"\n\n'
            )
            i += 4
            continue
        after = f'after = ["{names[-7]}"]\n' if i % 10 == 9 and len(names) > 7 else ""
        names.append(f"job{i}")
        parts.append(
            f'[[jobs]]\nname = "job{i}"\n'
            f'cmd = "python eval.py --ckpt ckpt/{i}.pt --port {{port}}"\n'
            f'gpus = {1 + (i % 3 == 0)}\nmem = "{10 + i % 50}G"\npriority = {i % 4}\n'
            f'env = {{ SEED = "{i}" }}\n{after}\n'
        )
        i += 1
    path.write_text("".join(parts))


def time_cli(args: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.run(args, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr[-500:]}")
    return times


def run(quick: bool) -> Section:
    repeats = 3 if quick else 5
    with tempfile.TemporaryDirectory() as tmp:
        queue = Path(tmp) / "big.toml"
        write_queue(queue)
        jobs = len(load_queue(queue).jobs)
        cli = time_cli([sys.executable, "-m", "gtui", "validate", str(queue)], repeats)
        floor = time_cli(
            [sys.executable, "-c", "import gtui.cli, gtui.core.queue.queuefile"], repeats
        )
        loads = []
        for _ in range(repeats):
            # a first load: scan, parse and expansion included, no size or env name already
            # checked (a load without a reader of its own keeps nothing)
            t0 = time.perf_counter()
            load_queue(queue)
            loads.append(time.perf_counter() - t0)
        size_kb = queue.stat().st_size / 1024
    section = Section(
        title="gtui validate of a 10,000-job queue",
        method=(
            f"a generated queue file of {jobs:,} jobs ({size_kb:.0f} KiB: cmd with "
            "placeholders, gpus, mem, priority, env, 10 % with `after`, a few `matrix` "
            "entries; `fake_gpus` so the pool checks run). `python -m gtui validate FILE` "
            "timed from spawn to exit, its output (every job) to a pipe. Floor: the same "
            "interpreter importing gtui's CLI and queue-file modules and exiting. In process: "
            "one `load_queue` (scan, parse, checks, expansion). "
            f"{repeats} repeats, median (min-max)."
        ),
    )
    section.rows = [
        Row(
            f"`gtui validate` of a {jobs:,}-job queue file",
            "<= 1 s",
            f"{median(cli):.2f} s",
            f"python + import gtui {median(floor):.2f} s; load_queue in process "
            f"{median(loads):.2f} s",
            median(cli) <= 1.0,
        )
    ]
    section.figures = {
        "jobs": jobs,
        "file KiB": round(size_kb),
        "gtui validate s": spread(cli),
        "interpreter + imports s": spread(floor),
        "load_queue in process s": spread(loads),
    }
    return section


if __name__ == "__main__":
    s = run(quick="--quick" in sys.argv)
    for row in s.rows:
        print(row)
    print(s.figures)
