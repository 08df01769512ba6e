"""The dashboard driven by Pilot over a real Engine, real queue file, real processes, fake GPUs.

Every key of docs/dashboard.md is pressed and the engine's state (and the queue file) checked after.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
from contextlib import suppress
from pathlib import Path

import psutil
import pytest
from textual import events
from textual.command import Command, CommandList, CommandPalette
from textual.widgets import Input

from gtui.core.errors import GtuiError
from gtui.core.model import JobState
from gtui.core.sched.engine import Engine
from gtui.ui.app import GtuiApp
from gtui.ui.keys import (
    DETAIL_KEYS,
    FORM_KEYS,
    KEYS,
    LOG_KEYS,
    PANEL_KEYS,
    ROOM_KEYS,
    VIEW_KEYS,
)
from gtui.ui.screens.confirm import ConfirmScreen
from gtui.ui.screens.help import MORE as HELP_MORE
from gtui.ui.screens.help import HelpBox, HelpScreen
from gtui.ui.screens.job_form import JobForm
from gtui.ui.widgets.gpu_panel import GpuPanel
from gtui.ui.widgets.job_table import JobTable
from gtui.ui.widgets.keybar import KeyBar
from gtui.ui.widgets.log_view import LogView
from tests.conftest import write_queue
from tests.dashboard_helpers import (
    commands_under_way,
    dashboard,
    main_screen_caught_up,
    order,
    read_help_through,
    screen_text,
    select,
    shows_toast,
    state,
    toasts,
    type_text,
)
from tests.waiting import pilot_until as until

# poll: the tests' changes (a start, an end, a key's command) wake the scheduler; a poll every
# 0.2 s only published GPU reads, each a repaint of the screen.
QUEUE = """
[settings]
poll = "1h"
kill_grace = "1s"

[[jobs]]
name = "long"
cmd = "sleep 30"
gpus = 1
mem = "10G"

[[jobs]]
name = "bad"
cmd = "echo 'ModuleNotFoundError: No module named foo'; exit 1"
gpus = 0

[[jobs]]
name = "w1"
cmd = "echo one"
gpus = 1
after = ["long"]

[[jobs]]
name = "w2"
cmd = "echo two"
gpus = 1
after = ["long"]

[[jobs]]
name = "w3"
cmd = "echo three"
gpus = 1
after = ["long"]
"""


async def test_shows_the_queue_in_order_with_running_and_failed_jobs(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        await until(pilot, lambda: state(engine, "bad") == JobState.FAILED)
        await until(pilot, lambda: app.main.table.view("bad").record.state == JobState.FAILED)
        assert app.main.table.visible_names == ["long", "bad", "w1", "w2", "w3"]
        header = str(app.main.query_one("#header").render())
        assert "testhost" in header and "SIMULATED GPUs" in header
        assert "1 running" in header and "1 failed" in header


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_footer_shows_every_key_at_80_and_200_columns(
    queue: Path, size: tuple[int, int]
) -> None:
    async with dashboard(queue, size=size) as (app, pilot, _engine):

        def missing() -> list[str]:
            footer = " ".join(screen_text(app).splitlines()[-2:])
            return [k.shown for k in KEYS if f"{k.shown} {k.label}" not in footer]

        try:
            await until(pilot, lambda: not missing())
        except AssertionError:
            raise AssertionError(f"keys missing from the footer: {missing()}") from None


async def test_add_form_adds_a_job_to_the_engine_and_the_file(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, JobForm))
        await pilot.click("#field-name")
        await type_text(pilot, "added", into="field-name")
        await pilot.click("#field-cmd")
        await type_text(pilot, "echo hi", into="field-cmd")
        await pilot.click("#field-gpus")
        await pilot.press("0")
        await pilot.press("ctrl+s")  # (enter moves to the next field)
        await until(pilot, lambda: "added" in order(engine), what="the new job")
        assert not isinstance(app.screen, JobForm)
        assert 'name = "added"' in queue.read_text()
        await until(pilot, lambda: state(engine, "added") == JobState.DONE)
        await until(pilot, lambda: app.main.table.selected == "added")


async def test_the_forms_editing_keys_in_the_help_edit_a_field(queue: Path) -> None:
    """Every editing key the help screen lists for the form does what it says there, in a
    field of the add form (ctrl+u first: it clears a whole line typed wrong)."""
    from rich.console import Console

    from gtui.ui.keys import FORM_KEYS
    from gtui.ui.screens.help import help_text

    listed = " ".join(shown for shown, _ in FORM_KEYS)
    for key in ("ctrl+u", "ctrl+k", "ctrl+w", "ctrl+a", "ctrl+e", "ctrl+d", "ctrl+s", "enter"):
        assert key in listed, key
    rendered = Console(width=120, record=True)
    rendered.print(help_text())
    assert "In the add / edit form" in rendered.export_text()
    async with dashboard(queue) as (app, pilot, _engine):
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, JobForm))
        form = app.screen
        assert isinstance(form, JobForm)
        hint = str(form.query_one("#form-hint").render())
        assert "ctrl+u" in hint and "ctrl+s: add from any field" in hint, hint
        field = form.query_one("#field-name", Input)
        await until(pilot, lambda: app.focused is field, what="the cursor in name")

        async def typed(*keys: str) -> str:
            await pilot.press(*keys)
            await pilot.pause()
            return field.value

        assert await typed(*"old words") == "old words"
        assert await typed("ctrl+w") == "old "
        assert await typed("ctrl+u") == ""
        assert await typed(*"abcdef", "ctrl+a", "ctrl+d") == "bcdef"
        assert await typed("ctrl+e", "left", "left", "ctrl+k") == "bcd"
        assert await typed("ctrl+a", "ctrl+k") == ""


async def test_add_form_shows_the_engines_error_and_stays_open(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, _engine):
        before = queue.read_text()
        await pilot.press("a")
        await until(pilot, lambda: isinstance(app.screen, JobForm))
        form = app.screen
        assert isinstance(form, JobForm)
        await pilot.click("#field-cmd")
        await type_text(pilot, "echo x", into="field-cmd")
        await pilot.click("#field-mem")
        await type_text(pilot, "lots", into="field-mem")
        await pilot.press("ctrl+s")
        err = form.query_one("#form-error")
        await until(pilot, lambda: "mem" in str(err.render()), what="the error in the form")
        assert isinstance(app.screen, JobForm)
        assert queue.read_text() == before
        # A shape error is caught before the engine: gpus must be a number.
        await pilot.click("#field-mem")
        await pilot.press(*["backspace"] * 4)
        await pilot.click("#field-gpus")
        await type_text(pilot, "two", into="field-gpus")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: "gpus" in str(err.render()))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, JobForm))
        assert queue.read_text() == before


async def test_edit_changes_a_waiting_job(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await select(pilot, app, "w2")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, JobForm))
        await pilot.click("#field-priority")
        await pilot.press("end", "backspace", "7", "ctrl+s")
        await until(pilot, lambda: engine.view("w2").spec.priority == 7)
        assert "priority = 7" in queue.read_text()


async def test_e_on_a_failed_job_edits_it_then_r_runs_it_again(queue: Path) -> None:
    """Fix the typo and run it again: `e` on the failed job, the command fixed, ctrl+s, then
    one key (r) queues it again, and it runs the fixed command."""
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "bad") == JobState.FAILED)
        await select(pilot, app, "bad")
        await pilot.press("e")
        await until(pilot, lambda: isinstance(app.screen, JobForm), what="the edit form")
        await pilot.click("#field-cmd")
        await pilot.press("end", "ctrl+u")
        await type_text(pilot, "echo fixed", into="field-cmd")
        await pilot.press("ctrl+s")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the offer")
        assert 'cmd = "echo fixed"' in queue.read_text(), queue.read_text()
        assert state(engine, "bad") == JobState.FAILED  # not run again until asked
        await pilot.press("r")
        await until(pilot, lambda: state(engine, "bad") == JobState.DONE, what="bad run again")
        assert engine.view("bad").spec.cmd == "echo fixed"


async def test_edit_refuses_a_running_job_in_the_cores_words(queue: Path) -> None:
    from gtui.core.sched.transitions import why_not_edit

    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        await select(pilot, app, "long")
        before = queue.read_text()
        await pilot.press("e")
        said = why_not_edit(engine.view("long").record)
        assert said is not None and said.startswith("long is running: ")
        await until(pilot, lambda: shows_toast(app, "warning", said), what="the refusal")
        with pytest.raises(
            GtuiError, match=re.escape(said)
        ):  # the engine refuses it in the same words
            await engine.edit("long", {"priority": 3})
        assert not isinstance(app.screen, JobForm)
        assert queue.read_text() == before and state(engine, "long") == JobState.RUNNING


async def test_remove_asks_then_removes_from_engine_and_file(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await select(pilot, app, "w3")
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await main_screen_caught_up(pilot, app)  # the answer (cancel) has been acted on...
        assert commands_under_way(app) == []  # ...and started no remove
        assert "w3" in order(engine) and '"w3"' in queue.read_text()
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: shows_toast(app, "information", "removed w3"))
        assert order(engine) == ["long", "bad", "w1", "w2"]  # w3 gone, and only w3
        assert '"w3"' not in queue.read_text()
        await until(pilot, lambda: "w3" not in app.main.table.visible_names)


async def test_move_up_down_top(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await select(pilot, app, "w3")
        await pilot.press("K")
        await until(pilot, lambda: order(engine)[2:] == ["w1", "w3", "w2"])
        await until(pilot, lambda: app.main.table.visible_names[2:] == ["w1", "w3", "w2"])
        assert app.main.table.selected == "w3"  # the cursor follows the job
        await pilot.press("J")  # (shift+arrows mark jobs; J moves)
        await until(pilot, lambda: order(engine)[2:] == ["w1", "w2", "w3"])
        before = queue.read_text()
        await pilot.press("J")  # already last: a move that changes nothing, and no error
        await until(pilot, lambda: not commands_under_way(app), what="the move to finish")
        assert order(engine)[2:] == ["w1", "w2", "w3"] and queue.read_text() == before
        assert not [t for t in toasts(app) if t[0] == "error"], toasts(app)
        await pilot.press("t")
        await until(pilot, lambda: order(engine)[0] == "w3")
        await until(pilot, lambda: app.main.table.visible_names[0] == "w3")
        await select(pilot, app, "w1")
        await pilot.press("K")
        await until(pilot, lambda: order(engine).index("w1") < order(engine).index("bad"))


ENDED_BETWEEN = """
[settings]
poll = "0.2s"

[[jobs]]
name = "first"
cmd = "true"
gpus = 0
after = ["gate"]

[[jobs]]
name = "gate"
cmd = "while [ ! -e go ]; do sleep 0.05; done"
gpus = 0

[[jobs]]
name = "d{i}"
cmd = "true"
gpus = 0
matrix = { i = [1, 2, 3, 4, 5, 6, 7] }

[[jobs]]
name = "second"
cmd = "true"
gpus = 0
after = ["gate"]
"""


async def test_j_and_k_move_a_job_past_the_next_waiting_one_over_ended_ones(
    tmp_path: Path,
) -> None:
    """Seven done jobs between two waiting ones: one K moves `second` above `first`, one J
    back below it (not eight presses, one per ended job)."""
    q = write_queue(tmp_path, ENDED_BETWEEN)
    ended = [f"d{i}" for i in range(1, 8)]
    try:
        async with dashboard(q) as (app, pilot, engine):
            await until(pilot, lambda: all(state(engine, n) == JobState.DONE for n in ended))
            await select(pilot, app, "second")
            await pilot.press("K")
            await until(pilot, lambda: order(engine) == ["second", "first", "gate", *ended])
            await until(pilot, lambda: not commands_under_way(app), what="the move to finish")
            await pilot.press("J")
            await until(pilot, lambda: order(engine) == ["first", "second", "gate", *ended])
            await until(pilot, lambda: not commands_under_way(app), what="the move to finish")
            before = q.read_text()
            await pilot.press("J")  # the last waiting job: past ended ones changes nothing
            await until(pilot, lambda: not commands_under_way(app), what="the move to finish")
            assert q.read_text() == before
    finally:
        (tmp_path / "go").touch()


async def test_a_queue_opened_again_with_every_job_ended_says_how_to_run_it_again(
    tmp_path: Path,
) -> None:
    """The demo a second time: everything ended in the first run. Its first screen says how to
    see it again, and what it says works: `gtui retry q.toml --all` runs every job again, done
    ones too (with the dashboard's scheduler, over its socket)."""
    from tests.conftest import gtui

    q = write_queue(
        tmp_path,
        '[[jobs]]\nname = "ok"\ncmd = "true"\ngpus = 0\n\n'
        '[[jobs]]\nname = "bad"\ncmd = "exit 3"\ngpus = 0\n',
    )
    first = gtui("run", str(q), "--fake-gpus", "1x80G")
    assert first.returncode == 1, first.stderr  # one job failed
    async with dashboard(q) as (app, pilot, engine):
        said = "`gtui retry q.toml --all` runs them all again"
        await until(pilot, lambda: shows_toast(app, "information", said), what="the note")
        attempts = {n: engine.view(n).record.attempt for n in ("ok", "bad")}
        # In a thread: this loop runs the scheduler that answers the command.
        r = await asyncio.to_thread(gtui, "retry", str(q), "--all")
        assert r.returncode == 0, r.stderr
        assert "queued ok again" in r.stdout and "queued bad again" in r.stdout, r.stdout
        await until(
            pilot,
            lambda: (
                all(engine.view(n).record.attempt > a for n, a in attempts.items())
                and all(engine.view(n).record.final for n in attempts)
            ),
            what="both run again",
        )
    r = gtui("retry", str(q))
    assert r.returncode == 2 and "--all" in r.stderr, r.stderr


async def test_pause_and_resume_a_waiting_and_a_running_job(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await select(pilot, app, "w1")
        await pilot.press("p")
        await until(pilot, lambda: state(engine, "w1") == JobState.HELD)
        await pilot.press("p")
        await until(pilot, lambda: state(engine, "w1") == JobState.QUEUED)
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        await select(pilot, app, "long")
        await pilot.press("p")
        await until(pilot, lambda: state(engine, "long") == JobState.SUSPENDED)
        pid = engine.view("long").record.pid
        assert pid is not None and psutil.Process(pid).status() == psutil.STATUS_STOPPED
        await pilot.press("p")
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)


async def test_x_twice_at_once_asks_once(queue: Path) -> None:
    """Two x read at once (the question is asked in a worker): one "Kill?" question, and esc
    answers it, leaving no second one behind."""
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        await select(pilot, app, "long")
        for _ in range(2):
            app.post_message(events.Key("x", "x"))  # one read: no wait between them
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await until(pilot, lambda: not commands_under_way(app)[1:], what="one worker left")
        assert sum(isinstance(s, ConfirmScreen) for s in app.screen_stack) == 1
        await pilot.press("escape")
        await until(pilot, lambda: not commands_under_way(app), what="the question answered")
        assert not isinstance(app.screen, ConfirmScreen)
        assert state(engine, "long") == JobState.RUNNING


async def test_pause_and_resume_the_whole_queue(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        header = app.main.query_one("#header")
        await pilot.press("P")
        await until(pilot, lambda: engine.paused)
        await until(pilot, lambda: "PAUSED" in str(header.render()))
        await pilot.press("P")
        await until(pilot, lambda: not engine.paused)
        await until(pilot, lambda: "dispatch ON" in str(header.render()))


async def test_kill_asks_then_kills_the_running_job(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        pid = engine.view("long").record.pid
        await select(pilot, app, "long")
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("escape")  # cancelled: still running
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await main_screen_caught_up(pilot, app)  # the answer (cancel) has been acted on...
        assert commands_under_way(app) == []  # ...and started no kill
        assert state(engine, "long") == JobState.RUNNING
        assert pid is not None and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(pilot, lambda: state(engine, "long") == JobState.KILLED)
        assert (pid is not None and not psutil.pid_exists(pid)) or (
            psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        )
        # its dependents can now never run
        await until(pilot, lambda: state(engine, "w1") == JobState.BLOCKED)


async def test_retry_runs_a_failed_job_again(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "bad") == JobState.FAILED)
        await select(pilot, app, "bad")
        await pilot.press("r")
        await until(pilot, lambda: engine.view("bad").record.attempt == 2)
        await until(pilot, lambda: state(engine, "bad") == JobState.FAILED)


async def test_l_focuses_the_log_f_toggles_follow_escape_goes_back(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "bad") == JobState.FAILED)
        await select(pilot, app, "bad")
        log = app.main.query_one(LogView)
        await until(pilot, lambda: "ModuleNotFoundError" in log.text().plain)
        await pilot.press("l")
        assert app.focused is log
        assert log.follow
        await pilot.press("f")
        assert not log.follow
        await pilot.press("f")
        assert log.follow
        await pilot.press("up")  # scrolling up stops following
        assert not log.follow
        await pilot.press("escape")
        assert app.focused is app.main.table


async def test_filter_by_state_and_name(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "bad") == JobState.FAILED)
        await until(pilot, lambda: app.main.table.view("bad").record.state == JobState.FAILED)
        await pilot.press("slash", *"@trouble", "enter")
        await until(pilot, lambda: app.main.table.visible_names == ["bad"])
        assert "trouble" in str(app.main.query_one("#queue-box").border_title)
        await pilot.press("slash")
        await until(pilot, lambda: app.main.query_one("#filter-bar").has_focus)
        await pilot.press("ctrl+u", "w", "enter")  # ctrl+u: the line emptied, then "w"
        await until(pilot, lambda: app.main.table.visible_names == ["w1", "w2", "w3"])


async def test_keys_read_at_once_after_the_filter_line_opened_go_where_a_person_expects(
    queue: Path,
) -> None:
    """The rest of a filter and the key after it, read from the terminal in one go while the
    line has the focus (the terminal reader posts them all before the line handles any): the
    letters land in the line, enter keeps the filter, and the `p` after it pauses the match
    instead of landing in the line (the enter's close moves the focus only later)."""
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: app.main.table.view("w2") is not None)
        await pilot.press("slash")
        bar = app.main.query_one("#filter-bar", Input)
        await until(pilot, lambda: bar.has_focus)
        for name, char in [*((c, c) for c in "w2"), ("enter", "\r"), ("p", "p")]:
            app.post_message(events.Key(name, char))  # one read: no wait between them
        await until(pilot, lambda: state(engine, "w2") == JobState.HELD)
        assert bar.value == "w2" and app.main.table.visible_names == ["w2"]
        assert app.focused is app.main.table


async def test_help_screen_lists_every_key(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, _):
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))

        def missing() -> list[str]:
            text = " ".join(screen_text(app).replace("│", " ").split())
            return [k.shown for k in KEYS if f"{k.shown} {k.help[:40]}" not in text]

        try:
            await until(pilot, lambda: not missing())
        except AssertionError:
            raise AssertionError(f"keys missing from the help: {missing()}") from None
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_help_shows_every_bound_key_at_120x40_and_80x24(
    queue: Path, size: tuple[int, int]
) -> None:
    """Every key bound in ui/keys.py (the main screen's, the GPU panel's, the queue view's, the
    rare ones such as M, the detail view's, the log's and the form's) is on the help screen, read
    page by page at a terminal of 40 rows and of 24; "more ↓" says the help goes on, until the
    last page."""
    bound = [(k.shown, k.help) for k in (*KEYS, *PANEL_KEYS, *VIEW_KEYS, *ROOM_KEYS)]
    bound += [(k.shown, k.help) for k in DETAIL_KEYS] + [*LOG_KEYS, *FORM_KEYS]
    async with dashboard(queue, size=size) as (app, pilot, _):
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        box = app.screen.query_one(HelpBox)
        await until(pilot, lambda: box.border_subtitle == HELP_MORE, what="more ↓ at the top")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        text = await read_help_through(pilot, app)
        assert app.screen.query_one(HelpBox).border_subtitle == "", "more ↓ said at the end"
        missing = [s for s, what in bound if " ".join(f"{s} {what[:40]}".split()) not in text]
        assert not missing, f"keys missing from the help: {missing}"


async def test_the_mouse_works_too(queue: Path) -> None:
    """Clicking a key in the footer runs it; clicking a row selects it."""
    async with dashboard(queue) as (app, pilot, _engine):
        bar = app.main.query_one(KeyBar)
        lines = bar.render().plain.splitlines()
        y = next(i for i, line in enumerate(lines) if "? Help" in line)
        await pilot.click(KeyBar, offset=(lines[y].index("? Help") + 2, y))
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        await pilot.click(JobTable, offset=(5, 3))  # line 0 is the header: 1 long, 2 bad, 3 w1
        await until(pilot, lambda: app.main.table.selected == "w1")


def palette_input(app: GtuiApp) -> Input | None:
    """The command palette's input, when the palette is open and the cursor is in it."""
    focused = app.focused
    if isinstance(app.screen, CommandPalette) and isinstance(focused, Input):
        return focused if focused.screen is app.screen else None
    return None


def palette_choice(app: GtuiApp) -> str | None:
    """The command the palette would run on enter: the highlighted one, once it has finished
    searching (a later batch of hits could otherwise push another to the top)."""
    palette = app.screen
    if not isinstance(palette, CommandPalette):
        return None
    searching = CommandPalette._GATHER_COMMANDS_GROUP
    if any(w.group == searching and not w.is_finished for w in app.workers):
        return None
    commands = palette.query_one(CommandList)
    if commands.highlighted is None:
        return None
    option = commands.get_option_at_index(commands.highlighted)
    return option.hit.text if isinstance(option, Command) else None


async def test_command_palette_offers_and_runs_every_action(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        titles = {c.title for c in app.get_system_commands(app.main)}
        assert {k.palette for k in KEYS} <= titles
        await pilot.press("ctrl+p")
        await until(pilot, lambda: palette_input(app) is not None, what="the palette, typing")
        await pilot.press(*"whole q")
        await until(
            pilot,
            lambda: palette_choice(app) == "Pause or resume the whole queue",
            what="the palette to offer the whole queue's pause, first",
        )
        await pilot.press("enter")
        await until(pilot, lambda: engine.paused, what="the palette's pause")
        await until(pilot, lambda: not isinstance(app.screen, CommandPalette))


async def test_quit_without_running_jobs_leaves_at_once(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[[jobs]]\nname = "quick"\ncmd = "true"\ngpus = 0\n')
    async with dashboard(q) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "quick") == JobState.DONE)
        await pilot.press("q")
        await until(pilot, lambda: app.return_code is not None or not app.is_running)
        assert not isinstance(app.screen, ConfirmScreen)


async def test_the_quit_question_names_what_the_engine_holds_without_a_view_per_job(
    queue: Path,
) -> None:
    """The quit question asks the engine for names and states only (a view of every job held
    the screen for seconds at 100,000 jobs): the same jobs, in the same order, as its views
    say, an ended one (its record in the store only) among them left out; the question
    names them."""
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        await until(pilot, lambda: state(engine, "bad") == JobState.FAILED)
        wanted = (JobState.RUNNING, JobState.SUSPENDED, JobState.QUEUED, JobState.FAILED)
        views = [(v.spec.name, v.record.state) for v in engine.jobs() if v.record.state in wanted]
        assert engine.names_in(*wanted) == views and ("bad", JobState.FAILED) in views
        await pilot.press("q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        body = str(app.screen.query_one(".dialog-body").render())
        assert "long" in body and "1 running" in body and "bad" not in body


async def test_quit_while_jobs_run_asks_and_leaves_them_running(queue: Path) -> None:
    pid = None
    try:
        async with dashboard(queue, kill_at_end=False) as (app, pilot, engine):
            await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
            pid = engine.view("long").record.pid
            await pilot.press("q")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            body = str(app.screen.query_one(".dialog-body").render())
            assert "Keep going" in body and "Leave (l)" in body and "long" in body
            await pilot.press("l")  # leave: stop scheduling, the job goes on
            await until(pilot, lambda: app.engine_stopped and not app.is_running)
        assert pid is not None and psutil.pid_exists(pid)
        # The next gtui re-adopts it.
        again = Engine(queue, fake_gpus="2x80G")
        await again.start()
        try:
            assert again.view("long").record.state == JobState.RUNNING
            assert again.view("long").record.pid == pid
        finally:
            await again.shutdown(kill_jobs=True)
    finally:
        if pid is not None:
            with suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


async def test_quit_can_kill_the_running_jobs(queue: Path) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        pid = engine.view("long").record.pid
        await pilot.press("ctrl+q")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("k")
        await until(pilot, lambda: not app.is_running, timeout=20)
        # The app left only after the kill had waited for the job's end: gone now, no delay.
        assert pid is not None
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    # Recorded as killed (by you), not left "running" for the next start to guess about.
    again = Engine(queue, fake_gpus="2x80G")
    await again.start()
    try:
        assert again.view("long").record.state == JobState.KILLED
    finally:
        await again.shutdown()


async def test_log_follows_a_job_that_writes(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.2s"

        [[jobs]]
        name = "talker"
        gpus = 0
        cmd = "for i in $(seq 1 400); do printf 'step %d\\\\r step %d done\\\\n' $i $i; [ $((i % 100)) = 0 ] && sleep 0.2; done; sleep 30"
        """,
    )
    async with dashboard(q) as (app, pilot, _engine):
        await select(pilot, app, "talker")
        log = app.main.query_one(LogView)
        await until(pilot, lambda: "step 400 done" in log.text().plain, timeout=20)
        text = log.text().plain
        assert "\r" not in text and "step 400\n" not in text


async def test_at_80_columns_a_failed_jobs_diagnosis_takes_the_side_until_l(
    queue: Path,
) -> None:
    from gtui.ui.widgets.diagnosis import DiagnosisPanel

    async with dashboard(queue, size=(80, 24)) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "bad") == JobState.FAILED)
        await select(pilot, app, "bad")
        log = app.main.query_one(LogView)
        diagnosis = app.main.query_one(DiagnosisPanel)
        await until(pilot, lambda: diagnosis.display and not log.display, what="diagnosis only")
        # what it says is painted in a later frame than the panel's place
        await until(pilot, lambda: "ModuleNotFoundError" in screen_text(app), what="its words")
        await pilot.press("l")  # the log comes back, focused
        await until(pilot, lambda: log.display and app.focused is log, what="the log, focused")
        await pilot.press("escape")
        await select(pilot, app, "long")  # a running job: the log, no diagnosis
        await until(pilot, lambda: log.display and not diagnosis.display, what="log again")


# -- the engine's notices, as the user sees them ---------------------------------------------


async def test_a_broken_edit_of_the_queue_file_is_shown_and_the_last_good_queue_kept(
    queue: Path,
) -> None:
    async with dashboard(queue) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "long") == JobState.RUNNING)
        good = queue.read_text()
        # Someone saves a mistake while gtui runs.
        queue.write_text(good + '\n[[jobs]]\nname = "broken"\ncmd = "true"\ngpus = "two"\n')
        # A banner that stays until the file is fixed, not a toast that goes.
        banner = app.main.query_one("#file-banner")
        await until(
            pilot,
            lambda: (
                banner.display
                and "queue file not reloaded, last good version kept" in screen_text(app)
                and "gpus: expected an integer" in screen_text(app)
            ),
            what="the broken edit reported on screen",
        )
        assert not shows_toast(app, "error", "queue file not reloaded")
        assert order(engine) == ["long", "bad", "w1", "w2", "w3"]
        assert app.main.table.visible_names == ["long", "bad", "w1", "w2", "w3"]
        assert state(engine, "long") == JobState.RUNNING  # running jobs are not touched
        # Mended: reloaded, said so, and the new job is on screen.
        queue.write_text(good + '\n[[jobs]]\nname = "mended"\ncmd = "sleep 30"\ngpus = 0\n')
        await until(pilot, lambda: shows_toast(app, "information", f"reloaded {queue.name}"))
        await until(pilot, lambda: "mended" in app.main.table.visible_names)
        assert not banner.display  # fixed: the banner is gone
        assert "broken" not in order(engine)


async def test_a_failure_that_pauses_the_queue_is_told_even_over_the_help_screen(
    tmp_path: Path,
) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.2s"
        on_failure = "pause"

        [[jobs]]
        name = "gate"
        gpus = 0
        cmd = "while [ ! -e release ]; do sleep 0.05; done; exit 1"
        """,
    )
    async with dashboard(q) as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "gate") == JobState.RUNNING)
        await pilot.press("question_mark")  # the user is reading the help when it fails
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        (tmp_path / "release").touch()
        await until(
            pilot,
            lambda: shows_toast(app, "warning", "gate failed: queue paused (on_failure)"),
            what="the pause told over the help screen",
        )
        assert engine.paused
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HelpScreen))
        header = app.main.query_one("#header")
        await until(pilot, lambda: "PAUSED" in str(header.render()), what="PAUSED in the header")


async def test_a_broken_fake_gpu_spec_is_shown_and_the_last_good_one_kept(
    tmp_path: Path,
) -> None:
    """Seen by the regular poll (no job ends meanwhile: ``a`` runs until the test ends)."""
    spec = tmp_path / "gpus.txt"
    spec.write_text("2x80G\n")
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.2s"

        [[jobs]]
        name = "a"
        cmd = "while [ ! -e release ]; do sleep 0.05; done"
        """,
    )
    async with dashboard(q, fake="@gpus.txt") as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "a") == JobState.RUNNING)
        spec.write_text("2x80G:lots\n")
        await until(
            pilot,
            lambda: shows_toast(app, "warning", "expected a size", "using the last good one"),
            what="the broken GPU spec reported on screen",
        )
        assert len(engine.gpus.snapshot.gpus) == 2
        panel = app.main.query_one(GpuPanel)
        assert panel.read is not None and len(panel.read.snapshot.gpus) == 2


async def test_a_broken_fake_gpu_spec_first_read_when_a_job_ends_is_shown_too(
    tmp_path: Path,
) -> None:
    """A job's end reads the fake GPUs at once (the freed GPU is seen without a poll); that read
    must tell a new error like a poll does, or the poll after it, finding the same error, never
    does. The poll is an hour, so the job's end is the only read after the break."""
    spec = tmp_path / "gpus.txt"
    spec.write_text("2x80G\n")
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "1h"

        [[jobs]]
        name = "gate"
        cmd = "while [ ! -e release ]; do sleep 0.05; done"
        """,
    )
    async with dashboard(q, fake="@gpus.txt") as (app, pilot, engine):
        await until(pilot, lambda: state(engine, "gate") == JobState.RUNNING)
        spec.write_text("2x80G:lots\n")
        (tmp_path / "release").touch()
        await until(pilot, lambda: state(engine, "gate") == JobState.DONE)
        # The job's end is published, then its GPU read runs: wait for that read, which is
        # the only one (the poll is an hour away).
        await until(
            pilot,
            lambda: engine.gpus is not None and engine.gpus.snapshot.error,
            what="the job's end to read the broken spec",
        )
        await until(
            pilot,
            lambda: shows_toast(app, "warning", "expected a size", "using the last good one"),
            what="the broken GPU spec, read at the job's end, reported on screen",
        )
