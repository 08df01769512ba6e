"""Options that apply to every subcommand, taken off the command line by ``gtui.cli``.

They live here, not in ``gtui.cli``, so that the command modules can name them without
importing the CLI that imports them (an import cycle).
"""

from __future__ import annotations

from gtui.core.errors import GtuiError
from gtui.core.paths import QueuePaths, queue_paths


class GlobalOptions:
    """A plain class, not a dataclass: ``gtui add`` imports this module and starts without
    dataclasses."""

    __slots__ = ("backend", "fake_gpus", "no_tmux")

    def __init__(self, fake_gpus: str | None, no_tmux: bool, backend: str | None = None) -> None:
        self.fake_gpus = fake_gpus
        self.no_tmux = no_tmux
        self.backend = backend  # --backend local|ray: over the file's [cluster]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalOptions) and (
            (self.fake_gpus, self.no_tmux, self.backend)
            == (other.fake_gpus, other.no_tmux, other.backend)
        )

    def __hash__(self) -> int:
        return hash((self.fake_gpus, self.no_tmux, self.backend))

    def __repr__(self) -> str:
        return (
            f"GlobalOptions(fake_gpus={self.fake_gpus!r}, no_tmux={self.no_tmux!r}, "
            f"backend={self.backend!r})"
        )


def queue_file(arg: str) -> QueuePaths:
    """The queue's paths; the file must exist (a typo should not act on nothing). Here, with
    nothing heavy imported, so that `gtui add` can check it before asking the scheduler."""
    paths = queue_paths(arg)
    if not paths.queue.is_file():
        raise GtuiError(f"{arg}: no such queue file; give the path of your queue.toml")
    return paths
