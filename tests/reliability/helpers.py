"""Small helpers for the reliability suite: run the real CLI, wait for things, private mounts."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.conftest import jobs_of
from tests.waiting import wait_for as wait_for  # re-exported: the reliability tests import it here


def status(queue: Path) -> dict[str, dict[str, Any]]:
    """``gtui status --json``, as a dict of jobs by name (asked in this process)."""
    return jobs_of(queue)


def state_of(queue: Path, name: str) -> str:
    return str(status(queue)[name]["state"])


def start_run(
    queue: Path, *, env: dict[str, str] | None = None, **kw: Any
) -> subprocess.Popen[str]:
    """``gtui run QUEUE`` in the background, its stdout and stderr together."""
    full = dict(os.environ)
    full.pop("GTUI_CRASH_AT", None)
    full.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-m", "gtui", "run", str(queue)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=full,
        **kw,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert "Traceback" not in out, out
    return out


def can_mount() -> bool:
    """Whether this process may mount a tmpfs (root in a container that allows it)."""
    return os.geteuid() == 0 and Path("/proc/mounts").exists()


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "1m", *, readonly: bool = False) -> Iterator[bool]:
    """Mount a small tmpfs at ``path`` for the block; yields False (nothing mounted) where the
    machine does not allow it, so the caller can fall back or skip."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size},mode=0755" + (",ro" if readonly else "")
    mounted = False
    if can_mount():
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
            capture_output=True,
            text=True,
        )
        mounted = done.returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            for _ in range(50):
                if subprocess.run(["umount", str(path)], capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)


def remount(path: Path, opts: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{opts}", str(path)], check=True)
