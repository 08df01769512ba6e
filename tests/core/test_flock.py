"""gtui.core.flock, the one way a lock file is opened and locked: a lock file planted as a
symlink is refused, and the descriptor never reaches a job (close-on-exec), on real files and
real child processes."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gtui.core.flock import locked, open_lock, try_lock, unlock
from gtui.core.paths import ensure_state_dir, queue_paths
from gtui.core.queue import editing
from gtui.core.state.lock import QueueLock

# Exits 0 when descriptor argv[1] is open in it, 3 when it is not.
FD_OPEN = "import os, sys\ntry:\n    os.fstat(int(sys.argv[1]))\nexcept OSError:\n    sys.exit(3)\n"


def test_a_lock_file_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    link = tmp_path / "x.lock"
    link.symlink_to(target)
    with pytest.raises(OSError) as e:
        open_lock(link)
    assert e.value.errno == errno.ELOOP
    with pytest.raises(OSError) as e, locked(link):
        pass
    assert e.value.errno == errno.ELOOP
    assert not target.exists()  # nothing made through the link


def test_the_queue_file_lock_and_the_scheduler_lock_refuse_a_symlink(tmp_path: Path) -> None:
    """The queue file's edit lock used to follow a symlink; now both refuse one."""
    queue = tmp_path / "q.toml"
    queue.write_text("jobs = []\n")
    paths = queue_paths(queue)
    ensure_state_dir(paths)
    target = tmp_path / "planted"
    paths.file_lock.symlink_to(target)
    with pytest.raises(OSError) as e, editing.locked(queue):
        pass
    assert e.value.errno == errno.ELOOP
    paths.lock.symlink_to(target)
    with pytest.raises(OSError) as e:
        QueueLock(queue).acquire()
    assert e.value.errno == errno.ELOOP
    assert not target.exists()


def test_a_lock_is_exclusive_and_shared_as_asked(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    with locked(path) as held:
        assert held >= 0
        other = open_lock(path, create=False, write=False)
        try:
            assert not try_lock(other, shared=True)
        finally:
            os.close(other)
    assert os.stat(path).st_mode & 0o777 == 0o600
    a, b = open_lock(path), open_lock(path, write=False)
    try:
        assert try_lock(a, shared=True) and try_lock(b, shared=True)
        unlock(a)
        assert not try_lock(a)  # b still shares it
    finally:
        os.close(a)
        os.close(b)


def test_the_lock_descriptor_does_not_reach_a_child(tmp_path: Path) -> None:
    """A job started while a lock is held (close_fds=False: as os.system or a careless library
    starts one) neither has the descriptor nor keeps the lock once its holder lets go."""
    path = tmp_path / "x.lock"
    with locked(path) as fd:
        assert not os.get_inheritable(fd)
        probe = subprocess.run([sys.executable, "-c", FD_OPEN, str(fd)], close_fds=False)
        assert probe.returncode == 3
        child = subprocess.Popen(["sleep", "infinity"], close_fds=False)
    try:
        again = open_lock(path, create=False)
        try:
            assert try_lock(again)  # the sleeping child does not hold it
        finally:
            os.close(again)
    finally:
        child.kill()
        child.wait()


def test_the_probe_sees_an_inherited_descriptor(tmp_path: Path) -> None:
    """The probe above would prove nothing if it could not see a descriptor that is passed."""
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.set_inheritable(fd, True)
        probe = subprocess.run([sys.executable, "-c", FD_OPEN, str(fd)], close_fds=False)
        assert probe.returncode == 0
    finally:
        os.close(fd)
