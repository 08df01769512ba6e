"""gtui from Python: add jobs to a queue, wait for them, read a log, kill one.

    python examples/api.py QUEUE.toml   # a queue a scheduler runs (`gtui run --stay QUEUE.toml`)
    python examples/api.py              # a sample queue on simulated GPUs, in a temporary
                                        # folder, with its own headless `gtui run`, stopped after

The same code runs in a notebook (examples/api.ipynb). Every function takes the queue file's
path and talks to the scheduler that runs it (or to its saved state when none does): see
``help(gtui)``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gtui

SAMPLE = """\
[settings]
fake_gpus = "2x80G"   # simulated GPUs: runs on any machine
poll = "0.2s"
kill_grace = "1s"
"""


def tour(queue: Path) -> None:
    """What a script does with a queue: every call goes to its scheduler."""
    hello = gtui.add(queue, "echo hello from gtui", name="hello", gpus=0)
    slow = gtui.add(queue, "sleep 300", name="slow", gpus=1, mem="10G")
    print("added:", hello, slow)

    print("ended:", gtui.wait(queue, hello, timeout=60))  # {'hello': 'done'}
    print("log of hello:", gtui.log(queue, hello).strip())

    jobs = gtui.status(queue)["jobs"]
    print("states:", {job["name"]: job["state"] for job in jobs})

    print("killed:", gtui.kill(queue, slow))
    print("ended:", gtui.wait(queue, slow, timeout=60))  # {'slow': 'killed'}


def sample_queue(folder: Path) -> Path:
    """A queue file with no jobs yet, on simulated GPUs."""
    queue = folder / "api-demo.toml"
    queue.write_text(SAMPLE)
    return queue


def start_scheduler(queue: Path) -> subprocess.Popen[bytes]:
    """A headless ``gtui run --stay`` (it serves until stopped), once it answers."""
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "gtui", "run", "--stay", str(queue)],
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not gtui.status(queue)["scheduler"]["running"]:
        if scheduler.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"gtui run {queue} did not start")
        time.sleep(0.1)
    return scheduler


def main(argv: list[str]) -> int:
    if argv:
        tour(Path(argv[0]))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        queue = sample_queue(Path(folder))
        scheduler = start_scheduler(queue)
        try:
            tour(queue)
        finally:
            gtui.stop(queue)
            scheduler.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
