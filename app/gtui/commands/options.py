"""Options that apply to every subcommand, taken off the command line by ``gtui.cli``.

They live here, not in ``gtui.cli``, so that the command modules can name them without
importing the CLI that imports them (an import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass

from gtui.core.errors import GtuiError
from gtui.core.paths import QueuePaths, queue_paths


@dataclass(frozen=True)
class GlobalOptions:
    fake_gpus: str | None
    no_tmux: bool
    backend: str | None = None  # --backend local|ray: over the file's [cluster]


def queue_file(arg: str) -> QueuePaths:
    """The queue's paths; the file must exist (a typo should not act on nothing). Here, with
    nothing heavy imported, so that `gtui add` can check it before asking the scheduler."""
    paths = queue_paths(arg)
    if not paths.queue.is_file():
        raise GtuiError(f"{arg}: no such queue file; give the path of your queue.toml")
    return paths
