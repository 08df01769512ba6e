"""The fleet dashboard's two questions: confirm a kill, and the add form with a host choice."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Select

from gtui.fleet.config import Host


class Confirm(ModalScreen[bool]):
    """``y`` says yes, anything else no."""

    DEFAULT_CSS = (
        "Confirm { align: center middle; } Confirm > Label { border: round red; padding: 0 1; }"
    )

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        yield Label(f"{self.question}  y / n")

    def on_key(self, event: object) -> None:
        self.dismiss(getattr(event, "key", "") == "y")


class AddForm(ModalScreen[tuple[Host, str, int | None] | None]):
    """A job for a chosen host: its command line and the GPUs it needs; enter adds, esc not."""

    DEFAULT_CSS = """
    AddForm { align: center middle; }
    AddForm > Vertical { width: 70; height: auto; border: round $accent; padding: 0 1; }
    """
    BINDINGS = [("escape", "cancel", "Cancel")]

    def __init__(self, hosts: Sequence[Host], chosen: Host | None) -> None:
        super().__init__()
        self.hosts = list(hosts)
        self.chosen = chosen or self.hosts[0]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Add a job to the queue of")
            yield Select(
                [(h.key, i) for i, h in enumerate(self.hosts)],
                value=self.hosts.index(self.chosen),
                allow_blank=False,
                id="host",
            )
            yield Input(placeholder="command, run on that host", id="cmd")
            yield Input(placeholder="GPUs (empty: the queue's default)", id="gpus")

    def on_mount(self) -> None:
        self.query_one("#cmd", Input).focus()

    def on_input_submitted(self) -> None:
        cmd = self.query_one("#cmd", Input).value.strip()
        gpus_text = self.query_one("#gpus", Input).value.strip()
        if not cmd:
            self.notify("a command is needed", severity="error")
            return
        if gpus_text and not gpus_text.isdigit():
            self.notify("GPUs: a whole number", severity="error")
            return
        host = self.hosts[int(self.query_one("#host", Select).value)]  # type: ignore[arg-type]
        self.dismiss((host, cmd, int(gpus_text) if gpus_text else None))

    def action_cancel(self) -> None:
        self.dismiss(None)
