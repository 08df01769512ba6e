"""In a real tmux at 80x24: with many done jobs before them, the running and waiting jobs are on
the screen (the done ones folded, E shows them), and sweep members read their parameters.

Each test runs on its own tmux server (the ``tmux_server`` fixture of tests/conftest.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import psutil
import pytest

from tests.conftest import write_queue
from tests.tmux_helpers import PY, capture, job_states, keys, outer, wait_screen
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
    pytest.mark.usefixtures("tmux_server"),
]

DONE = [f"prep-shard{i}" for i in range(1, 19)]
QUEUE = f"""
[settings]
poll = "0.3s"
kill_grace = "1s"

[[jobs]]
name = "prep-shard{{i}}"
matrix = {{ i = {list(range(1, 19))} }}
gpus = 0
cmd = "true"

[[jobs]]
name = "sweep-resnet50-imagenet-lr{{lr}}-bs32"
matrix = {{ lr = ["0.1", "0.01"] }}
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"

[[jobs]]
name = "evaluate"
gpus = 0
after = ["sweep-resnet50-imagenet-lr{{lr}}-bs32"]
cmd = "true"
"""


def table_rows(screen: str) -> list[str]:
    """The queue table's rows: a state glyph after the cursor column."""
    return [line for line in screen.splitlines() if line[3:5] in ("▶ ", "· ", "✓ ", "✗ ")]


@pytest.mark.slow
def test_at_80x24_the_running_jobs_are_in_view_with_many_done_jobs(tmp_path: Path) -> None:
    queue = write_queue(tmp_path, QUEUE)
    try:
        outer(tmp_path, "term", f"{PY} -m gtui --no-tmux --fake-gpus 1x80G q.toml", size=(80, 24))
        target = "=term:"

        def done_and_running() -> bool:
            states = job_states(queue)  # one look for all of them
            return all(states.get(n) == "done" for n in DONE) and (
                states.get("sweep-resnet50-imagenet-lr0.01-bs32") == "running"
            )

        wait_for(done_and_running, what="the done jobs, and the sweep running")

        def live_in_view(screen: str) -> bool:
            rows = table_rows(screen)
            running = [r for r in rows if "running" in r]
            return (
                len(running) == 2
                and "lr0.1-bs32" in running[0]
                and "lr0.01-bs32" in running[1]
                and any("evaluate" in r and "queued" in r for r in rows)
            )

        # As it opens, no key pressed: what runs and waits is on screen (the job under the
        # cursor, done meanwhile, may stay above them: its log is the one shown).
        wait_for(lambda: live_in_view(capture(target)), what="the running and waiting jobs")
        keys(target, "End")  # the cursor off the done job it started on: that one folds too
        screen = wait_screen(target, "18 done folded (E shows)")
        assert live_in_view(screen), screen
        assert not any("prep-shard" in r for r in table_rows(screen)), screen
        assert all(len(line) <= 80 for line in screen.splitlines())

        keys(target, "E")  # the done jobs, in their place in the queue
        screen = wait_screen(target, "prep-shard18 ")
        assert "done folded" not in screen
        keys(target, "E")
        wait_screen(target, "18 done folded (E shows)")
    finally:
        (tmp_path / "release").touch()
        for p in psutil.process_iter():
            try:
                if p.environ().get("GTUI_QUEUE") == str(queue.resolve()):
                    p.kill()
            except (psutil.Error, OSError):
                pass
