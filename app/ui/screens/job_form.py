"""The add / edit form. It stays open and shows the engine's message until the job is accepted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from gtui.core.errors import GtuiError, QueueFileError
from gtui.ui.forms import FIELDS, FormError

Submit = Callable[[dict[str, str]], Awaitable[str]]


class JobForm(ModalScreen[str | None]):
    """Dismissed with the job's name once ``submit`` accepted it; None when cancelled."""

    BINDINGS = [
        Binding("escape", "cancel", "Cancel"),
        Binding("ctrl+s", "submit", "Save"),
    ]

    def __init__(
        self, title: str, submit: Submit, values: dict[str, str] | None = None, verb: str = "Add"
    ) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.submit = submit
        self.values = values or {}
        self.verb = verb

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="job-form"):
            yield Static(self.title_text, classes="dialog-title")
            with Grid(id="form-grid"):
                for key, label, placeholder in FIELDS:
                    yield Label(label, classes="form-label")
                    yield Input(
                        self.values.get(key, ""),
                        placeholder=placeholder,
                        id=f"field-{key}",
                        compact=True,
                    )
            yield Static("", id="form-error", markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(
                    f"ctrl+s {self.verb}", id="form-submit", variant="primary", compact=True
                )
                yield Button("esc Cancel", id="form-cancel", compact=True)

    def on_mount(self) -> None:
        inp = self.query_one("#field-cmd", Input)
        inp.focus()
        inp.cursor_position = len(inp.value)

    def form_values(self) -> dict[str, str]:
        return {key: self.query_one(f"#field-{key}", Input).value for key, _, _ in FIELDS}

    def show_error(self, message: str, key: str | None = None) -> None:
        err = self.query_one("#form-error", Static)
        err.update(f"✗ {message}")
        err.add_class("-shown")
        for k, _, _ in FIELDS:
            self.query_one(f"#field-{k}", Input).set_class(k == key, "-invalid")
        if key is not None and any(k == key for k, _, _ in FIELDS):
            self.query_one(f"#field-{key}", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "form-submit":
            self.action_submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_submit(self) -> None:
        self._submit(self.form_values())

    @work(exclusive=True, group="form-submit")
    async def _submit(self, values: dict[str, str]) -> None:
        try:
            name = await self.submit(values)
        except FormError as e:
            self.show_error(str(e), e.key)
            return
        except QueueFileError as e:
            # The engine's message names the file and line; in a form the key is what matters.
            self.show_error(f"{e.key}: {e.detail}" if e.key else e.detail, e.key)
            return
        except GtuiError as e:
            self.show_error(str(e))
            return
        self.dismiss(name)
