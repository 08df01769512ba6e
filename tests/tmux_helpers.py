"""What the tests in a real tmux share: tmux commands on the right server, the pane's text,
keys typed into it, a terminal outside tmux to start gtui in, and the job's state as gtui says.

Each test's private tmux server is the ``tmux_server`` fixture (tests/conftest.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil

from gtui.commands.status import get_status
from gtui.core import tmux
from tests.waiting import wait_for

PY = sys.executable


def sh(*args: str) -> subprocess.CompletedProcess[str]:
    """``tmux ARGS`` on the server of its target: gtui's own (``tmux -L gtui``) for a session
    gtui made (``gtui-...``), else the default one, where the tests' terminals run."""
    target = args[args.index("-t") + 1] if "-t" in args[:-1] else ""
    own = target.lstrip("=").startswith(tmux.PREFIX)
    argv = [*tmux.server_argv(), *args] if own else ["tmux", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=15)


def capture(target: str) -> str:
    return sh("capture-pane", "-p", "-t", target).stdout


def wait_screen(target: str, text: str, timeout: float = 20.0) -> str:
    seen = ""

    def shows() -> bool:
        nonlocal seen
        seen = capture(target)
        return text in seen

    try:
        wait_for(shows, timeout, what=f"{text!r} on screen")
    except AssertionError:
        raise AssertionError(f"{text!r} never showed; the screen:\n{seen}") from None
    return seen


def keys(target: str, *k: str, literal: bool = False) -> None:
    """Type into the pane. No pause after: the caller waits for what the keys cause."""
    r = sh("send-keys", "-t", target, *(["-l"] if literal else []), *k)
    assert r.returncode == 0, r.stderr


def wait_screen_match(target: str, pattern: str, timeout: float = 20.0) -> str:
    """Like wait_screen, for a regular expression (a form field and its value on one line)."""
    seen = ""

    def shows() -> bool:
        nonlocal seen
        seen = capture(target)
        return re.search(pattern, seen) is not None

    try:
        wait_for(shows, timeout, what=f"{pattern!r} on screen")
    except AssertionError:
        raise AssertionError(f"{pattern!r} never showed; the screen:\n{seen}") from None
    return seen


def field_at_cursor(target: str) -> str | None:
    """The job form's field the cursor is in: Textual puts the terminal's cursor in the focused
    input, and the field's label starts the line, just inside the dialog's border."""
    row = sh("display-message", "-p", "-t", target, "#{cursor_y}").stdout.strip()
    lines = capture(target).splitlines()
    if not row.isdigit() or int(row) >= len(lines):
        return None
    m = re.search(r"█\s+(\w+)\s", lines[int(row)])
    return m.group(1) if m else None


def wait_field(target: str, field: str) -> None:
    """Wait until the cursor is in ``field``: keys typed after Tab go to the field that has
    the focus when they arrive, and Tab moves it only once the app has handled it."""
    wait_for(lambda: field_at_cursor(target) == field, what=f"the cursor in the form's {field}")


def status(queue: Path) -> dict[str, Any]:
    """What ``gtui status QUEUE --json`` prints (the scheduler's answer, else the saved state),
    read in this process by the function the command calls: the tests poll it every 50 ms, and
    a ``gtui`` subprocess per look cost a Python start each. The command itself runs end to end
    in tests/commands/test_status_cli.py."""
    return get_status(str(queue))


def job_processes(queue: Path, name: str) -> list[psutil.Process]:
    """Our job's processes, found by the environment the engine gives them."""
    out = []
    for p in psutil.process_iter():
        try:
            env = p.environ()
        except (psutil.Error, OSError):
            continue
        if env.get("GTUI_JOB") == name and env.get("GTUI_QUEUE") == str(queue.resolve()):
            out.append(p)
    return out


def job_states(queue: Path) -> dict[str, str]:
    """Every job's state, from one look at the status."""
    return {str(job["name"]): str(job["state"]) for job in status(queue)["jobs"]}


def job_state(queue: Path, name: str) -> str | None:
    return job_states(queue).get(name)


def outer(tmp_path: Path, session: str, command: str, size: tuple[int, int] = (120, 30)) -> None:
    """A terminal outside tmux ($TMUX unset) in which the user types ``command``."""
    sh(
        "new-session",
        "-d",
        "-x",
        str(size[0]),
        "-y",
        str(size[1]),
        "-s",
        session,
        "-c",
        str(tmp_path),
        f"env -u TMUX {command}; echo rc=$?; sleep 60",
    )
