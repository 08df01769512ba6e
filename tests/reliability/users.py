"""A throwaway second Unix user for the tests that need one (another user's reach, a process
limit that root ignores): made with ``useradd``, removed with ``userdel`` after the module.

Tests in other processes (pytest-xdist workers) may make their own at the same moment: the name
holds this process's pid, and useradd's "cannot lock /etc/passwd" (exit 10) is tried again
rather than read as "not possible here".
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from tests.waiting import wait_for

SYSTEM_PY = "/usr/bin/python3"  # what the second user runs gtui with: ours may be out of reach
PASSWD_BUSY = 10  # useradd's exit status when another useradd holds /etc/passwd


@contextmanager
def second_user(
    prefix: str,
    tools: tuple[str, ...],
    cleanup: Callable[[int], None] | None = None,
    system_python: bool = True,
) -> Iterator[pwd.struct_passwd]:
    """A new user named ``prefix`` + this process's pid; skips the test where one cannot be made
    (not root, a tool missing, or /usr/bin/python3 where ``system_python`` says the user runs
    gtui with it). ``cleanup(uid)`` runs before userdel."""
    if os.geteuid() != 0:
        pytest.skip("creating a second user needs root")
    for tool in ("useradd", *tools):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool}")
    if system_python and not os.path.exists(SYSTEM_PY):
        pytest.skip(f"needs {SYSTEM_PY} to run gtui as the second user")
    name = f"{prefix}{os.getpid() % 100000}"
    made: list[subprocess.CompletedProcess[str]] = []

    def add() -> bool:
        made.append(
            subprocess.run(
                ["useradd", "--no-create-home", "--shell", "/bin/sh", "--user-group", name],
                capture_output=True,
                text=True,
            )
        )
        return made[-1].returncode != PASSWD_BUSY

    wait_for(add, what="/etc/passwd free for useradd")
    if made[-1].returncode != 0:
        pytest.skip(f"useradd failed here: {made[-1].stderr.strip()}")
    try:
        yield pwd.getpwnam(name)
    finally:
        if cleanup is not None:
            cleanup(pwd.getpwnam(name).pw_uid)
        subprocess.run(["userdel", name], capture_output=True)
