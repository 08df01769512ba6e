"""Commands take a group's name: pause, resume, kill and retry act on its jobs, and
``status --group`` shows only them (run as the real command line, with no scheduler: the
saved state)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import gtui, write_queue

QUEUE = """
[settings]
fake_gpus = "1x80G"
[groups.sweep]
max_parallel = 1
[[jobs]]
name = "sweep-{i}"
gpus = 0
cmd = "true"
matrix = { i = [1, 2] }
[[jobs]]
name = "tagged"
group = "side"
gpus = 0
cmd = "true"
[[jobs]]
name = "alone"
gpus = 0
cmd = "true"
"""


def states(q: Path, *more: str) -> dict[str, str]:
    r = gtui("status", str(q), "--json", *more)
    assert r.returncode == 0, r.stderr
    return {j["name"]: j["state"] for j in json.loads(r.stdout)["jobs"]}


def test_pause_resume_kill_retry_and_status_take_a_groups_name(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    r = gtui("pause", str(q), "sweep")
    assert r.returncode == 0, r.stderr
    assert "sweep: 2 jobs (sweep-1, sweep-2)" in r.stderr
    assert states(q) == {
        "sweep-1": "held",
        "sweep-2": "held",
        "tagged": "queued",
        "alone": "queued",
    }
    assert states(q, "--group", "sweep") == {"sweep-1": "held", "sweep-2": "held"}
    assert gtui("resume", str(q), "sweep").returncode == 0
    assert gtui("kill", str(q), "side").returncode == 0
    assert states(q, "--group", "side") == {"tagged": "killed"}
    assert gtui("retry", str(q), "side").returncode == 0
    assert states(q) == {
        "sweep-1": "queued", "sweep-2": "queued", "tagged": "queued", "alone": "queued",
    }  # fmt: skip
    r = gtui("status", str(q), "--group", "swep")
    assert r.returncode == 2 and "no group named 'swep'" in r.stderr and "`sweep`" in r.stderr
