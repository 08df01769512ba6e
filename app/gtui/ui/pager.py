"""``o``: the whole log in the user's pager, the dashboard suspended meanwhile.

``$PAGER`` (default ``less -R``: it passes colours, and only colours, through) gets the terminal
through Textual's ``App.suspend()``. The pager runs as a subprocess that is awaited, so the
scheduler in this process (and its control socket) goes on while the user reads; the screen is
not painted meanwhile (a batch update holds every repaint until the pager quits).
"""

from __future__ import annotations

import asyncio
import os
import shlex
from pathlib import Path

from textual.app import App, SuspendNotSupported

DEFAULT_PAGER = "less -R"


def pager_command(path: Path) -> list[str]:
    """``$PAGER`` split as a shell would (``less -R``, ``most``, ``bat --paging=always``)."""
    pager = os.environ.get("PAGER", "").strip() or DEFAULT_PAGER
    try:
        argv = shlex.split(pager)
    except ValueError:
        argv = []
    return [*(argv or shlex.split(DEFAULT_PAGER)), str(path)]


async def page(app: App[object], path: Path | None) -> str | None:
    """Show ``path`` in the pager and come back; a message for the user when it cannot."""
    if path is None or not path.is_file():
        return "no log to open yet" if path is None else f"{path.name} is not written yet"
    argv = pager_command(path)
    try:
        # Held while suspended: a repaint then would write to a closed terminal writer.
        with app.batch_update(), app.suspend():
            proc = await asyncio.create_subprocess_exec(*argv)
            await proc.wait()
    except SuspendNotSupported:
        return "this terminal cannot hand the screen to a pager; read the log at " + str(path)
    except OSError as e:
        return f"cannot run the pager {argv[0]!r} ({e.strerror or e}); set $PAGER"
    return None
