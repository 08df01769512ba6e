"""A job that ends while no scheduler runs, on a full disk, leaves an empty exit-status file.
The next scheduler must call it "unknown" (with its log's last line), never
"failed", and never run it again on its own; `retry` runs it again when the user says so."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.conftest import gtui, jobs_of, write_queue
from tests.reliability.helpers import start_run, wait_for

QUEUE = """
[settings]
retries = 3

[[jobs]]
name = "a"
gpus = 0
cmd = "echo run >> a.runs; echo 'epoch 9 saved'; while [ ! -e release ]; do sleep 0.05; done"

[[jobs]]
name = "after-a"
gpus = 0
after = ["a"]
cmd = "echo run >> b.runs"
"""


def _jobs(q: Path) -> dict[str, dict[str, object]]:
    return jobs_of(q)


def _runs(tmp_path: Path, name: str) -> int:
    p = tmp_path / f"{name}.runs"
    return len(p.read_text().splitlines()) if p.exists() else 0


def test_an_empty_status_file_means_unknown_never_failed_never_rerun(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    first = start_run(q)
    wait_for(lambda: _runs(tmp_path, "a") == 1, what="a to start")
    wait_for(lambda: _jobs(q)["a"].get("state") == "running", what="a recorded as running")
    first.send_signal(signal.SIGKILL)  # the scheduler dies; a goes on alone
    first.wait(30)
    (tmp_path / "release").touch()
    status_file = tmp_path / ".gtui" / "q.run" / "a.1.status"
    wait_for(status_file.exists, what="a to end and its wrapper to write its status")
    wait_for(lambda: status_file.stat().st_size > 0, what="the status to be written")
    ended = status_file.stat().st_mtime
    # What a full disk leaves: the file was created, its content never written.
    os.truncate(status_file, 0)
    os.utime(status_file, (ended, ended))
    second = gtui("run", str(q), timeout=60)
    assert "Traceback" not in second.stdout + second.stderr
    jobs = _jobs(q)
    a = jobs["a"]
    assert a["state"] == "unknown", second.stdout
    diag = a["diagnosis"]
    assert isinstance(diag, dict) and diag["kind"] == "unknown"
    assert "exit-status file is empty" in str(diag["line"])
    assert "epoch 9 saved" in str(diag["line"])  # the log's last line, to judge by
    assert _runs(tmp_path, "a") == 1, "an unknown end must not be retried silently"
    assert jobs["after-a"]["state"] == "blocked"  # `after = a` is not met by an unknown end
    # Its end time is when it ended, not when the second scheduler noticed.
    assert abs(float(a["ended_at"]) - ended) < 1.0  # type: ignore[arg-type]
    assert "unknown a" in second.stdout
    # The user decides: retry runs it (and its dependent) again.
    (tmp_path / "release").touch()
    assert gtui("retry", str(q), "a").returncode == 0
    again = gtui("run", str(q), timeout=60)
    assert again.returncode == 0, again.stdout + again.stderr
    assert _runs(tmp_path, "a") == 2 and _runs(tmp_path, "b") == 1
