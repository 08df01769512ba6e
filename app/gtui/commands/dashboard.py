"""``gtui QUEUE.toml``: the dashboard, in a tmux session unless told otherwise.

Outside tmux (and tmux installed): start or re-attach the session ``gtui-<stem>-<hash>`` that runs
``gtui --no-tmux QUEUE.toml``, so an SSH drop loses nothing. Inside tmux or with ``--no-tmux``:
run in place.

A queue already run by another gtui: in the tmux session gtui made for it (and not the one this
runs in), attach to that session from a plain terminal, or switch to it from another of gtui's
sessions (a switch tmux refuses is said). Anywhere else (a headless ``gtui run``, a ``--no-tmux``
dashboard in a plain terminal, in the user's own tmux session, whose server is not gtui's, or in
another window of this very session, where a switch would change nothing): open the dashboard
here, in place, on that scheduler (gtui.core.control.remote: its control socket's ``watch`` and
commands). It holds nothing of the queue, so it needs no tmux
session of its own, and quitting it, with jobs running or not, leaves the scheduler and its jobs
running: it asks nothing. Only a holder that does not answer on its socket still exits 3 naming
its pid.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gtui.commands.options import GlobalOptions
from gtui.core import tmux
from gtui.core.errors import GtuiError, LockedError
from gtui.core.paths import QueuePaths, ensure_state_dir, queue_paths

if TYPE_CHECKING:
    from gtui.core.control.remote import RemoteEngine
    from gtui.ui.app import GtuiApp

ATTACH_WAIT_S = 5.0  # a scheduler that holds the lock may still be opening its socket

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
    from gtui.core.state.lock import QueueLock

    return QueueLock(paths).holder()


def _locked_outside_tmux(paths: QueuePaths, pid: int, why: str = "") -> LockedError:
    who = f"gtui (pid {pid})" if pid else "another gtui"
    return LockedError(
        f"{who} already runs {paths.queue}, not in a tmux session, and does not answer on its "
        f"control socket{f' ({why})' if why else ''}: nothing to attach to.\n"
        f"wait for it to finish, or stop it (kill {pid or 'PID'}); its jobs keep running and the "
        "next gtui re-adopts them"
    )


def _holder(paths: QueuePaths) -> tuple[int, str | None] | None:
    """Who holds this queue's lock: its pid (0: not written yet) and the tmux session it runs
    in (None: not in one, or no tmux); None when nobody holds it."""
    pid = _lock_holder(paths)
    if pid is None:
        return None
    session = tmux.session_of_pid(pid) if pid and tmux.available() else None
    return pid, session or None


def _session_to_attach(paths: QueuePaths, session: str | None) -> str | None:
    """The holder's tmux session to go to, or None to open the dashboard here as a client of its
    scheduler: only a session gtui made for this queue, and not the one this runs in (a switch
    there changes nothing). A session of the user's own is theirs to arrange: not switched."""
    if session is None:
        return None
    made = session == paths.tmux_session or tmux.session_queue(session) == str(paths.queue)
    if not made or (tmux.inside() and session == tmux.current_session()):
        return None
    if tmux.inside() and not tmux.inside_own_server():
        # In the user's own tmux: gtui's sessions are on gtui's server (tmux.py says why), and
        # a switch cannot cross servers; a nested tmux would take their prefix and Esc.
        return None
    return session


async def _attach_remote(paths: QueuePaths, pid: int) -> RemoteEngine:
    """A RemoteEngine attached to the scheduler that holds the lock (given ATTACH_WAIT_S to
    open its socket); exit 3 when it does not answer."""
    import time

    from gtui.core.control.remote import RemoteEngine

    deadline = time.monotonic() + ATTACH_WAIT_S
    while True:
        remote = RemoteEngine(paths.queue)
        try:
            await remote.start()
        except GtuiError as e:
            if time.monotonic() < deadline and _lock_holder(paths) is not None:
                await asyncio.sleep(0.2)
                continue
            raise _locked_outside_tmux(paths, pid, str(e).splitlines()[0]) from None
        return remote


def remote_app(
    engine: RemoteEngine,
    *,
    host: str | None = None,
    in_tmux: bool = False,
    startup_notice: str | None = None,
) -> GtuiApp:
    """The dashboard on a scheduler that runs elsewhere: ``q`` leaves at once, and never kills
    (the jobs are that scheduler's, whatever ``kill_jobs`` a quit asks for)."""
    from gtui.ui.app import GtuiApp
    from gtui.ui.screens.main import MainScreen

    class RemoteMainScreen(MainScreen):
        def action_quit(self) -> None:
            # Nothing of the queue runs here: leaving changes nothing, so nothing to ask.
            app = self.app
            assert isinstance(app, GtuiApp)
            app.shutdown_and_exit(kill_jobs=False)

    class RemoteApp(GtuiApp):
        def get_default_screen(self) -> MainScreen:
            return RemoteMainScreen(
                self.engine, host=self.host, clock=self.clock, in_tmux=self.in_tmux
            )

        def shutdown_and_exit(self, *, kill_jobs: bool = False) -> None:
            super().shutdown_and_exit(kill_jobs=False)

        async def stop_engine(self, *, kill_jobs: bool = False) -> None:
            await super().stop_engine(kill_jobs=False)

    # The EnginePort parameter is also where mypy checks that a RemoteEngine is one.
    return RemoteApp(engine, host=host, in_tmux=in_tmux, startup_notice=startup_notice)


async def _run_remote(paths: QueuePaths, pid: int) -> int:
    """The dashboard here, on the scheduler (pid ``pid``) that runs the queue elsewhere."""
    remote = await _attach_remote(paths, pid)
    notice = (
        f"attached to the scheduler (pid {remote.pid}) that runs {paths.queue.name}: quitting "
        "this screen leaves it and its jobs running"
    )
    app = remote_app(remote, in_tmux=tmux.inside(), startup_notice=notice)
    try:
        rc = await app.run_async()
    finally:
        await app.stop_engine()
    return int(rc or 0)


def _prevalidate(paths: QueuePaths, opts: GlobalOptions) -> None:
    """Check what would make the session die at once, while this terminal can still show it."""
    from gtui.core.queue.queuefile import load_queue

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
    holder = _holder(paths)
    if holder is not None:
        pid, session = holder
        target = _session_to_attach(paths, session)
        if target is not None:
            return tmux.attach(target)
        # Run by a gtui outside a session of gtui's: its dashboard, here (it holds nothing an
        # SSH drop loses).
        return asyncio.run(_run_remote(paths, pid))
    _prevalidate(paths, opts)
    ensure_state_dir(paths)
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
    from gtui.core.sched.build import build_engine
    from gtui.ui.app import GtuiApp

    # A second `gtui QUEUE.toml` (in tmux, or --no-tmux): go to the session gtui made for it,
    # or, when it runs anywhere else (this very session included), show it here.
    holder = _holder(paths)
    if holder is None:
        # `gtui stop` ends this process too (the app quits once its engine's run ends): the
        # command is told so, and returns once this process has exited.
        engine = build_engine(
            paths.queue, fake_gpus=opts.fake_gpus, cluster=opts.backend, exits_with_run=True
        )
        # The app starts the engine itself, once its first frame ("reading q.toml…") is on
        # the terminal: a 100,000-job file takes ~1.5 s to read, and started here the
        # terminal stayed blank for all of it. What the start says (a GPU warning,
        # no control socket) waits for the screen; a start that fails ends the app with its
        # message and exit code.
        app = GtuiApp(engine, in_tmux=tmux.inside(), startup_notice=note)
        try:
            rc = await app.run_async()
        finally:
            await app.stop_engine()
        if not isinstance(app.start_error, LockedError):
            return int(rc or 0)
        # Another gtui took the queue between the look above and this start.
        holder = _holder(paths)
        if holder is None:
            raise app.start_error
    pid, session = holder
    target = _session_to_attach(paths, session)
    if target is not None:
        return target
    return await _run_remote(paths, pid)


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
