"""The jobs the keys act on: the selected one and the marked ones, as the engine has them now."""

from __future__ import annotations

from gtui.core.api import JobView
from gtui.core.errors import GtuiError
from gtui.ui.rooms.view import MainView


class Selection:
    """Reads the table's cursor and marks, then the engine's view of those jobs: the table may
    be one flush (50 ms) behind, and a key must act on what the engine has."""

    def __init__(self, screen: MainView) -> None:
        self.screen = screen
        self.select_after: str | None = None  # a job added, edited or moved: selected once shown

    def view(self, quiet: bool = False) -> JobView | None:
        """The selected job as the engine has it now; None (said, unless ``quiet``) if none."""
        table = self.screen.table
        name = table.selected
        view = table.view(name) if name else None
        if view is not None and name is not None:
            try:
                view = self.screen.engine.view(name)
            except GtuiError:
                pass
        if view is None and not quiet:
            self.screen.notify("no job selected (the queue is empty or filtered out)", timeout=3)
        return view

    def marked(self) -> list[JobView]:
        """The marked jobs on screen, as the engine has them now (bulk actions), or []."""
        out = []
        for name in self.screen.table.marked_names:
            try:
                out.append(self.screen.engine.view(name))
            except GtuiError:
                continue  # gone from the queue meanwhile
        return out

    def select_pending(self) -> None:
        """Select the job a command asked for, once the table has it."""
        if self.select_after and self.screen.table.select(self.select_after):
            self.select_after = None
