"""``gtui wait`` against a real headless scheduler, and with none running."""

from __future__ import annotations

from pathlib import Path

from tests.cli_helpers import (
    FAKE,
    Procs,
    final_state,
    gate,
    gtui,
    live_state,
    release,
)
from tests.conftest import write_queue
from tests.waiting import wait_for


def queue(tmp: Path) -> Path:
    return write_queue(
        tmp,
        f"""
        [settings]
        poll = "0.2s"

        [[jobs]]
        name = "slow"
        gpus = 0
        cmd = "{gate("slow")}"

        [[jobs]]
        name = "bad"
        gpus = 0
        cmd = "echo boom; exit 3"

        [[jobs]]
        name = "child"
        gpus = 0
        after = ["bad"]
        cmd = "true"

        [[jobs]]
        name = "sweep"
        gpus = 0
        matrix = {{ lr = [1, 2] }}
        cmd = "echo {{lr}}"
        """,
    )


def test_wait_for_the_whole_queue_names_each_job_not_done(tmp_path: Path, procs: Procs) -> None:
    q = queue(tmp_path)
    procs.scheduler(q)
    w = procs.start("wait", str(q))
    wait_for(lambda: live_state(q, "child") == "blocked", what="child blocked by bad")
    wait_for(lambda: final_state(q, "sweep-lr=2") == "done", what="the sweep done")
    assert w.proc.poll() is None  # `slow` still runs: the wait goes on
    release(q, "slow")
    assert w.proc.wait(30) == 1
    lines = w.text().splitlines()
    assert "failed bad (exit 3): error: boom" in lines
    assert "blocked child: after bad (failed)" in lines
    assert lines[-1] == "wait: 5 jobs ended: 3 done, 1 failed, 1 blocked"
    assert not any(line.startswith(("done", "slow", "sweep")) for line in lines)


def test_wait_for_a_sweep_and_a_glob_ends_with_them(tmp_path: Path, procs: Procs) -> None:
    q = queue(tmp_path)
    procs.scheduler(q)
    w = procs.start("wait", str(q), "sweep")  # the matrix entry's base name
    assert w.proc.wait(30) == 0, w.text()
    assert "sweep: 2 jobs (sweep-lr=1, sweep-lr=2)" in w.text()
    assert live_state(q, "slow") == "running"  # not waited for
    r = gtui("wait", str(q), "sl*", "--timeout", "0.5s")
    assert r.returncode == 124
    assert "timed out after 0.5s: 1 job not ended: slow (running)" in r.stderr
    r = gtui("wait", str(q), "nothing-*")
    assert r.returncode == 2 and "nothing-* matches no job in q.toml" in r.stderr


def test_wait_with_no_scheduler_then_one_starts(tmp_path: Path, procs: Procs) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.2s"

        [[jobs]]
        name = "a"
        gpus = 0
        cmd = "true"
        """,
    )
    w = procs.start("wait", str(q), "a")
    w.wait_for("no scheduler runs q.toml; 1 job not ended: a (queued)")
    procs.track(q)
    assert gtui("run", str(q), "--fake-gpus", FAKE).returncode == 0
    assert w.proc.wait(30) == 0
    # Ended already, no scheduler: at once.
    r = gtui("wait", str(q))
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "wait: 1 job ended: 1 done\n")
