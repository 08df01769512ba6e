"""An add while a gtui is starting on the queue (it holds the queue's lock; its socket is not
open yet) waits for it, instead of writing the file behind its back: a ``gtui wait`` or
``gtui.wait`` that follows the add must find the job. A real process holds the real lock here,
as a starting scheduler does, and lets it go when the test says so."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import gtui
from tests.waiting import wait_for

# Takes the queue's lock as a scheduler's start does, says so, holds it until RELEASE exists.
HOLD = """
import sys, time
from pathlib import Path
from gtui.core.paths import queue_paths
from gtui.core.sched.opening import lock_queue
_paths, lock = lock_queue(queue_paths(sys.argv[1]))
print("locked", flush=True)
while not Path(sys.argv[2]).exists():
    time.sleep(0.02)
lock.release()
"""

QUEUE = '[settings]\nfake_gpus = "1x80G"\n'


@pytest.fixture
def starting(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A queue whose lock a live process holds, and the file that makes it let go."""
    q, release = tmp_path / "q.toml", tmp_path / "release"
    q.write_text(QUEUE)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(q), str(release)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        yield q, release
    finally:
        release.touch()
        holder.wait(30)


def test_gtui_add_waits_for_a_scheduler_that_is_starting(starting: tuple[Path, Path]) -> None:
    q, release = starting
    add = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gtui",
            "add",
            str(q),
            "--name",
            "late",
            "--gpus",
            "0",
            "--",
            "true",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert add.stderr is not None
    said = add.stderr.readline()  # its first word to the user, while the lock is held
    assert "is starting: waiting for it to answer" in said, said
    assert "late" not in q.read_text()  # nothing written behind the starting scheduler
    release.touch()
    out, err = add.communicate(timeout=60)
    assert add.returncode == 0, err
    assert "added late" in out
    assert 'name = "late"' in q.read_text()  # none answered in the end: the file has it


def test_the_api_add_waits_for_a_scheduler_that_is_starting(
    starting: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    q, release = starting
    caplog.set_level(logging.INFO, logger="gtui")
    names: list[str] = []
    adding = threading.Thread(target=lambda: names.append(gtui.add(q, "true", name="late", gpus=0)))
    adding.start()
    wait_for(
        lambda: any("is starting" in r.getMessage() for r in caplog.records),
        what="the add waiting for the starting scheduler",
    )
    assert adding.is_alive() and "late" not in q.read_text()
    release.touch()
    adding.join(60)
    assert names == ["late"] and 'name = "late"' in q.read_text()


def test_an_add_to_a_scheduler_that_never_answers_lands_in_the_file_after_the_wait(
    starting: tuple[Path, Path],
) -> None:
    """The lock's holder never opens its socket (stopped while starting, or its socket failed):
    the add waits its few seconds, then writes the file, where the scheduler finds the job once
    it reads it; nothing is lost and the command ends."""
    q, _release = starting
    add = subprocess.run(
        [sys.executable, "-m", "gtui", "add", str(q), "--name", "late", "--gpus", "0", "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert add.returncode == 0, add.stderr
    assert "is starting: waiting for it to answer" in add.stderr
    assert "added late" in add.stdout
    assert 'name = "late"' in q.read_text()
