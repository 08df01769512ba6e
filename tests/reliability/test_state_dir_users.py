"""A state directory gtui cannot use, and two users' queue files in one shared folder, with
the real second Unix user these need (tests run as root, whom ``chmod 000`` does not stop).

- ``.gtui`` made unreadable under a running scheduler: ``status`` still answers, ``add`` says
  which file and what is wrong (exit 2, not "internal error: PermissionError"), ``stop`` stops
  it and says so, and the scheduler's output holds no traceback.
- Another user's queue in the same folder made ``.gtui`` first: the refusal names
  ``GTUI_STATE_DIR``; with it set, the jobs run and their logs go under the state folder
  (the first user's private ``logs/`` is not theirs to write).

gtui and its dependencies are copied where the other user can read them and run by a Python
of the same version (tests/core/gpus/test_claims_users.py); skipped, with the reason, where no second
user can be made.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.gpus.test_claims_users import _build_tree, _popen_as, _python_for, bob
from tests.reliability.live import LiveOutput
from tests.reliability.mixed import kill_queue_processes

__all__ = ["bob"]  # the second user, a fixture


@pytest.fixture(scope="module")
def runtime(bob: pwd.struct_passwd) -> Iterator[dict[str, str]]:
    """gtui where bob can run it: the Python and the environment of his commands."""
    base = Path(tempfile.mkdtemp(prefix="gtui-statedir-"))
    base.chmod(0o755)
    try:
        python = _python_for(bob)
        if python is None:
            pytest.skip(f"no Python that {bob.pw_name} can run at this version")
        _build_tree(base / "py")
        yield {"python": python, "py": str(base / "py")}
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def shared() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="gtui-shared-"))
    d.chmod(0o1777)  # a shared folder, sticky as /tmp
    try:
        yield d
    finally:
        for q in d.rglob("*.toml"):
            kill_queue_processes(q)
        shutil.rmtree(d, ignore_errors=True)


def bob_env(bob: pwd.struct_passwd, rt: dict[str, str], home: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": rt["py"],
        "PYTHONDONTWRITEBYTECODE": "1",
        "XDG_RUNTIME_DIR": str(home / "run"),
        "GTUI_CLAIMS_DIR": str(home / "claims"),
        **extra,
    }


def as_bob(
    bob: pwd.struct_passwd, rt: dict[str, str], env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """``gtui ARGS`` as bob, to its end: its exit status, stdout and stderr apart."""
    argv = ["setpriv", f"--reuid={bob.pw_uid}", f"--regid={bob.pw_gid}", "--clear-groups", "--"]
    return subprocess.run(
        [*argv, rt["python"], "-m", "gtui", *args],
        capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def home_of(bob: pwd.struct_passwd, shared: Path) -> Path:
    home = shared / "bob-home"
    for d in (home, home / "run"):
        d.mkdir(mode=0o700)
        os.chown(d, bob.pw_uid, bob.pw_gid)
    return home


GATED = """[settings]
fake_gpus = "2x80G"
poll = "0.2s"

[[jobs]]
name = "long"
gpus = 0
cmd = "while [ ! -e release-long ]; do sleep 0.05; done"

[[jobs]]
name = "short"
gpus = 0
cmd = "while [ ! -e release-short ]; do sleep 0.05; done; echo short"
"""


def test_an_unreadable_state_directory_is_said_plainly(
    bob: pwd.struct_passwd, runtime: dict[str, str], shared: Path
) -> None:
    home = home_of(bob, shared)
    folder = shared / "q"
    folder.mkdir()
    os.chown(folder, bob.pw_uid, bob.pw_gid)
    q = folder / "q.toml"
    q.write_text(GATED)
    os.chown(q, bob.pw_uid, bob.pw_gid)
    env = bob_env(bob, runtime, home)
    run = LiveOutput(_popen_as(bob, [runtime["python"], "-m", "gtui", "run", str(q)], env))
    try:
        run.wait_for("start long")
        run.wait_for("start short")
        (folder / ".gtui").chmod(0o000)
        (folder / "release-short").touch()
        run.wait_for("done short")  # and its attempt's end, recorded where it cannot be read

        status = as_bob(bob, runtime, env, "status", str(q))
        assert status.returncode == 0, status.stderr  # not "stopped before it answered"
        assert "long" in status.stdout and "running" in status.stdout

        add = as_bob(bob, runtime, env, "add", str(q), "--name", "more", "--", "true")
        assert add.returncode == 2, (add.stdout, add.stderr)
        lock = folder / ".gtui" / "q.toml.lock"
        assert add.stderr.strip() == f"gtui: Permission denied: {lock}", add.stderr
        assert "internal error" not in add.stderr

        try:
            stop = as_bob(bob, runtime, env, "stop", str(q))
        except subprocess.TimeoutExpired:
            raise AssertionError(run.text()) from None
        assert stop.returncode == 0, stop.stderr
        assert stop.stdout.startswith("stopped the scheduler"), stop.stdout
        out = run.finish()
    finally:
        (folder / ".gtui").chmod(0o700)
        (folder / "release-long").touch()
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
    assert "Traceback" not in out, out
    assert f"add refused: Permission denied: {lock}" in out
    assert run.proc.returncode == 130  # stopped by its user: interrupted


def test_a_second_user_in_a_shared_folder_is_told_of_gtui_state_dir_and_runs_with_it(
    bob: pwd.struct_passwd, runtime: dict[str, str], shared: Path
) -> None:
    job = '[settings]\nfake_gpus = "2x80G"\n\n[[jobs]]\nname = "a"\ngpus = 0\ncmd = "echo {}"\n'
    mine = shared / "mine.toml"
    mine.write_text(job.format("mine"))
    r = subprocess.run(
        [sys.executable, "-m", "gtui", "run", str(mine)],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (shared / ".gtui").stat().st_uid == os.getuid()  # ours, private, in the shared folder
    assert (shared / "logs").stat().st_mode & 0o077 == 0

    home = home_of(bob, shared)
    theirs = shared / "theirs.toml"
    theirs.write_text(job.format("theirs"))
    os.chown(theirs, bob.pw_uid, bob.pw_gid)
    env = bob_env(bob, runtime, home)
    refused = as_bob(bob, runtime, env, "run", str(theirs))
    assert refused.returncode == 2, refused.stdout
    assert f"{shared}/.gtui belongs to another user (uid {os.getuid()})" in refused.stderr
    assert "export GTUI_STATE_DIR=" in refused.stderr, refused.stderr  # the way out
    assert "Traceback" not in refused.stderr
    status = as_bob(bob, runtime, env, "status", str(theirs))
    assert status.returncode == 2 and "GTUI_STATE_DIR" in status.stderr, status.stderr

    state = home / "state"
    env = bob_env(bob, runtime, home, GTUI_STATE_DIR=str(state))
    ran = as_bob(bob, runtime, env, "run", str(theirs))
    assert ran.returncode == 0, (ran.stdout, ran.stderr)  # its job ran: its log was writable
    assert "done a" in ran.stdout, ran.stdout
    logs = list(state.glob("*/logs/a.*.log"))
    assert len(logs) == 1 and logs[0].read_text() == "theirs\n", list(state.rglob("*"))
    log = as_bob(bob, runtime, env, "log", str(theirs), "a")
    assert (log.returncode, log.stdout) == (0, "theirs\n"), log.stderr
