"""``gtui status`` as a person reads it (the text table, not ``--json``): from a running
``gtui run`` scheduler through its socket, then from the store once it has ended."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gtui.core.control.rpc import request
from tests.conftest import gtui, write_queue
from tests.waiting import wait_for as wait_until

QUEUE = """
[settings]
fake_gpus = "80G:8G@10"
poll = "0.1s"
kill_grace = "1s"

[[jobs]]
name = "ok"
gpus = 0
cmd = "true"

[[jobs]]
name = "bad"
gpus = 0
cmd = "echo 'RuntimeError: boom' >&2; exit 3"

[[jobs]]
name = "long-running-job"
mem = "60G"
cmd = "while [ ! -e release ]; do sleep 0.05; done"

[[jobs]]
name = "big"
mem = "60G"
cmd = "true"
"""




def live_states(q: Path) -> dict[str, tuple[str, str]]:
    """name -> (state, reason) as the running scheduler answers; {} before it answers."""
    reply = request(q, "status")
    if not reply or not reply.get("ok"):
        return {}
    return {j["name"]: (j["state"], j["reason"]) for j in reply["status"]["jobs"]}


def table(q: Path) -> tuple[list[str], dict[str, list[str]]]:
    """Run ``gtui status`` (text): its lines, and each job row split into its six columns."""
    out = gtui("status", str(q))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["name", "state"])
    rows = {}
    for line in lines[header + 1 :]:
        cells = line.split(None, 5)
        rows[cells[0]] = cells + [""] * (6 - len(cells))  # an empty note is no cell
    return lines, rows


def aligned(lines: list[str]) -> None:
    """Every row's state and try cells sit under their headings."""
    header = next(line for line in lines if line.split()[:2] == ["name", "state"])
    state_at, try_end = header.index("state"), header.index("try") + len("try")
    for line in lines[lines.index(header) + 1 :]:
        assert line[state_at - 2 : state_at] == "  " and line[state_at] != " ", (header, line)
        # A row with no note ends at its try cell (no trailing spaces).
        assert line[try_end - 1] != " " and line[try_end : try_end + 2] in ("  ", ""), (
            header,
            line,
        )


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    q = write_queue(tmp_path, QUEUE)
    with (tmp_path / "run.out").open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gtui", "run", str(q)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        yield proc
    finally:
        (tmp_path / "release").touch()
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def test_status_table_of_a_running_queue_then_of_the_store(
    tmp_path: Path, scheduler: subprocess.Popen[bytes]
) -> None:
    q = tmp_path / "q.toml"

    def settled() -> bool:
        assert scheduler.poll() is None, (tmp_path / "run.out").read_text()
        s = live_states(q)
        return (
            {n: st for n, (st, _) in s.items()}
            == {"ok": "done", "bad": "failed", "long-running-job": "running", "big": "queued"}
            and s["big"][1] != ""
        )

    wait_until(settled, what="done, failed, running and queued jobs")
    lines, rows = table(q)
    assert lines[0] == str(q)  # not paused: nothing after the path
    assert lines[1].startswith(f"scheduler: running, pid {scheduler.pid}, since ")
    assert lines[2] == "  GPU 0 Fake A800 80G: 68G/80G, util 90%"  # 8G others' + 60G ours
    assert lines[3].split() == ["name", "state", "gpu", "mem", "try", "note"]
    assert list(rows) == ["ok", "bad", "long-running-job", "big"]  # queue order
    assert rows["ok"] == ["ok", "done", "-", "-", "1", ""]
    assert rows["bad"] == ["bad", "failed", "-", "-", "1", "runtime_error: RuntimeError: boom"]
    assert rows["long-running-job"][:5] == ["long-running-job", "running", "0", "60G", "1"]
    assert re.fullmatch(r"\d+:\d\d", rows["long-running-job"][5]), rows  # running for m:ss
    assert rows["big"][:5] == ["big", "queued", "-", "60G", "0"]
    assert re.fullmatch(
        r"needs 1 GPU with 60G: none eligible \(GPU0 ours\) \(\d+s ago\)", rows["big"][5]
    ), rows["big"]
    aligned(lines)

    (tmp_path / "release").touch()
    assert scheduler.wait(60) == 1  # bad failed
    assert request(q, "ping") is None  # no scheduler now: the table comes from the store
    lines, rows = table(q)
    assert lines[0] == str(q)
    assert lines[1].startswith(f"scheduler: not running (the last one, pid {scheduler.pid}, ")
    assert lines[2] == "  GPU 0 Fake A800 80G: 8G/80G, util 10%"  # the last reading, saved
    assert rows["ok"] == ["ok", "done", "-", "-", "1", ""]
    assert rows["bad"] == ["bad", "failed", "-", "-", "1", "runtime_error: RuntimeError: boom"]
    assert rows["long-running-job"] == ["long-running-job", "done", "0", "60G", "1", ""]
    assert rows["big"] == ["big", "done", "0", "60G", "1", ""]
    aligned(lines)


def test_status_table_says_the_queue_is_paused(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    assert gtui("pause", str(q)).returncode == 0  # the queue, with no scheduler
    lines, rows = table(q)
    assert lines[0] == f"{q}  (queue paused)"
    assert rows["big"][:5] == ["big", "queued", "-", "60G", "0"]


def test_status_with_no_scheduler_shows_what_really_happened(tmp_path: Path) -> None:
    """The scheduler stopped (SIGTERM: its jobs go on), then a job ended. The table
    says no scheduler runs and since when, shows the ended job as done (from its exit-status
    file, as the next scheduler will record it), and keeps the waiting job's last reason with
    its age."""
    q = write_queue(
        tmp_path,
        """
        [settings]
        fake_gpus = "80G"

        [[jobs]]
        name = "a"
        mem = "60G"
        cmd = "while [ ! -e release ]; do sleep 0.05; done"

        [[jobs]]
        name = "big"
        mem = "60G"
        cmd = "true"
        """,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "gtui", "run", str(q)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: live_states(q).get("big", ("", ""))[1] != "", what="big to wait, with a reason"
        )
        proc.terminate()
        assert proc.wait(30) == 130  # stopped by a signal: interrupted, no job failed
        (tmp_path / "release").touch()
        status_file = tmp_path / ".gtui" / "q.run" / "a.1.status"
        wait_until(lambda: status_file.exists() and status_file.stat().st_size > 0, what="a's end")
    finally:
        (tmp_path / "release").touch()
        if proc.poll() is None:
            proc.kill()
    lines, rows = table(q)
    assert lines[1].startswith(f"scheduler: not running (the last one, pid {proc.pid}, stopped ")
    assert rows["a"][:2] == ["a", "done"], rows["a"]
    assert "ended while no scheduler ran; recorded when one starts" in rows["a"][5]
    assert rows["big"][:2] == ["big", "queued"]
    assert re.fullmatch(r"needs 1 GPU with 60G: .* \(\d+s ago\)", rows["big"][5]), rows["big"]


def test_status_with_jobs_waiting_and_no_scheduler_says_how_to_start_one(tmp_path: Path) -> None:
    """Jobs wait and nobody runs the queue (a dashboard left, a `gtui run` stopped): the line
    under the scheduler's says how to start one. Not while one runs, nor with nothing left."""
    q = write_queue(tmp_path, '[[jobs]]\nname = "a"\ngpus = 0\ncmd = "true"\n')
    hint = "no scheduler runs: `gtui run q.toml` (or `gtui q.toml`) starts one"
    assert gtui("run", str(q)).returncode == 0
    lines, rows = table(q)
    assert rows["a"][1] == "done" and hint not in lines, lines
    assert gtui("add", str(q), "--name", "b", "--gpus", "0", "--", "true").returncode == 0
    lines, rows = table(q)
    assert rows["b"][1] == "queued" and lines[2] == hint, lines
