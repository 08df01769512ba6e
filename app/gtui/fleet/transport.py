"""Calls to a host over the user's own ssh: one multiplexed connection per host (the first
call opens it, the next ones ride on it, so a key or agent is asked once), each call a
subprocess with a deadline, its failure put in one line that says what to do.

Nothing listens anywhere: ssh runs the host's ``gtui`` for each call and that process ends
with it; the local master connection ends after ``PERSIST`` idle seconds, or at ``close``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gtui.fleet.config import Host

PERSIST = 60
DEADLINE = 20.0
SOCKET_DIR_MAX = 40
UNREACHABLE = 255  # ssh's own exit status: the connection, not the command, failed


@dataclass(frozen=True)
class Reply:
    """What one remote call gave: ``problem`` is None when the host answered at all."""

    rc: int
    out: str
    err: str
    problem: str | None = None  # unreachable, missing, old: the host is not usable
    text: str = ""  # the problem (or the command's error) in one line


def control_dir() -> Path:
    """A private (0700) folder for the connections' sockets, in the user's runtime folder."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    d = Path(base) / f"gtui-ssh-{os.getuid()}"
    if len(str(d)) > SOCKET_DIR_MAX:
        # A socket path has about 100 bytes; %C takes 40 and ssh adds a temporary suffix.
        d = Path(tempfile.gettempdir()) / f"gtui-ssh-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    d.chmod(0o700)
    return d


def ssh_argv(host: Host, *extra: str, master: str = "auto") -> list[str]:
    """The host's ssh with multiplexing, never a prompt (BatchMode: a key it cannot use is an
    error to show, not a question in a terminal the dashboard owns)."""
    return [
        *host.ssh,
        "-o", f"ControlMaster={master}",
        "-o", f"ControlPath={control_dir()}/%C",
        "-o", f"ControlPersist={PERSIST}",
        "-o", "BatchMode=yes",
        *extra,
        host.name,
    ]  # fmt: skip


def remote_word(word: str) -> str:
    """Quote ``word`` for the host's shell, leaving a leading ``~/`` to it (a queue path)."""
    if word == "~":
        return '"$HOME"'
    if word.startswith("~/"):
        return '"$HOME"/' + shlex.quote(word[2:])
    return shlex.quote(word)


def remote_line(host: Host, args: Sequence[str]) -> str:
    return " ".join([*(shlex.quote(w) for w in host.gtui), *(remote_word(a) for a in args)])


def one_line(err: str) -> str:
    lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def judge(host: Host, rc: int, out: str, err: str) -> Reply:
    """Name what went wrong the way the user can act on it."""
    line = one_line(err)
    gtui = " ".join(host.gtui)
    if rc == UNREACHABLE:
        return Reply(rc, out, err, "unreachable", line or "the connection was lost (ssh exit 255)")
    if rc == 127 or "command not found" in err or "No such file or directory" in line:
        return Reply(
            rc, out, err, "missing",
            f"no `{gtui}` on {host.name}: install gtui there (pip install gtui), or set "
            f'gtui = "/path/to/gtui" for this host',
        )  # fmt: skip
    if "unrecognized arguments" in err or "invalid choice" in err:
        return Reply(
            rc, out, err, "old",
            f"the gtui on {host.name} is too old for the fleet ({line}): "
            "upgrade it there (pip install -U gtui)",
        )  # fmt: skip
    return Reply(rc, out, err, None, line)


async def call(host: Host, args: Sequence[str], deadline: float = DEADLINE) -> Reply:
    """Run ``gtui ARGS`` on ``host``; a call past ``deadline`` is killed and the host is
    reported unreachable (a slow link looks like a dead one to someone waiting)."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *ssh_argv(host),
            remote_line(host, args),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as e:
        return Reply(UNREACHABLE, "", str(e), "unreachable", f"cannot run {host.ssh[0]}: {e}")
    try:
        out, err = await asyncio.wait_for(proc.communicate(), deadline)
    except (TimeoutError, asyncio.CancelledError) as e:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        if isinstance(e, asyncio.CancelledError):
            raise
        return Reply(UNREACHABLE, "", "", "unreachable", f"no answer in {deadline:g}s")
    rc = proc.returncode if proc.returncode is not None else UNREACHABLE
    return judge(host, rc, out.decode(errors="replace"), err.decode(errors="replace"))


async def close(hosts: Sequence[Host]) -> None:
    """End every host's master connection (``ssh -O exit``): nothing is left running."""

    async def one(h: Host) -> None:
        with contextlib.suppress(OSError):
            p = await asyncio.create_subprocess_exec(
                *ssh_argv(h, "-O", "exit"),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(p.wait(), 5)

    await asyncio.gather(*(one(h) for h in hosts))
