"""When a job that ended while no scheduler ran really ended (``status.ended_at``), from the
files it left: real files, their real mtimes."""

from __future__ import annotations

import os
from pathlib import Path

from gtui.core.model import JobRecord, JobState
from gtui.core.state.status import ended_at


def test_an_end_found_after_a_restart_is_timed_by_what_the_job_left(tmp_path: Path) -> None:
    """The status file is made at the launch: written, its mtime is the end; still empty (the
    wrapper was killed), its mtime is the launch's, and the log's last write is later."""
    status, log = tmp_path / "train.1.status", tmp_path / "train.1.log"
    status.write_text("")
    log.write_text("epoch 1\n")
    os.utime(status, (1000.0, 1000.0))  # the launch
    os.utime(log, (1500.0, 1500.0))  # its last output
    rec = JobRecord(name="train", state=JobState.RUNNING, attempt=1)
    rec.status_file, rec.log = str(status), str(log)
    assert ended_at(rec) == 1500.0
    status.write_text("exit 0\n")
    os.utime(status, (1600.0, 1600.0))
    assert ended_at(rec) == 1600.0
