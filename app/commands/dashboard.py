"""``gtui QUEUE.toml``: the dashboard, in a tmux session unless told otherwise (DESIGN.md 2, 5).

Outside tmux (and tmux installed): start or re-attach the session ``gtui-<stem>`` that runs
``gtui --no-tmux QUEUE.toml``, so an SSH drop loses nothing. Inside tmux or with ``--no-tmux``:
run in place. A queue already run by a gtui in some tmux session: attach to that session; by one
outside tmux: exit 3 naming its pid.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from pathlib import Path

from gtui.cli import GlobalOptions
from gtui.core import tmux
from gtui.core.errors import GtuiError, LockedError
from gtui.core.paths import QueuePaths, ensure_private_dir, queue_paths

NO_TMUX_NOTE = (
    "tmux is not installed: if your SSH connection drops, this dashboard stops (running jobs "
    "keep running and are re-adopted next time, but queued ones wait). To keep it alive, "
    "install tmux (gtui then runs inside it), or run the queue headless with "
    "`nohup gtui run QUEUE.toml &`."
)


def require_terminal(what: str = "the dashboard") -> None:
    """A plain error instead of a crash when there is no terminal (a pipe, cron, ssh -T)."""
    try:
        ok = sys.stdin is not None and sys.stdin.isatty() and sys.stdout.isatty()
    except (ValueError, OSError):  # closed stdin
        ok = False
    if not ok:
        raise GtuiError(
            f"{what} needs a terminal, but stdin or stdout is not one (a pipe, a file, "
            "or no stdin).\nrun the queue without a screen with `gtui run QUEUE.toml`, or look at "
            "it with `gtui status QUEUE.toml`"
        )


def _lock_holder(paths: QueuePaths) -> int | None:
    from gtui.core.lock import QueueLock

    return QueueLock(paths).holder()


def _locked_outside_tmux(paths: QueuePaths, pid: int) -> LockedError:
    who = f"gtui (pid {pid})" if pid else "another gtui"
    return LockedError(
        f"{who} already runs {paths.queue}, and not in a tmux session: nothing to attach to.\n"
        f"wait for it to finish, or stop it (kill {pid or 'PID'}); its jobs keep running and the "
        "next gtui re-adopts them"
    )


def _attach_to_holder(paths: QueuePaths) -> str | None:
    """The tmux session that runs the scheduler holding this queue's lock, if any."""
    pid = _lock_holder(paths)
    if pid is None:
        return None
    if pid and tmux.available():
        session = tmux.session_of_pid(pid)
        if session:
            return session
    raise _locked_outside_tmux(paths, pid)


def _prevalidate(paths: QueuePaths, opts: GlobalOptions) -> None:
    """Check what would make the session die at once, while this terminal can still show it."""
    from gtui.core.queuefile import load_queue

    queue = load_queue(paths.queue)
    spec = opts.fake_gpus or queue.settings.fake_gpus
    if spec:
        from gtui.core.gpus.fake import FakeBackend

        FakeBackend(spec, paths.queue.parent).close()


def _via_tmux(paths: QueuePaths, opts: GlobalOptions) -> int:
    name = paths.tmux_session
    if tmux.has_session(name):
        recorded = tmux.session_queue(name)
        if recorded and recorded != str(paths.queue):
            raise GtuiError(
                f"tmux session {name} already runs another queue with the same name: {recorded}\n"
                f"rename {paths.queue.name}, or run it in your own tmux window with --no-tmux"
            )
        return tmux.attach(name)
    holder_session = _attach_to_holder(paths)
    if holder_session is not None:
        return tmux.attach(holder_session)
    _prevalidate(paths, opts)
    ensure_private_dir(paths.state_dir)
    script = paths.state_dir / f"{paths.stem}.tmux.sh"
    text = tmux.launcher_script(tmux.self_argv(paths.queue, opts.fake_gpus), Path.cwd(), os.environ)
    fd = os.open(script, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    size = shutil.get_terminal_size()
    tmux.new_session(
        name, script, cwd=Path.cwd(), queue=paths.queue, width=size.columns, height=size.lines
    )
    return tmux.attach(name)


async def _run_app(paths: QueuePaths, opts: GlobalOptions, note: str | None) -> int | str:
    """Run the dashboard here. Returns the exit code, or a tmux session name to attach to."""
    from gtui.core.engine import Engine
    from gtui.ui.app import GtuiApp

    engine = Engine(paths.queue, fake_gpus=opts.fake_gpus)
    # The app (which subscribes to the engine) before the engine starts: what the start says
    # (a GPU warning, no control socket) waits for the screen instead of being lost.
    app = GtuiApp(engine, in_tmux=tmux.inside(), startup_notice=note)
    try:
        await engine.start()
    except LockedError:
        # A second `gtui QUEUE.toml` (in tmux, or --no-tmux): go to the session that runs it.
        session = _attach_to_holder(paths)
        if session is not None:
            return session
        raise
    try:
        rc = await app.run_async()
    finally:
        await app.stop_engine()
    return int(rc or 0)


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    queue = Path(ns.queue).expanduser()
    if not queue.is_file():
        raise GtuiError(
            f"{ns.queue}: no such queue file\ncheck the path, or write one (see sample_queues/)"
        )
    paths = queue_paths(queue)
    require_terminal()
    have_tmux = tmux.available()
    if not opts.no_tmux and not tmux.inside() and have_tmux:
        return _via_tmux(paths, opts)
    note = NO_TMUX_NOTE if not have_tmux and not opts.no_tmux else None
    result = asyncio.run(_run_app(paths, opts, note))
    if isinstance(result, str):
        return tmux.attach(result)
    return result


__all__ = ["NO_TMUX_NOTE", "main"]
