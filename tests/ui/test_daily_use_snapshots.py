"""Snapshots of the daily-use layouts at 80x24 and 120x30 (pytest-textual-snapshot), on the real
engine and queue of tests/ui/test_ui_snapshots.py: the filter line, the add form, bulk selection.
Update with ``--snapshot-update`` and look at every picture before committing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gtui.ui.app import GtuiApp
from gtui.ui.screens.help import HelpScreen
from tests.ui.test_ui_snapshots import Typed, Until, make_app, settled  # noqa: F401  (a fixture)

SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 30)], ids=["80x24", "120x30"])


def _filtered(names: list[str]) -> Until:
    return Until(f"the table shows {names}", lambda app: app.main.table.visible_names == names)


@SIZES
def test_typing_a_filter_shows_the_matches_the_filter_line_and_the_count(  # type: ignore[no-untyped-def]
    snap_compare,
    make_app,  # noqa: F811
    size,
) -> None:
    """/ then "lr": the table filters as you type, the line under it shows what is typed,
    the title says how many of the queue's jobs are shown."""
    steps = ["slash", "l", "r", _filtered(["lr0.1", "sweep-lr0.001"])]
    assert snap_compare(make_app(), terminal_size=size, run_before=settled(*steps))


@SIZES
def test_enter_keeps_the_filter_visible_and_puts_the_cursor_on_the_first_match(  # type: ignore[no-untyped-def]
    snap_compare,
    make_app,  # noqa: F811
    size,
) -> None:
    def on_first(app: GtuiApp) -> bool:
        return app.main.table.has_focus and app.main.table.selected == "after-eval"

    steps = ["slash", *"@trouble", "enter", _filtered(["eval-ckpt7", "after-eval"]), "down"]
    steps += [Until("the cursor on after-eval, the table focused", on_first)]
    assert snap_compare(make_app(), terminal_size=size, run_before=settled(*steps))


@SIZES
def test_marked_jobs_show_a_plus_and_the_title_counts_them(  # type: ignore[no-untyped-def]
    snap_compare,
    make_app,  # noqa: F811
    size,
) -> None:
    """space on two rows: each marked row shows + (» under the cursor), the title says how
    many are marked and that esc unmarks."""
    steps = ["space", "down", "space", "up"]
    steps += [Until("two marked", lambda app: len(app.main.table.marked_names) == 2)]
    assert snap_compare(make_app(), terminal_size=size, run_before=settled(*steps))


@SIZES
def test_a_broken_queue_file_stays_as_a_banner_under_the_header(  # type: ignore[no-untyped-def]
    snap_compare,
    make_app,  # noqa: F811
    size,
) -> None:
    written: list[bool] = []

    def broken_and_shown(app: GtuiApp) -> bool:
        if not written:  # someone saves a mistake while the dashboard runs
            path = app.engine.queue_path
            path.write_text(path.read_text() + '\n[[jobs]]\ncmd = "true"\ngpus = "two"\n')
            written.append(True)
        return bool(app.main.query_one("#file-banner").display)

    steps = [Until("the broken file's banner", broken_and_shown)]
    assert snap_compare(make_app(), terminal_size=size, run_before=settled(*steps))


@SIZES
def test_the_add_form_says_enter_moves_on_and_ctrl_s_adds(  # type: ignore[no-untyped-def]
    snap_compare,
    make_app,  # noqa: F811
    size,
) -> None:
    """a, enter past the name, a command, enter: the cursor in gpus (nothing added), the top
    line saying so."""

    def in_field(name: str) -> Callable[[GtuiApp], bool]:
        return lambda app: getattr(app.focused, "id", None) == f"field-{name}"

    steps = [
        "a",
        Until("the cursor in name", in_field("name")),
        "enter",
        Until("the cursor in cmd", in_field("cmd")),
        Typed("python train.py --lr 0.1"),
        "enter",
        Until("the cursor in gpus", in_field("gpus")),
    ]
    assert snap_compare(make_app(), terminal_size=size, run_before=settled(*steps))


@SIZES
def test_the_main_screen_shows_gpus_queue_log_and_what_waits(  # type: ignore[no-untyped-def]
    snap_compare,
    make_app,  # noqa: F811
    size,
) -> None:
    """The dashboard as it opens: the header's counts, the GPU bars, the queue (done, failed,
    blocked, held, waiting, each with its note), the first job's log, the keys in the footer,
    and the queue box's bottom line saying what waits in the reason's key part."""
    assert snap_compare(make_app(), terminal_size=size, run_before=settled())


@SIZES
def test_the_help_screen_lists_the_keys_of_every_screen(  # type: ignore[no-untyped-def]
    snap_compare,
    make_app,  # noqa: F811
    size,
) -> None:
    """? on the dashboard: the help screen over the whole terminal, the keys listed."""

    def shown(app: GtuiApp) -> bool:
        return isinstance(app.screen, HelpScreen) and bool(app.screen.query("#help-body"))

    steps = ["question_mark", Until("the help screen", shown)]
    assert snap_compare(make_app(), terminal_size=size, run_before=settled(*steps))
