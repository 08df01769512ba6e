"""Editing the command of a running job that has no `name`. Its name is made from
its command, so the edit looks like a new job beside it; it must never start a second copy. The
edit applies from the job's next attempt: done if the running one succeeds, run if it fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import jobs_of, write_queue
from tests.reliability.live import start_live

CMD = "echo run >> runs.txt; while [ ! -e release ]; do sleep 0.05; done; exit $(cat code)"


def _jobs(q: Path) -> dict[str, dict[str, object]]:
    return jobs_of(q)


@pytest.mark.parametrize(("code", "runs", "end"), [(0, 1, "done"), (3, 2, "done")])
def test_editing_a_running_unnamed_job_never_starts_a_second_copy(
    tmp_path: Path, code: int, runs: int, end: str
) -> None:
    (tmp_path / "code").write_text(f"{code}\n")
    q = write_queue(tmp_path, f'[[jobs]]\ngpus = 0\ncmd = "{CMD}"\n')
    live = start_live("run", str(q))
    proc = live.proc
    try:
        live.wait_for("] start ")
        (old,) = _jobs(q)
        # The user edits the command (an editor's atomic save).
        edited = tmp_path / ".q.toml.new"
        edited.write_text('[[jobs]]\ngpus = 0\ncmd = "echo run >> runs.txt; exit 0"\n')
        edited.replace(q)
        live.wait_for("reloaded q.toml")
        jobs = _jobs(q)
        (new,) = (n for n in jobs if n != old)
        assert jobs[new]["state"] == "held", jobs
        assert f"edit of {old}" in str(jobs[new]["reason"])
        assert jobs[old]["state"] == "running"
        assert (tmp_path / "runs.txt").read_text().count("run") == 1
        (tmp_path / "release").touch()
        out = live.finish(60)
    finally:
        (tmp_path / "release").touch()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert (tmp_path / "runs.txt").read_text().count("run") == runs, out
    assert _jobs(q)[new]["state"] == end
