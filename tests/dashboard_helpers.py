"""What the dashboard's tests in Pilot share: a GtuiApp over a real Engine on fake GPUs, the
screen's text and toasts as the user sees them, and a row selected before a key acts on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from textual import events
from textual.keys import _character_to_key
from textual.pilot import Pilot
from textual.widgets import Input

from gtui.core.model import JobState
from gtui.core.sched.engine import Engine
from gtui.ui.app import GtuiApp
from tests.waiting import pilot_until


def screen_text(app: GtuiApp) -> str:
    """What the active screen shows, as plain text lines."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


def toasts(app: GtuiApp) -> list[tuple[str, str]]:
    """The notifications painted on the active screen now, as (severity, text): what the user
    reads, not what the app meant to say."""
    out = []
    for toast in app.screen.query("Toast"):
        if not toast.display or toast.region.area == 0:
            continue
        severity = next(
            (c[1:] for c in toast.classes if c in ("-information", "-warning", "-error")), "?"
        )
        out.append((severity, " ".join(str(toast.render()).split())))
    return out


def shows_toast(app: GtuiApp, severity: str, *parts: str) -> bool:
    """A toast of ``severity`` is on screen, saying every one of ``parts``."""
    return any(sev == severity and all(p in text for p in parts) for sev, text in toasts(app))


def commands_under_way(app: GtuiApp) -> list[str]:
    """The engine commands the main screen has started and not finished (kill, remove, ...)."""
    return [w.name for w in app.workers if w.group == "commands" and not w.is_finished]


async def main_screen_caught_up(pilot: Pilot[int], app: GtuiApp) -> None:
    """Wait until every callback queued on the main screen so far has run (a dialog's answer is
    delivered with call_next; a marker queued after it runs after it)."""
    done: list[bool] = []
    app.main.call_next(lambda: done.append(True))
    await pilot_until(pilot, lambda: done, what="the main screen's queued callbacks")


def state(engine: Engine, name: str) -> JobState:
    return engine.view(name).record.state


def order(engine: Engine) -> list[str]:
    return [v.spec.name for v in engine.jobs()]


@asynccontextmanager
async def dashboard(
    path: Path, size: tuple[int, int] = (120, 30), fake: str = "2x80G", kill_at_end: bool = True
) -> AsyncIterator[tuple[GtuiApp, Pilot[int], Engine]]:
    engine = Engine(path, fake_gpus=fake)
    app = GtuiApp(engine, host="testhost")
    try:
        # notifications=True: toasts are painted as for a user (run_test leaves them out).
        async with app.run_test(size=size, notifications=True) as pilot:
            await pilot_until(
                pilot, lambda: app.main.ready and len(app.main.table) > 0, what="start"
            )
            yield app, pilot, engine
    finally:
        # Not suppressed: a shutdown that fails is a bug the test must show.
        await engine.shutdown(kill_jobs=kill_at_end)


async def select(pilot: Pilot[int], app: GtuiApp, name: str) -> None:
    """Select ``name`` and wait until the screen has taken it in (its log panel names it), so
    the next key acts on it."""
    await pilot_until(pilot, lambda: app.main.table.select(name), what=f"row {name}")
    await pilot_until(
        pilot,
        lambda: (
            app.main.table.selected == name
            and str(app.main.log_view.border_title).startswith(f"Log · {name}")
        ),
        what=f"{name} selected, its log shown",
    )


async def read_help_through(pilot: Pilot[int], app: GtuiApp) -> str:
    """Open the ``?`` help and read it as a user at this terminal size does: a page, pgdn, the
    next page, to its end. Every page's words, joined (the dialog's borders left out)."""
    from gtui.ui.screens.help import HelpBox, HelpScreen

    await pilot.press("question_mark")
    await pilot_until(
        pilot,
        lambda: isinstance(app.screen, HelpScreen) and bool(app.screen.query("#help-body")),
        what="the help screen",
    )
    box = app.screen.query_one(HelpBox)
    await pilot_until(pilot, lambda: box.has_focus and box.max_scroll_y > 0, what="laid out")
    pages = []
    while True:
        pages.append(" ".join(screen_text(app).replace("│", " ").split()))
        if round(box.scroll_y) >= box.max_scroll_y:
            return " ".join(pages)
        before = box.scroll_y
        await pilot.press("pagedown")
        await pilot_until(
            pilot, lambda before=before: box.scroll_y > before, what="pgdn scrolled the help"
        )


async def type_text(pilot: Pilot[int], text: str, into: str | None = None) -> None:
    """Type ``text`` into the focused input: one key event per character, as a terminal sends
    them and ``pilot.press`` makes them, posted together and handled in order by the same
    bindings; then wait until the input holds the text. ``pilot.press`` waits for the whole
    process to go idle after each key (up to a second a key while the engine works); only those
    waits between the keys go. For printable characters in one field: a key that moves the
    focus (enter, tab) goes through ``pilot.press``, which waits for it. ``into``: the id of
    the field that must have the focus first (after a click or a key that moves it)."""
    app = pilot.app
    if into is not None:
        await pilot_until(pilot, lambda: getattr(app.focused, "id", None) == into, what=into)
    field = app.focused
    assert isinstance(field, Input), f"typing {text!r} with the focus on {field!r}"
    at = field.cursor_position
    want = field.value[:at] + text + field.value[at:]
    for char in text:
        assert char.isprintable(), f"{char!r} is not typed by type_text"
        event = events.Key(char if char.isalnum() else _character_to_key(char), char)
        event.set_sender(app)
        app.post_message(event)
    await pilot_until(pilot, lambda: field.value == want, what=f"{text!r} typed in {field.id}")
