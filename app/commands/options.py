"""Options that apply to every subcommand, taken off the command line by ``gtui.cli``.

They live here, not in ``gtui.cli``, so that the command modules can name them without
importing the CLI that imports them (an import cycle).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GlobalOptions:
    fake_gpus: str | None
    no_tmux: bool
