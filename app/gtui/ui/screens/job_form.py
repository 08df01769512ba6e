"""The add / edit form. It stays open and shows the engine's message until the job is accepted.

The cursor starts in the first field shown (name), so fields are typed in the order the form
lists them. Enter moves to the next field (on the last one it submits), ctrl+s submits from
anywhere, as the form's top line says: keys typed ahead of the screen, a whole form at once,
land in the fields they were meant for. The keys that edit a field are the help screen's
(gtui.ui.keys.FORM_KEYS).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from gtui.core.errors import GtuiError, QueueFileError
from gtui.ui.forms import FIELDS, FormError

Submit = Callable[[dict[str, str]], Awaitable[str]]
FIRST_FIELD = FIELDS[0][0]
LAST_FIELD = FIELDS[-1][0]


def form_hint(verb: str) -> str:
    """The form's top line: what enter and ctrl+s do, where they do it (``verb``: Add, Save)."""
    v = verb.lower()
    return (
        f"enter: next field, {v} on the last ({LAST_FIELD}) · ctrl+s: {v} from any field · "
        "esc: cancel · ctrl+u / ctrl+k: clear before / after the cursor"
    )


class JobForm(ModalScreen[str | None]):
    """Dismissed with the job's name once ``submit`` accepted it; None when cancelled."""

    AUTO_FOCUS = f"#field-{FIRST_FIELD}"  # the cursor starts in the first field shown
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
        self._target: Input | None = None  # the field keys go to (focused, or about to be)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="job-form"):
            yield Static(self.title_text, classes="dialog-title")
            yield Static(form_hint(self.verb), id="form-hint", classes="form-hint")
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
        inp = self.query_one(f"#field-{FIRST_FIELD}", Input)
        self._target = inp
        inp.cursor_position = len(inp.value)
        self.call_after_refresh(self._settle)

    def _settle(self) -> None:
        """Once the form is laid out and focused: type the keys typed after the key that
        opened it, before it was there (a whole form sent at once), which the app kept for it
        (GtuiApp.typed_ahead) until now, in order; then the cursor where typing ended."""
        typed = getattr(self.app, "typed_ahead", None)
        keys = typed() if typed is not None else []
        target = self._target or self.query_one(f"#field-{FIRST_FIELD}", Input)
        self.set_focus(target)
        for key in keys:
            self.type_key(key)
        if isinstance(self.focused, Input):
            self.app.cursor_position = self.focused.cursor_screen_offset

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if isinstance(event.widget, Input):
            self._target = event.widget  # a click or tab: typing goes there now

    def on_key(self, event: events.Key) -> None:
        """A key that reached the form itself, with no field focused yet (its focus lands a
        refresh after it opens): it goes to the field being typed into, not to no one."""
        if isinstance(self.focused, Input) or self._target is None:
            return
        if event.is_printable or event.key in ("enter", "tab", "shift+tab", "backspace"):
            event.stop()
            event.prevent_default()
            self.type_key(event)

    def type_key(self, event: events.Key) -> None:
        """Do what ``event`` does in the field being typed into, at once: enter and tab move
        that field before the next key is routed (GtuiApp hands them here directly), so keys
        typed faster than the screen refreshes land in the fields they were meant for."""
        inp = self._target or self.query_one(f"#field-{FIRST_FIELD}", Input)
        if event.key == "ctrl+s":
            self.action_submit()
        elif event.key == "escape":
            self.action_cancel()
        elif event.key == "enter":
            self._next_or_submit(inp)
        elif event.key in ("tab", "shift+tab"):
            self._move(inp, 1 if event.key == "tab" else -1)
        elif event.key == "backspace":
            inp.action_delete_left()
        elif event.character:
            inp.insert_text_at_cursor(event.character)

    def _move(self, inp: Input, delta: int) -> bool:
        """Make the field ``delta`` away the one typed into; False past either end."""
        keys = [k for k, _, _ in FIELDS]
        current = (inp.id or "").removeprefix("field-")
        i = keys.index(current) + delta if current in keys else -1
        if not 0 <= i < len(keys):
            return False
        nxt = self.query_one(f"#field-{keys[i]}", Input)
        self._target = nxt
        self.set_focus(nxt)  # at once: the next key is routed to it
        return True

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
        """Enter moves to the next field, and submits only on the last one: an enter typed at
        the end of the command must not add a job with defaults the user never saw."""
        event.stop()
        self._next_or_submit(event.input)

    def _next_or_submit(self, inp: Input) -> None:
        if not self._move(inp, 1):
            self.action_submit()  # enter on the last field

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
