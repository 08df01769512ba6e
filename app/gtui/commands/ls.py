"""``gtui ls``: the gtui tmux sessions, the queue each runs and its folder (two ``queue.toml``
in two folders are two sessions, told apart by the folder), and whether anyone is attached."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from gtui.commands.options import GlobalOptions
from gtui.core import tmux


def _scheduler(queue: str) -> str:
    """The pid holding the queue's lock, or why there is none."""
    if not queue:
        return "?"
    from gtui.core.state.lock import QueueLock

    path = Path(queue)
    if not path.exists():
        return "queue file gone"
    try:
        pid = QueueLock(path).holder()
    except Exception:
        return "?"
    return f"pid {pid}" if pid else "not running"


def _name_and_folder(queue: str) -> tuple[str, str]:
    """The queue file's name and its folder (``~`` for the home directory)."""
    if not queue:
        return "(unknown)", "?"
    path = Path(queue)
    folder = str(path.parent)
    home = str(Path.home())
    if folder == home or folder.startswith(home + "/"):
        folder = "~" + folder[len(home) :]
    return path.name, folder


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    if not tmux.available():
        print("tmux is not installed: no gtui sessions (gtui QUEUE.toml then runs in place)")
        return 0
    sessions = tmux.list_sessions()
    if not sessions:
        print("no gtui sessions (start one with `gtui QUEUE.toml`)")
        return 0
    rows = [("SESSION", "QUEUE", "FOLDER", "CLIENTS", "SINCE", "SCHEDULER")]
    for s in sessions:
        since = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.created)) if s.created else "?"
        clients = f"{s.attached} attached" if s.attached else "detached"
        name, folder = _name_and_folder(s.queue)
        rows.append((s.name, name, folder, clients, since, _scheduler(s.queue)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    print(f"\nattach with `gtui attach QUEUE.toml` (detach again with {tmux.prefix_key()} d)")
    return 0
