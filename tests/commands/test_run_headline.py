"""``gtui run``'s first line counts the jobs from the states, without making every job's view
(at 100,000 jobs that was 0.5 s before the first start): the count is still every job."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import gtui, write_queue


def test_the_headline_counts_every_job(tmp_path: Path) -> None:
    body = "".join(f'[[jobs]]\nname = "j{i}"\ncmd = "true"\ngpus = 0\n\n' for i in range(3))
    q = write_queue(tmp_path, body)
    first = gtui("run", str(q), "--fake-gpus", "1x80G", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "(3 jobs: 3 queued" in first.stdout.splitlines()[0]
    again = gtui("run", str(q), "--fake-gpus", "1x80G", cwd=tmp_path)  # all done: ended ones
    assert "(3 jobs: 3 done" in again.stdout.splitlines()[0], again.stdout
