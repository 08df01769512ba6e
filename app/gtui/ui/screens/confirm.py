"""A question with a few answers, each on its own key (kill, remove, quit)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


@dataclass(frozen=True)
class Choice:
    key: str  # the key that picks it (also shown on its button)
    label: str
    value: str
    variant: str = "default"  # Button variant: "error" for the destructive one
    default: bool = False  # what enter picks (its button has the focus); else enter cancels


class ConfirmScreen(ModalScreen[str | None]):
    """Dismissed with the chosen value; ``escape`` (or ``n``) cancels with None. Enter presses
    the focused button: the default choice's, else Cancel."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, body: str, choices: list[Choice]) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.body = body
        self.choices = choices
        for c in choices:
            self._bindings.bind(c.key, f"choose('{c.value}')", c.label, show=False)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="confirm"):
            yield Static(self.title_text, classes="dialog-title")
            yield Static(self.body, classes="dialog-body", markup=False)
            # Four buttons at their usual width do not fit the dialog: narrower ones then.
            many = " many" if len(self.choices) > 2 else ""
            with Horizontal(classes=f"dialog-buttons{many}"):
                for c in self.choices:
                    yield Button(
                        f"{c.key} {c.label}",
                        id=f"choice-{c.value}",
                        variant=c.variant,  # type: ignore[arg-type]
                        compact=True,
                    )
                yield Button("esc Cancel", id="choice-cancel", compact=True)

    def on_mount(self) -> None:
        # Nothing destructive under the cursor: the default (never a destructive one), else
        # Cancel.
        default = next((c for c in self.choices if c.default), None)
        target = f"#choice-{default.value}" if default else "#choice-cancel"
        # A dialog opened as the app exits may lose its buttons before it mounts: nothing to
        # focus then, and no error for a screen nobody will see.
        for button in self.query(target).results(Button):
            button.focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        bid = event.button.id or ""
        self.dismiss(None if bid == "choice-cancel" else bid.removeprefix("choice-"))

    def action_choose(self, value: str) -> None:
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)
