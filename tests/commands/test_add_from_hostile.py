"""``gtui add --from`` when things go wrong around it: two shells adding at once, a scheduler
killed while it takes a batch, a full disk. Whatever happens, a batch lands whole or not at all,
each job once, and the client says which."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gtui.core.queue.queuefile import load_queue
from tests.cli_helpers import ONE_GATED_JOB, Procs, gate, gtui, release, status
from tests.conftest import write_queue
from tests.waiting import wait_for


def _add_from(q: Path, src: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gtui", "add", str(q), "--gpus", "0", "--from", str(src)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def test_two_shells_adding_at_once_land_every_job_once(tmp_path: Path, procs: Procs) -> None:
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate=gate("first")))
    procs.scheduler(q)
    srcs = []
    for k in range(2):
        src = tmp_path / f"cmds{k}.txt"
        # The same commands in both: the second batch's names must be made apart from the first's.
        src.write_text("".join(f"echo {i}\n" for i in range(300)))
        srcs.append(src)
    clients = [_add_from(q, src) for src in srcs]
    for c in clients:
        out, err = c.communicate(timeout=300)
        assert c.returncode == 0, err
        assert "added 300 jobs" in out
    names = [j.name for j in load_queue(q).jobs]
    assert len(names) == 601 and len(set(names)) == 601
    assert sorted(j.cmd for j in load_queue(q).jobs[1:]) == sorted(
        f"echo {i}" for i in range(300) for _ in range(2)
    )
    assert {j["name"] for j in status(q)["jobs"]} == set(names)
    release(q, "first")


def _has_socket(pid: int) -> bool:
    """Whether process ``pid`` holds a socket (the client has connected to the scheduler)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                return True
    return False


def test_a_scheduler_killed_while_it_takes_a_batch_leaves_all_or_none(
    tmp_path: Path, procs: Procs
) -> None:
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate=gate("first")))
    s = procs.scheduler(q)
    n = 3000
    src = tmp_path / "cmds.txt"
    src.write_text("".join(f"echo batch {i}\n" for i in range(n)))
    client = _add_from(q, src)
    wait_for(lambda: _has_socket(client.pid) or client.poll() is not None, what="the request")
    s.kill()
    out, err = client.communicate(timeout=300)
    new = [j for j in load_queue(q).jobs if j.cmd.startswith("echo batch")]
    assert len(new) in (0, n), len(new)  # one atomic write: the whole batch or nothing
    if client.returncode == 0:
        assert f"added {n} jobs" in out and len(new) == n
    else:
        assert client.returncode in (3, 4), err
        assert "Traceback" not in err
        said = "unknown" in err or "not done" in err or "stopped before it answered" in err
        assert said, err
        if "not done" in err:
            assert not new
    procs.scheduler(q)  # opened again on the file: the batch's jobs are queued, once each
    seen = {j["name"]: j for j in status(q)["jobs"]}
    assert all(j.name in seen for j in new)
    assert len(seen) == 1 + len(new)
    release(q, "first")


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs (root only: skipped where mount is refused)."""
    where = tmp_path / "tiny"
    where.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_is_said_plainly_and_loses_nothing(
    tmp_path: Path, tiny_disk: Path, procs: Procs, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The state (database, logs) elsewhere: only the queue file is on the full disk.
    monkeypatch.setenv("GTUI_STATE_DIR", str(tmp_path / "state"))
    q = write_queue(tiny_disk, ONE_GATED_JOB.format(gate=gate("first")))
    before = q.read_bytes()
    src = tmp_path / "cmds.txt"
    src.write_text("".join(f"python train.py --seed {i} --lr 0.001\n" for i in range(3000)))
    r = gtui("add", str(q), "--gpus", "0", "--from", str(src))  # no scheduler: written here
    assert r.returncode == 2, r.stderr
    assert "no space left" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert q.read_bytes() == before
    procs.scheduler(q)
    r = gtui("add", str(q), "--gpus", "0", "--from", str(src))  # the scheduler writes it
    assert r.returncode == 2, r.stderr
    assert "no space left" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert q.read_bytes() == before
    assert [j["name"] for j in status(q)["jobs"]] == ["first"]
    r = gtui("add", str(q), "--gpus", "0", "--", "echo", "small")  # room for one: it lands
    assert r.returncode == 0, r.stderr
    assert len(status(q)["jobs"]) == 2
    release(q, "first")


def test_a_batch_over_a_megabyte_is_one_request(tmp_path: Path, procs: Procs) -> None:
    """10,000 commands of a hundred characters are over a MiB on the wire: still one call."""
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate=gate("first")))
    procs.scheduler(q)
    src = tmp_path / "cmds.txt"
    src.write_text("".join(f"python train.py --seed {i} {'--flag ' * 280}\n" for i in range(600)))
    assert src.stat().st_size > 1 << 20
    r = gtui("add", str(q), "--gpus", "0", "--from", str(src))
    assert r.returncode == 0, r.stderr
    assert "added 600 jobs" in r.stdout
    assert len(status(q)["jobs"]) == 601
    release(q, "first")
