"""`gtui pause` on a queue run headless: the scheduler stays once its running jobs
end, so the later `gtui resume` finds it and the queue goes on; `gtui run` exits only when no
job can ever start again."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import gtui, write_queue
from tests.reliability.live import start_live

QUEUE = """
[settings]
max_parallel = 1

[[jobs]]
name = "a"
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"

[[jobs]]
name = "b"
gpus = 0
cmd = "echo run >> b.runs"
"""


def test_a_paused_headless_queue_waits_for_resume(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    live = start_live("run", str(q))
    proc = live.proc
    try:
        live.wait_for("start a")
        paused = gtui("pause", str(q))
        assert (paused.returncode, paused.stderr) == (0, ""), paused.stderr  # reached it live
        live.wait_for("queue paused: no new starts")
        (tmp_path / "release").touch()
        live.wait_for("done a")
        # The scheduler is still there: the resume reaches it (no "no scheduler runs" note),
        # and b, which waited for the resume, runs.
        resumed = gtui("resume", str(q))
        assert (resumed.returncode, resumed.stderr) == (0, ""), resumed.stderr
        live.wait_for("done b")
        out = live.finish(60)
    finally:
        (tmp_path / "release").touch()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert (tmp_path / "b.runs").read_text() == "run\n"
