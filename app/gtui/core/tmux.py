"""tmux helpers for ``gtui QUEUE.toml``, ``gtui attach`` and ``gtui ls``.

The dashboard runs inside a tmux session named ``gtui-<queue stem>-<hash>`` so an SSH drop loses
nothing. Each session records the queue it runs in the session option ``@gtui_queue``, which is
how ``gtui ls`` names the queue and how a second ``gtui QUEUE.toml`` finds the session to attach
to. Plain subprocess calls to the ``tmux`` binary; no Textual here.

gtui's sessions live on a tmux server of their own (``tmux -L gtui``, a socket next to the
user's default one, in the same ``$TMUX_TMPDIR``): tmux's ``escape-time`` (how long tmux waits
after an Esc to see whether a key sequence follows) is a *server* option, 500 ms by default
before tmux 3.5, and a key typed within it after Esc is merged with the Esc into one alt+key.
gtui uses Esc everywhere, so its server gets ``ESCAPE_TIME_MS``; set on the user's server, it
would change every other session they have. The same ``~/.tmux.conf`` is read by both servers.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gtui.core.errors import GtuiError

QUEUE_OPTION = "@gtui_queue"
PREFIX = "gtui-"
SERVER = "gtui"  # the socket name of gtui's own tmux server (``tmux -L gtui``)
ESCAPE_TIME_MS = 10  # tmux 3.5's own default: an Esc is an Esc 10 ms on
# Variables that describe the outer terminal or tmux itself: the session sets its own.
_SKIP_ENV = frozenset(
    {
        "TMUX",
        "TMUX_PANE",
        "TERM",
        "TERM_PROGRAM",
        "TERM_PROGRAM_VERSION",
        "COLUMNS",
        "LINES",
        "SHLVL",
        "_",
        "OLDPWD",
        "PWD",
    }
)


@dataclass(frozen=True)
class Session:
    name: str
    queue: str  # "" when the session did not record one
    attached: int  # clients attached
    created: int  # unix time
    pane_pid: int | None = None


def available() -> bool:
    """Whether a tmux binary is on PATH."""
    return shutil.which("tmux") is not None


def inside() -> bool:
    """Whether this process runs inside tmux ($TMUX is set by tmux for its panes)."""
    return bool(os.environ.get("TMUX"))


def server_argv() -> list[str]:
    """The tmux command line that talks to gtui's own server, not the one ``$TMUX`` names."""
    return ["tmux", "-L", SERVER]


def _run(
    args: Sequence[str], check: bool = False, *, own: bool = True
) -> subprocess.CompletedProcess[str]:
    """``tmux ARGS`` on gtui's server (``own``), or on the server this pane runs in (or the
    user's default one outside tmux)."""
    argv = [*server_argv(), *args] if own else ["tmux", *args]
    try:
        result = subprocess.run(
            argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=15
        )
    except FileNotFoundError:
        raise GtuiError("tmux is not installed; run with --no-tmux") from None
    except subprocess.TimeoutExpired:
        raise GtuiError(f"tmux {' '.join(args[:1])} did not answer within 15 s") from None
    if check and result.returncode != 0:
        msg = (result.stderr or result.stdout).strip().splitlines()
        raise GtuiError(f"tmux {args[0]} failed: {msg[-1] if msg else result.returncode}")
    return result


def has_session(name: str) -> bool:
    # "=name" matches the name exactly (not as a prefix).
    return _run(["has-session", "-t", f"={name}"]).returncode == 0


def list_sessions(prefix: str = PREFIX) -> list[Session]:
    """gtui's sessions (names starting with ``prefix``), with the queue each one runs."""
    fmt = "\t".join(
        ["#{session_name}", f"#{{{QUEUE_OPTION}}}", "#{session_attached}", "#{session_created}"]
    )
    result = _run(["list-sessions", "-F", fmt])
    if result.returncode != 0:
        return []  # no server running: no sessions
    out = []
    for line in result.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) != 4 or not parts[0].startswith(prefix):
            continue
        name, queue, attached, created = parts
        out.append(
            Session(
                name=name,
                queue=queue,
                attached=int(attached or 0),
                created=int(created or 0),
                pane_pid=_first_pane_pid(name),
            )
        )
    return out


def session_queue(name: str) -> str | None:
    """The queue a session records, or None if there is no such session."""
    for s in list_sessions(prefix=""):
        if s.name == name:
            return s.queue
    return None


def _first_pane_pid(name: str) -> int | None:
    result = _run(["list-panes", "-s", "-t", f"={name}", "-F", "#{pane_pid}"])
    if result.returncode != 0:
        return None
    for line in result.stdout.split():
        if line.isdigit():
            return int(line)
    return None


def session_of_pid(pid: int, *, own: bool = True) -> str | None:
    """The tmux session whose pane runs ``pid`` (or one of its ancestors), if any: on gtui's
    server (``own``), or on the user's."""
    result = _run(["list-panes", "-a", "-F", "#{pane_pid}\t#{session_name}"], own=own)
    if result.returncode != 0:
        return None
    panes: dict[int, str] = {}
    for line in result.stdout.splitlines():
        p, _, name = line.partition("\t")
        if p.isdigit():
            panes[int(p)] = name
    try:
        import psutil

        proc: psutil.Process | None = psutil.Process(pid)
        while proc is not None:
            if proc.pid in panes:
                return panes[proc.pid]
            proc = proc.parent()
    except Exception:
        return None
    return None


def current_session() -> str | None:
    """The tmux session this process's pane belongs to (None outside tmux). Asked of the pane
    ($TMUX_PANE), not of a client: a pane in a session that no terminal shows has none."""
    if not inside():
        return None
    pane = os.environ.get("TMUX_PANE", "")
    if pane:
        result = _run(["display-message", "-p", "-t", pane, "#{session_name}"], own=False)
        if result.returncode == 0 and result.stdout.strip():
            return result.stdout.strip()
    return session_of_pid(os.getpid(), own=False)


def inside_own_server() -> bool:
    """Whether this pane is one of gtui's server's (``$TMUX`` is ``SOCKET,PID,SESSION``)."""
    socket_path = os.environ.get("TMUX", "").split(",")[0]
    return bool(socket_path) and Path(socket_path).name == SERVER


def launcher_script(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> str:
    """A shell script that recreates this environment and runs ``argv`` in ``cwd``.

    tmux starts a session's command with the tmux *server's* environment, not the caller's: a
    conda env activated in this shell would be lost, and the jobs would run with the wrong
    python. The script exports the caller's variables first. If the command fails, it waits for
    a key, so the error stays on screen instead of the session vanishing with it.
    """
    lines = [
        "#!/bin/sh",
        "# written by gtui: the dashboard's tmux session runs this once, then it is gone",
        'rm -f -- "$0"  # it holds the environment (tokens too): not left on disk',
    ]
    for k, v in sorted(env.items()):
        if k in _SKIP_ENV or not k.replace("_", "a").isalnum() or k[0].isdigit():
            continue
        lines.append(f"export {k}={shlex.quote(v)}")
    lines.append(f"cd {shlex.quote(str(cwd))} || exit 1")
    lines.append(" ".join(shlex.quote(a) for a in argv))
    lines.append("rc=$?")
    lines.append('if [ "$rc" -ne 0 ]; then')
    lines.append('  echo; echo "gtui exited with status $rc. Press enter to close this window."')
    lines.append("  read _ignored")
    lines.append("fi")
    lines.append('exit "$rc"')
    return "\n".join(lines) + "\n"


def self_argv(queue: Path, fake_gpus: str | None) -> list[str]:
    """How this gtui runs itself inside the session: the same python, --no-tmux, same fakes."""
    argv = [sys.executable, "-m", "gtui", "--no-tmux"]
    if fake_gpus:
        argv += ["--fake-gpus", fake_gpus]
    argv.append(str(queue))
    return argv


def new_session(
    name: str,
    script: Path,
    *,
    cwd: Path,
    queue: Path,
    width: int | None = None,
    height: int | None = None,
) -> None:
    """Start a detached session running ``script`` and record its queue (``@gtui_queue``)."""
    args = ["new-session", "-d", "-s", name, "-c", str(cwd)]
    if width and height:
        args += ["-x", str(width), "-y", str(height)]
    args += ["/bin/sh", str(script)]
    result = _run(args)
    if result.returncode != 0:
        if has_session(name):
            return  # someone started it a moment ago: attach to theirs
        msg = (result.stderr or result.stdout).strip()
        raise GtuiError(f"tmux could not start session {name}: {msg}")
    _run(["set-option", "-t", f"={name}:", QUEUE_OPTION, str(queue)])
    short_escape_time()


def short_escape_time() -> None:
    """At most ``ESCAPE_TIME_MS`` of ``escape-time`` on gtui's server (a shorter one the user's
    ``~/.tmux.conf`` set is kept): Esc then a key 0.1 s later are two keys, not one alt+key."""
    result = _run(["show-options", "-s", "-v", "escape-time"])
    value = result.stdout.strip()
    if result.returncode == 0 and value.isdigit() and int(value) <= ESCAPE_TIME_MS:
        return
    _run(["set-option", "-s", "escape-time", str(ESCAPE_TIME_MS)])


def attach_argv(name: str) -> list[str]:
    """The command that attaches this terminal to session ``name`` (switch-client from a pane of
    gtui's own server)."""
    if inside_own_server():
        return [*server_argv(), "switch-client", "-t", f"={name}"]
    return [*server_argv(), "attach-session", "-t", f"={name}"]


def attach(name: str) -> int:
    """Attach to ``name``: replaces this process with tmux; switches in a pane of gtui's own
    server (a GtuiError with tmux's reason when it cannot: no client shows this pane, say).

    In a pane of the user's own tmux it attaches nested (tmux in tmux: the user's prefix
    reaches their tmux, twice reaches gtui's): a switch cannot cross servers."""
    argv = attach_argv(name)
    if inside_own_server():
        result = _run(argv[3:])
        if result.returncode != 0:
            msg = (result.stderr or result.stdout).strip().splitlines()
            why = msg[-1] if msg else f"exit status {result.returncode}"
            raise GtuiError(
                f"could not switch this terminal to the tmux session {name} ({why}): "
                f"attach to it from a terminal with `tmux attach -t {name}`"
            )
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    os.execvpe(argv[0], argv, env)
    return 0  # pragma: no cover - exec does not return


def key_for_people(tmux_key: str) -> str:
    """tmux's key name as the dashboard writes keys: ``C-a`` -> ``ctrl+a``, ``M-x`` ->
    ``alt+x``, ``F12`` stays."""
    parts = tmux_key.split("-")
    mods = {"C": "ctrl", "M": "alt", "S": "shift"}
    out = [mods[p] for p in parts[:-1] if p in mods]
    if len(out) != len(parts) - 1 or not parts[-1]:
        return tmux_key  # not a modifier chain (a literal "-", say): as tmux writes it
    return "+".join([*out, parts[-1]])


def prefix_key() -> str:
    """The prefix key tmux really uses (``tmux show-options -g prefix``), as people write it;
    ``ctrl+b`` (tmux's default) when tmux cannot be asked."""
    if not available():
        return "ctrl+b"
    try:  # the server of this pane (gtui's, or the user's own) or, outside tmux, gtui's
        result = _run(["show-options", "-g", "prefix"], own=not inside())
    except GtuiError:
        return "ctrl+b"
    words = result.stdout.split()
    if result.returncode != 0 or len(words) < 2 or words[1] == "None":
        return "ctrl+b"
    return key_for_people(words[1])


def kill_session(name: str) -> None:
    _run(["kill-session", "-t", f"={name}"])
