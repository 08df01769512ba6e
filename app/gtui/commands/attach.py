"""``gtui attach [QUEUE.toml]``: back to a dashboard left running in tmux."""

from __future__ import annotations

import argparse

from gtui.commands.options import GlobalOptions
from gtui.core import tmux
from gtui.core.errors import GtuiError
from gtui.core.paths import queue_paths


def find_session(queue: str | None) -> str:
    """The session to attach to, or a GtuiError saying why there is none (or which to pick)."""
    if not tmux.available():
        raise GtuiError(
            "tmux is not installed, so no gtui session can be running; "
            "open the dashboard with `gtui QUEUE.toml`"
        )
    sessions = tmux.list_sessions()
    if queue is not None:
        paths = queue_paths(queue)
        for s in sessions:
            if s.queue == str(paths.queue):
                return s.name
        if tmux.has_session(paths.tmux_session) and not tmux.session_queue(paths.tmux_session):
            return paths.tmux_session
        # A scheduler for it may run in some other tmux session (gtui --no-tmux in a window).
        from gtui.core.state.lock import QueueLock

        pid = QueueLock(paths).holder() if paths.queue.exists() else None
        if pid:
            session = tmux.session_of_pid(pid)
            if session:
                return session
            theirs = tmux.session_of_pid(pid, own=False)
            if theirs:  # the user's own tmux: their server, not gtui's (core/tmux.py)
                raise GtuiError(
                    f"{paths.queue.name} runs in your own tmux session {theirs}: attach to it "
                    f"with `tmux attach -t {theirs}`, or open its dashboard here with "
                    f"`gtui {queue}`"
                )
            raise GtuiError(
                f"{paths.queue.name} is run by gtui pid {pid}, which is not in tmux: "
                "there is nothing to attach to"
            )
        raise GtuiError(
            f"no gtui session runs {paths.queue}\nstart it with `gtui {queue}` "
            "(`gtui ls` lists the sessions)"
        )
    if not sessions:
        raise GtuiError("no gtui session is running; start one with `gtui QUEUE.toml`")
    if len(sessions) == 1:
        return sessions[0].name
    names = "\n".join(f"  {s.name}  {s.queue or '(queue unknown)'}" for s in sessions)
    raise GtuiError(
        f"{len(sessions)} gtui sessions run; name the queue: gtui attach QUEUE.toml\n{names}"
    )


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    from gtui.commands.dashboard import require_terminal

    name = find_session(ns.queue)
    require_terminal("attaching to a tmux session")
    return tmux.attach(name)
