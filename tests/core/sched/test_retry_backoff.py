"""`retries = -1` on a job that fails at once: it used to restart ~266 times a
second. Now its retries back off (at once, then 1 s doubling to 5 min, reset by a run over a
minute), its waiting reason gives the next try's time, and the user can stop it."""

from __future__ import annotations

import re
from pathlib import Path

from gtui import scripting
from tests.conftest import status_of, write_queue
from tests.reliability.live import start_live
from tests.waiting import wait_for


def _job(q: Path) -> dict[str, object]:
    (job,) = status_of(q)["jobs"]
    return dict(job)


def _runs(tmp_path: Path) -> int:
    p = tmp_path / "runs.txt"
    return len(p.read_text().splitlines()) if p.exists() else 0


def test_a_job_that_fails_at_once_backs_off_and_can_be_stopped(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        '[[jobs]]\nname = "flaky"\ngpus = 0\nretries = -1\ncmd = "echo run >> runs.txt; exit 1"\n',
    )
    live = start_live("run", str(q))
    proc = live.proc
    try:
        seen: dict[str, object] = {}

        def backing_off() -> bool:
            seen.update(_job(q))
            return bool(re.search(r"failed [3-9] times in a row", str(seen.get("reason"))))

        wait_for(backing_off, what="the back-off after 3 quick failures")
        reason = str(seen["reason"])
        assert re.match(r"retry at \d\d:\d\d:\d\d \(in \d+s\): failed \d times", reason), reason
        assert "kill or pause it to stop" in reason
        fails = int(re.search(r"failed (\d+) times", reason).group(1))  # type: ignore[union-attr]
        # Bounded: the runs so far are the failures counted, not hundreds.
        assert fails <= _runs(tmp_path) <= fails + 1
        # Asked in this process: a `gtui kill` subprocess takes seconds to start on a loaded
        # machine, time enough for a back-off to run out and the job to start once more.
        assert scripting.kill(q, "flaky") == ["flaky"]
        out = live.finish(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out
    assert _job(q)["state"] == "killed"
    assert _runs(tmp_path) <= fails + 1, out
