"""Commands given while no scheduler runs leave cluster jobs as last recorded.

A job that runs on a Ray node is seen by that node's agent only: the local executor of a
command given with no scheduler (``gtui status / pause / kill``) cannot tell whether it still
runs, so it must neither record it ended (``unknown``) nor put it back in the queue; the next
``gtui run`` re-adopts it. ``kill / pause / resume`` of such a running job are refused with a
sentence that says to start the scheduler; the waiting jobs still take every command.

No Ray here: the state is made as the audit made it. A real headless ``gtui run`` starts the
job on this machine and is SIGKILLed; the job is killed here too (nothing on this machine
answers for it any more, as for a job on another server), and its record is rewritten as a
Ray scheduler leaves one: on ``node2`` with a pid not alive here, or (a crash between the
start's intent and the launch) with no pid at all on a queue that runs on a cluster.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gtui.core.model import JobRecord
from gtui.core.paths import queue_paths
from gtui.core.state.lock import QueueLock
from gtui.core.state.store import Store
from tests.commands.test_cli_control import Scheduler, alive, records, running_tree, wait_until
from tests.conftest import gtui, write_queue

QUEUE = """
[settings]
poll = "0.2s"
kill_grace = "1s"

[[jobs]]
name = "remote"
cmd = "sleep 60 & wait"
gpus = 1
mem = "10G"

[[jobs]]
name = "next"
cmd = "true"
gpus = 1
after = ["remote"]
"""


def dead_pid() -> int:
    """The pid of a process that has ended (its create time differs from the record's, too)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.fixture
def orphaned(tmp_path: Path) -> Iterator[tuple[Path, JobRecord]]:
    """A queue whose scheduler was SIGKILLed while ``remote`` ran, the job gone from here."""
    q = write_queue(tmp_path, QUEUE)
    s = Scheduler(q)
    procs = []
    try:
        procs = running_tree(q, "remote")
        with Store(queue_paths(q).db, readonly=True) as store:
            assert store.get_meta("backend") == "local"  # what the last scheduler ran on
        s.proc.send_signal(signal.SIGKILL)
        s.proc.wait(10)
        wait_until(lambda: QueueLock(q).holder() is None, what="the lock freed by the kernel")
        for p in procs:
            p.kill()
        wait_until(lambda: not any(alive(p) for p in procs), what="the job gone from here")
        rec = records(q)["remote"]
        assert rec.state.value == "running" and rec.status_file
        Path(rec.status_file).unlink(missing_ok=True)  # its exit status is on the node
        yield q, rec
    finally:
        s.stop()
        for p in procs:
            if alive(p):
                p.kill()


def save(q: Path, rec: JobRecord, **meta: str) -> None:
    with Store(queue_paths(q).db) as store:
        store.save(rec)
        for key, value in meta.items():
            store.set_meta(key, value)


def status_json(q: Path) -> dict[str, dict[str, Any]]:
    r = gtui("status", str(q), "--json")
    assert r.returncode == 0, r.stderr
    return {j["name"]: j for j in json.loads(r.stdout)["jobs"]}


def refused(r: subprocess.CompletedProcess[str], q: Path) -> None:
    """Exit 2 (docs/cli.md: the command cannot be done as given), one line naming the remedy."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "remote" in lines[0] and f"gtui run {q}" in lines[0], lines[0]


def still_running(q: Path, rec: JobRecord) -> None:
    """The saved record is the one the cluster's scheduler left, untouched."""
    now = records(q)["remote"]
    assert now.state.value == "running"
    for key in ("node", "pid", "create_time", "attempt", "token", "gpus"):
        assert getattr(now, key) == getattr(rec, key), key
    assert now.diagnosis is None and now.exit_code is None and now.ended_at is None


def test_a_job_on_a_node_is_shown_and_kept_running_with_no_scheduler(
    orphaned: tuple[Path, JobRecord],
) -> None:
    q, rec = orphaned
    rec.node = "node2"
    rec.pid = dead_pid()
    save(q, rec)

    jobs = status_json(q)
    remote = jobs["remote"]
    assert (remote["state"], remote["node"], remote["diagnosis"]) == ("running", "node2", None)
    assert any("cluster" in w for w in remote["warnings"]), remote["warnings"]
    assert jobs["next"]["state"] == "queued"
    r = gtui("status", str(q))
    assert r.returncode == 0, r.stderr
    row = next(ln for ln in r.stdout.splitlines() if ln.split()[:1] == ["remote"])
    assert " running " in row and "node2:" in row and "unknown" not in row, row

    # Touching the running job needs the cluster's scheduler: refused, nothing changed.
    refused(gtui("pause", str(q), "remote"), q)
    refused(gtui("kill", str(q), "remote"), q)
    refused(gtui("pause", str(q), "next", "remote"), q)
    assert records(q)["next"].state.value == "queued"  # all refused: nothing done
    still_running(q, rec)

    # The waiting job still takes every command, and the running one stays as it was.
    r = gtui("pause", str(q), "next")
    assert (r.returncode, r.stdout) == (0, "paused next\n"), r.stderr
    assert records(q)["next"].state.value == "held"
    r = gtui("resume", str(q), "next")
    assert (r.returncode, r.stdout) == (0, "resumed next\n"), r.stderr
    r = gtui("kill", str(q), "next")
    assert (r.returncode, r.stdout) == (0, "killed next\n"), r.stderr
    assert records(q)["next"].state.value == "killed"
    r = gtui("pause", str(q))
    assert (r.returncode, r.stdout) == (0, "paused the queue\n"), r.stderr
    still_running(q, rec)
    assert status_json(q)["remote"]["state"] == "running"


@pytest.mark.parametrize("known_by", ["file", "meta"])
def test_a_cluster_start_cut_short_is_not_put_back_with_no_scheduler(
    orphaned: tuple[Path, JobRecord], known_by: str
) -> None:
    """The scheduler died between committing a start and hearing back from the node: no pid,
    no node. Only the queue (its [cluster] section, or the backend the last scheduler ran on)
    says that the job may be running on a node; a local look finding nothing must not requeue
    it, or the next scheduler would start it twice."""
    q, rec = orphaned
    rec.pid = rec.create_time = rec.log = None
    rec.node = None
    if known_by == "file":
        save(q, rec)
        with q.open("a") as f:
            f.write('\n[cluster]\nbackend = "ray"\n')
    else:  # `gtui run --backend ray` on a file with no [cluster] section
        save(q, rec, backend="ray")

    r = gtui("pause", str(q), "next")
    assert (r.returncode, r.stdout) == (0, "paused next\n"), r.stderr
    still_running(q, rec)
    remote = status_json(q)["remote"]
    assert remote["state"] == "running" and remote["attempt"] == 1, remote
    assert any("cluster" in w for w in remote["warnings"]), remote["warnings"]
    refused(gtui("kill", str(q), "remote"), q)
    still_running(q, rec)
