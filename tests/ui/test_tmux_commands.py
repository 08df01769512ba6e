"""Commands from a second shell while the dashboard runs in a real tmux.

The dashboard used to freeze for good after the first `gtui add` / `gtui kill` from another
shell: the job table never changed again while the scheduler went on. The user's view is the
pane, so the pane is what is checked: each command's effect must show up on it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from gtui.core import tmux
from gtui.core.paths import queue_paths
from tests.conftest import gtui, write_queue
from tests.tmux_helpers import PY, job_state, outer, wait_screen_match
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.usefixtures("tmux_server"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

# A command's effect should show "within 2 s"; the deadline is generous so that a loaded machine does not
# fail the test, and the time measured is printed (pytest -s) to compare with the 2 s.
SHOWS_WITHIN_S = 10.0

QUEUE = """
[settings]
poll = "30s"  # few events of its own: a command's event meets an empty buffer
kill_grace = "1s"

[[jobs]]
name = "long"
cmd = "while [ ! -e release ]; do sleep 0.05; done"
gpus = 1
mem = "10G"
"""


def shown_within(target: str, pattern: str, since: float) -> float:
    """Seconds from ``since`` (the command's start) until ``pattern`` shows on the pane; fails
    when it has not shown SHOWS_WITHIN_S after the command returned."""
    wait_screen_match(target, pattern, timeout=SHOWS_WITHIN_S)
    return time.monotonic() - since


@pytest.mark.slow
def test_add_and_kill_from_another_shell_show_on_the_dashboard(tmp_path: Path) -> None:
    queue = write_queue(tmp_path, QUEUE)
    outer(tmp_path, "term", f"{PY} -m gtui q.toml --fake-gpus 2x80G")
    try:
        name = queue_paths(queue).tmux_session
        wait_for(lambda: tmux.has_session(name), what=f"the {name} session")
        target = f"={name}:"
        wait_for(lambda: job_state(queue, "long") == "running", what="long running")
        wait_screen_match(target, r"long\s+running")

        t0 = time.monotonic()
        r = gtui(
            "add", str(queue), "--name", "added", "--gpus", "0", "--",
            "while [ ! -e release ]; do sleep 0.05; done",
            cwd=tmp_path,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        added_s = shown_within(target, r"added\s+(queued|running)", t0)

        t0 = time.monotonic()
        r = gtui("kill", str(queue), "long")
        assert r.returncode == 0, r.stderr
        killed_s = shown_within(target, r"long\s+killed", t0)

        # Still following after both: the added job's end shows too.
        wait_for(lambda: job_state(queue, "added") == "running", what="added running")
        t0 = time.monotonic()
        (tmp_path / "release").touch()
        # Done, it folds (E shows it): the title counts it, the header too.
        done_s = shown_within(target, r"1 done folded \(E shows\)", t0)
        print(
            f"\nshown on the dashboard, counted from the command's start: add {added_s:.2f} s, "
            f"kill {killed_s:.2f} s, the added job's end {done_s:.2f} s"
        )
    finally:
        (tmp_path / "release").touch()  # no job outlives the test
