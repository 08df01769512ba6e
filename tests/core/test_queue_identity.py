"""One queue is one scheduler, whatever its file is called.

The lock, the database and the control socket are keyed on the queue's identity in its state
directory, not on the file name: a renamed queue file, or a deleted ``.gtui/``, never lets a
second scheduler start the jobs the first one runs, and done jobs stay done after a rename.
Every job here runs until the test releases it (a file), and counts its starts in a file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from gtui.core.paths import queue_paths, register_queue
from tests.conftest import gtui, write_queue
from tests.reliability.helpers import finish, start_run, state_of, wait_for

HELD_JOB = """
[settings]
fake_gpus = "2x80G"

[[jobs]]
name = "a"
gpus = 0
cmd = "echo start >> starts.txt; while [ ! -e release ]; do sleep 0.05; done"
"""


def _starts(tmp_path: Path) -> int:
    p = tmp_path / "starts.txt"
    return len(p.read_text().splitlines()) if p.exists() else 0


def _run_first(tmp_path: Path) -> tuple[Path, subprocess.Popen[str]]:
    q = write_queue(tmp_path, HELD_JOB)
    first = start_run(q)
    wait_for(lambda: _starts(tmp_path) == 1, 30, "job a to start under the first scheduler")
    return q, first


def test_a_renamed_queue_file_is_the_same_queue_and_is_refused(tmp_path: Path) -> None:
    q, first = _run_first(tmp_path)
    try:
        moved = tmp_path / "q2.toml"
        os.rename(q, moved)
        second = gtui("run", str(moved), timeout=60)
        assert second.returncode == 3, second.stdout + second.stderr
        assert f"pid {first.pid}" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr
        # The renamed file reaches the running scheduler: same socket, same job.
        assert state_of(moved, "a") == "running"
        assert _starts(tmp_path) == 1
    finally:
        (tmp_path / "release").touch()
    out = finish(first)
    assert _starts(tmp_path) == 1, out


def test_a_deleted_state_directory_does_not_let_a_second_scheduler_in(tmp_path: Path) -> None:
    q, first = _run_first(tmp_path)
    try:
        shutil.rmtree(tmp_path / ".gtui")
        second = gtui("run", str(q), timeout=60)
        assert second.returncode == 3, second.stdout + second.stderr
        assert f"pid {first.pid}" in second.stderr, second.stderr
        assert "Traceback" not in second.stderr
        assert _starts(tmp_path) == 1
    finally:
        (tmp_path / "release").touch()
    finish(first)
    assert _starts(tmp_path) == 1


def test_done_jobs_stay_done_after_the_queue_file_is_renamed(tmp_path: Path) -> None:
    q = write_queue(tmp_path, HELD_JOB)
    (tmp_path / "release").touch()
    assert gtui("run", str(q)).returncode == 0
    assert _starts(tmp_path) == 1
    moved = tmp_path / "renamed.toml"
    os.rename(q, moved)
    again = gtui("run", str(moved))
    assert again.returncode == 0, again.stdout + again.stderr
    assert _starts(tmp_path) == 1, again.stdout
    assert state_of(moved, "a") == "done"


def test_identity_follows_a_rename_and_an_editor_save(tmp_path: Path) -> None:
    """Same inode (mv) or same name (an editor writes a new file and renames it over the old
    one): the same key. A copy beside it is another queue with a key of its own."""
    q = write_queue(tmp_path, HELD_JOB)
    key = register_queue(queue_paths(q)).stem
    assert key == "q"
    saved = tmp_path / ".q.toml.swp"
    saved.write_text(q.read_text() + "\n# edited\n")
    os.replace(saved, q)  # new inode, same name
    assert register_queue(queue_paths(q)).stem == key
    moved = tmp_path / "other.toml"
    os.rename(q, moved)  # same inode, new name
    assert queue_paths(moved).stem == key
    assert register_queue(queue_paths(moved)).stem == key
    copy = tmp_path / "q.toml"
    shutil.copy(moved, copy)  # a new file under the old name, after the rename was seen
    assert register_queue(queue_paths(copy)).stem != key
