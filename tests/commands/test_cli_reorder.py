"""``gtui move``, ``gtui rm`` and ``gtui clean``: the queue file keeps its
layout, a running scheduler takes the change at once, and history is kept."""

from __future__ import annotations

import shutil
from pathlib import Path

from gtui.core.queue.writeback import move_job
from tests.cli_helpers import (
    FAKE,
    Procs,
    final_state,
    gate,
    gtui,
    live_order,
    live_state,
    release,
)
from tests.conftest import write_queue
from tests.waiting import wait_for


def serial_queue(tmp: Path) -> Path:
    """One job at a time: `first` runs (until released), the others wait in file order."""
    return write_queue(
        tmp,
        f"""
        # a serial queue
        [settings]
        poll = "0.2s"
        max_parallel = 1

        [[jobs]]
        name = "first"
        gpus = 0
        cmd = "{gate("first")}"

        # --- the rest ---

        # x: the first of the rest
        [[jobs]]
        name = "x"
        gpus = 0
        cmd = "echo x >> order"

        [[jobs]]
        name = "y"   # why y
        gpus = 0
        cmd = "echo y >> order"

        [[jobs]]
        name = "sw"
        gpus = 0
        matrix = {{ k = [1, 2] }}
        cmd = "echo sw{{k}} >> order"
        """,
    )


def test_move_reorders_the_file_and_the_running_scheduler_at_once(
    tmp_path: Path, procs: Procs
) -> None:
    q = serial_queue(tmp_path)
    sched = procs.scheduler(q)
    wait_for(lambda: live_state(q, "first") == "running", what="first running")

    # --top is the dashboard's `t`, byte for byte.
    expected = tmp_path / "expected.toml"
    shutil.copy(q, expected)
    move_job(expected, "sw-k=2", "top")
    r = gtui("move", str(q), "sw-k=2", "--top")
    assert (r.returncode, r.stdout) == (
        0,
        "moved sw-k=2 (and 1 more of its matrix) to the top of q.toml\n",
    ), r.stderr
    assert q.read_text() == expected.read_text()
    # Taken at once: the scheduler's order is the new one as soon as the command returns.
    assert live_order(q) == ["sw-k=1", "sw-k=2", "first", "x", "y"]

    r = gtui("move", str(q), "x", "--after", "y")
    assert r.returncode == 0, r.stderr
    assert live_order(q) == ["sw-k=1", "sw-k=2", "first", "y", "x"]
    text = q.read_text()
    assert text.index('name = "y"   # why y') < text.index("# x: the first of the rest")
    assert text.startswith("# a serial queue\n[settings]")
    assert "# --- the rest ---" in text
    r = gtui("move", str(q), "sw", "--bottom")  # a sweep by its base name
    assert r.returncode == 0, r.stderr
    assert live_order(q) == ["first", "y", "x", "sw-k=1", "sw-k=2"]
    r = gtui("move", str(q), "y", "--before", "first")
    assert live_order(q) == ["y", "first", "x", "sw-k=1", "sw-k=2"]

    r = gtui("move", str(q), "first", "--top")
    assert r.returncode == 2
    assert "first is running: only waiting (queued or held) jobs can be moved" in r.stderr
    r = gtui("move", str(q), "sw-k=1", "--after", "sw-k=2")
    assert r.returncode == 2 and "same matrix entry" in r.stderr

    release(q, "first")
    sched.live.wait_for("finished")
    assert (tmp_path / "order").read_text().split() == ["y", "x", "sw1", "sw2"]


def test_move_with_no_scheduler_is_taken_by_the_next_one(tmp_path: Path, procs: Procs) -> None:
    q = serial_queue(tmp_path)
    procs.track(q)
    (tmp_path / "release-first").touch()
    r = gtui("move", str(q), "y", "--top")
    assert r.returncode == 0, r.stderr
    assert gtui("run", str(q), "--fake-gpus", FAKE).returncode == 0
    assert (tmp_path / "order").read_text().split() == ["y", "x", "sw1", "sw2"]


def test_rm_refuses_a_running_job_and_keeps_history(tmp_path: Path, procs: Procs) -> None:
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.2s"

        [[jobs]]
        name = "quick"
        gpus = 0
        cmd = "echo run >> quick.runs"

        [[jobs]]
        name = "long"
        gpus = 0
        cmd = "{gate("long")}"

        [[jobs]]
        name = "held"
        gpus = 0
        after = ["long"]
        cmd = "true"

        [[jobs]]
        name = "lr"
        gpus = 0
        after = ["long"]
        matrix = {{ v = [1, 2, 3] }}
        cmd = "true"
        """,
    )
    original = q.read_text()
    procs.scheduler(q)
    wait_for(lambda: final_state(q, "quick") == "done", what="quick done")
    wait_for(lambda: live_state(q, "long") == "running", what="long running")

    r = gtui("rm", str(q), "long")
    assert r.returncode == 2
    assert "long is running: a running job is not removed; kill it first" in r.stderr
    assert f"`gtui kill {q.name} long`" in r.stderr
    r = gtui("rm", str(q), "quick", "held", "lr-v=1", "lr-v=3")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "removed 4 jobs from q.toml: quick, held, lr-v=1, lr-v=3\n"
    assert [n for n in live_order(q)] == ["long", "lr-v=2"]
    assert "matrix = { v = [2] }" in q.read_text()
    r = gtui("rm", str(q), "l*")  # the running job a pattern matches is skipped
    assert r.returncode == 0, r.stderr
    assert "skipped 1 running job (long)" in r.stderr
    assert r.stdout == "removed 1 job from q.toml: lr-v=2\n"
    assert live_order(q) == ["long"]

    # Put back as it was: the done job is done, not run again.
    q.write_text(original)
    assert gtui("add", str(q), "--name", "poke", "--gpus", "0", "--", "true").returncode == 0
    wait_for(lambda: final_state(q, "poke") == "done", what="poke done")
    assert live_state(q, "quick") == "done"
    assert (tmp_path / "quick.runs").read_text() == "run\n"


def test_clean_removes_ended_jobs_in_one_go(tmp_path: Path, procs: Procs) -> None:
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.2s"

        [[jobs]]
        name = "prep"
        gpus = 0
        cmd = "true"

        [[jobs]]
        name = "bad"
        gpus = 0
        cmd = "exit 1"

        [[jobs]]
        name = "sweep"
        gpus = 0
        after = ["prep"]
        matrix = {{ a = [1, 2], b = [1, 2] }}
        cmd = "test {{a}}{{b}} != 22 || {gate("sweep")}"

        [[jobs]]
        name = "late"
        gpus = 0
        after = ["prep"]
        cmd = "{gate("late")}"

        [[jobs]]
        name = "keeper"  # keeps the scheduler running (it exits once all have ended)
        gpus = 0
        cmd = "{gate("keeper")}"
        """,
    )
    procs.scheduler(q)
    wait_for(lambda: live_state(q, "bad") == "failed", what="bad failed")
    wait_for(lambda: final_state(q, "sweep-a=2-b=1") == "done", what="three of the sweep done")
    r = gtui("clean", str(q))
    assert r.returncode == 0, r.stderr
    # prep: late waits for it; the sweep's done three: the fourth runs (a several-key matrix).
    assert r.stdout == "removed 0 done jobs from q.toml\n"
    assert "kept prep: " in r.stderr and "waits for it (after)" in r.stderr
    release(q, "sweep")
    release(q, "late")
    wait_for(lambda: final_state(q, "late") == "done", what="late done")
    wait_for(lambda: final_state(q, "sweep-a=2-b=2") == "done", what="the sweep done")
    r = gtui("clean", str(q))
    assert r.stdout.startswith("removed 6 done jobs from q.toml: prep, sweep-a=1-b=1"), r.stderr
    assert live_order(q) == ["bad", "keeper"]
    r = gtui("clean", str(q), "--failed")
    assert r.stdout == "removed 1 ended job from q.toml: bad\n"
    assert live_order(q) == ["keeper"]
    assert q.read_text().count("[[jobs]]") == 1


def test_rm_refusals_change_nothing(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "prep"
        gpus = 0
        cmd = "true"

        [[jobs]]
        name = "grid"
        gpus = 0
        after = ["prep"]
        matrix = { a = [1, 2], b = [1, 2] }
        cmd = "true"
        """,
    )
    before = q.read_text()
    r = gtui("rm", str(q), "prep")
    assert r.returncode == 2
    assert "prep cannot be removed: grid-a=1-b=1 waits for it (after)" in r.stderr
    assert "nothing was removed" in r.stderr
    r = gtui("rm", str(q), "grid-a=1-b=1")
    assert r.returncode == 2 and "one combination of the matrix (a, b)" in r.stderr
    r = gtui("rm", str(q), "nope*")
    assert r.returncode == 2 and "nope* matches no job in q.toml" in r.stderr
    assert q.read_text() == before
    r = gtui("rm", str(q), "grid", "prep")  # the whole matrix and what it waits for: together
    assert (
        r.stdout
        == "removed 5 jobs from q.toml: prep, grid-a=1-b=1, grid-a=1-b=2, grid-a=2-b=1, grid-a=2-b=2\n"
    )  # in queue order
    assert "[[jobs]]" not in q.read_text()
