"""A dashboard that quits hands its queue to a headless scheduler in the background.

The successor is ``gtui run --stay STAY --take-over-from PID QUEUE``, started detached from the
terminal and from tmux (a double fork: a new session whose leader exits at once, stdin from
/dev/null, stdout and stderr appended to the queue's scheduler log in its state directory). It
waits until the dashboard (PID) has released the queue's lock, then takes the lock and
re-adopts the running jobs through the ordinary recovery path, as any restart does.

Nothing here ever runs a job: the lock makes one scheduler at a time, and the recovery of the
next one (this successor, or any later ``gtui run``) adopts what runs and records what ended.
So a SIGKILL at any step leaves at worst a queue with no scheduler, which the next one
recovers, never a job run twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import psutil

from gtui.core.errors import GtuiError
from gtui.core.paths import QueuePaths, ensure_state_dir

# A handed-over scheduler serves this long after its last job ended: a `gtui add` after
# reading the night's results (minutes) still finds it, and a queue nobody comes back to does
# not keep a process that polls the GPUs forever. `gtui run --stay` chooses its own.
HANDOVER_STAY = "10m"
RELEASE_WAIT_S = 120.0  # the dashboard's shutdown waits 15 s at most for its tasks, then saves
TAKING_OVER = "taking over "  # the successor's first line
TAKE_WAIT_S = 60.0  # the successor reads the queue file first: ~1.5 s at 100,000 jobs

# Without these the successor would take itself for a process inside the dashboard's tmux
# pane, whose session is gone once the dashboard has quit.
_DROP_ENV = ("TMUX", "TMUX_PANE")

# The first child: leads a new session (setsid in Popen), forks the scheduler, prints its
# pid and exits, so the scheduler is nobody's child here and can never take a terminal.
_TRAMPOLINE = (
    "import os, sys\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.dup2(2, 1)\n"  # its output to the log, not to the pipe that carries its pid
    "    os.execv(sys.argv[1], sys.argv[1:])\n"
    "print(pid, flush=True)\n"
)


@dataclass(frozen=True)
class Successor:
    """The headless scheduler a dashboard handed its queue to."""

    pid: int
    log: Path
    paths: QueuePaths  # the queue's, under its identity (its lock, its log)


def scheduler_log(paths: QueuePaths) -> Path:
    """Where a background scheduler's event log goes: beside the queue's state."""
    return paths.state_dir / f"{paths.stem}.scheduler.log"


def successor_argv(
    queue: Path, from_pid: int, fake_gpus: str | None, backend: str | None
) -> list[str]:
    """The successor's command line: this python, the same simulated GPUs and backend."""
    argv = [sys.executable, "-m", "gtui"]
    if fake_gpus:
        argv += ["--fake-gpus", fake_gpus]
    if backend:
        argv += ["--backend", backend]
    argv += ["run", "--stay", HANDOVER_STAY, "--take-over-from", str(from_pid), str(queue)]
    return argv


def spawn_successor(
    paths: QueuePaths, *, fake_gpus: str | None = None, backend: str | None = None
) -> Successor:
    """Start the successor of this process's scheduler, detached; GtuiError when it cannot
    be started (the caller then keeps the queue)."""
    ensure_state_dir(paths)
    log = scheduler_log(paths)
    argv = successor_argv(paths.queue, os.getpid(), fake_gpus, backend)
    env = {k: v for k, v in os.environ.items() if k not in _DROP_ENV}
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            first = subprocess.run(
                [sys.executable, "-c", _TRAMPOLINE, *argv],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=fd,
                env=env,
                start_new_session=True,
                text=True,
                timeout=30,
                check=False,
            )
        finally:
            os.close(fd)
    except (OSError, subprocess.SubprocessError) as e:
        raise GtuiError(f"could not start a scheduler in the background: {e}") from None
    text = first.stdout.strip()
    if first.returncode != 0 or not text.isdigit():
        raise GtuiError(
            f"could not start a scheduler in the background (exit {first.returncode}); see {log}"
        )
    return Successor(int(text), log, paths)


def wait_released(paths: QueuePaths, from_pid: int, timeout: float = RELEASE_WAIT_S) -> bool:
    """Wait until ``from_pid`` no longer holds the queue's lock (it released it, or died and
    the kernel did). False when it still holds it after ``timeout``."""
    from gtui.core.state.lock import QueueLock

    lock = QueueLock(paths)
    deadline = time.monotonic() + timeout
    while lock.holder() == from_pid:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_taken(
    successor: Successor, timeout: float = TAKE_WAIT_S
) -> Literal["taken", "ended", "starting"]:
    """Wait until the queue is served again: "taken" once a scheduler holds its lock (the
    successor, or one the user started meanwhile); "ended" when the successor ended without
    (its log says why); "starting" when it is still on its way after ``timeout``."""
    from gtui.core.state.lock import QueueLock

    lock = QueueLock(successor.paths)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lock.holder():  # a pid: someone runs the queue (0: one is writing its pid)
            return "taken"
        if not _alive(successor.pid):
            return "taken" if lock.holder() else "ended"
        time.sleep(0.05)
    return "starting"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody has reaped yet has ended)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def last_words(log: Path) -> str:
    """The last line a successor wrote (without its time stamp), to say why it ended; ""
    when it said nothing after its first line (a kill leaves no words)."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, log.stat().st_size - 4096))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    said = [ln.strip() for ln in lines if ln.strip()]
    # Its error ("gtui: FILE:LINE: ...", maybe followed by the line quoted), else its last line.
    last = next((ln for ln in reversed(said) if ln.startswith("gtui: ")), said[-1] if said else "")
    last = last.removeprefix("gtui: ")
    if last.startswith("[") and "] " in last:
        last = last.split("] ", 1)[1]
    return "" if last.startswith(TAKING_OVER) else last


def taken_over(successor: Successor, queue_name: str) -> tuple[int, str]:
    """For the dashboard that handed its queue over: wait for the successor to take it, then
    the exit code and what to say. A successor that ended first is said with its last words
    (exit 1: gtui's tmux session then keeps the message on screen until a key)."""
    q = queue_name
    how = f"`gtui {q}` shows it again, `gtui stop {q}` ends it"
    verdict = wait_taken(successor)
    if verdict == "taken":
        return 0, (
            f"gtui: {q} goes on in the background: scheduler pid {successor.pid}, its log "
            f"{successor.log}; {how}"
        )
    if verdict == "starting":
        return 0, (
            f"gtui: the scheduler started in the background (pid {successor.pid}) has not "
            f"taken {q} over yet; `gtui status {q}` says when it has (its log: "
            f"{successor.log}); {how}"
        )
    why = last_words(successor.log)
    return 1, (
        f"gtui: the scheduler started in the background (pid {successor.pid}) ended before "
        f"it took {q} over{f': {why}' if why else ''} (its log: {successor.log}).\n"
        f"Nothing runs {q} now (running jobs go on): `gtui run {q}` or `gtui {q}` starts "
        "a scheduler, which re-adopts them"
    )
