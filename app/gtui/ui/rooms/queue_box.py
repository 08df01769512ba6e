"""The queue box around the table: its title (what is shown of how many, the filter, the marks,
the folded done jobs), the run's summary under it, the filter line (/) and E's fold."""

from __future__ import annotations

from gtui.core.units import plural
from gtui.ui.rooms.view import MainView
from gtui.ui.widgets.filter_bar import FilterBar, parse_filter


class QueueBox:
    """Keeps the box's title and subtitle true to the table, and the filter line to the
    table's filter."""

    def __init__(self, screen: MainView) -> None:
        self.screen = screen
        self.summary = ""  # the run's summary line (the engine's), the box's subtitle
        self.title_folded = 0  # the done jobs the title counts as folded

    def update_title(self) -> None:
        s = self.screen
        box = s.query_one("#queue-box")
        table = s.table
        shown = len(table.visible_names)
        total = len(table)
        f = table.filter_name
        filtered = f != "all" or bool(table.filter_text)
        what = f"{shown} of {plural(total, 'job')}" if filtered else plural(shown, "job")
        flt = f" · {f}" + (f" · name~{table.filter_text}" if table.filter_text else "")
        marked = len(table.marked_names)
        mark = f" · {marked} marked (esc unmarks)" if marked else ""
        self.title_folded = table.folded
        if table.folded:
            what = f"{shown} of {plural(total, 'job')} · {table.folded} done folded (E shows)"
        box.border_title = f"Queue{flt} · {what}{mark}  (/ filters)"
        box.border_subtitle = self.summary

    def open_filter(self) -> None:
        """``/``: the filter line under the table, filtering as you type (FilterBar)."""
        s = self.screen
        s.query_one("#filter-line").display = True
        s.query_one(FilterBar).open()

    @property
    def filter_shown(self) -> bool:
        return bool(self.screen.query_one("#filter-line").display)

    def filter_typed(self, value: str) -> None:
        self.screen.table.set_filter(*parse_filter(value))
        self.update_title()

    def filter_closed(self, keep: bool) -> None:
        s = self.screen
        bar = s.query_one(FilterBar)
        table = s.table
        if not keep or not bar.active:
            self.clear_filter()
            return
        table.focus()
        table.action_first()  # the cursor on the first match: x acts on what is shown

    def clear_filter(self) -> None:
        s = self.screen
        bar = s.query_one(FilterBar)
        bar.value = ""
        s.query_one("#filter-line").display = False
        s.query_one("#file-banner").display = False
        s.table.set_filter("all", "")
        self.update_title()
        s.table.focus()

    def toggle_groups(self) -> None:
        """F: each group folded into one line with its counts, or its jobs shown again."""
        s = self.screen
        table = s.table
        table.set_fold_groups(not table.fold_groups)
        if table.fold_groups:
            s.notify("groups folded, one line each: F shows their jobs", timeout=2)
        else:
            s.notify("groups' jobs shown: F folds them", timeout=2)

    def toggle_done(self) -> None:
        """E: the done jobs shown in their place, or folded away (then what runs and waits
        stays in view on a small screen)."""
        s = self.screen
        table = s.table
        table.set_fold_done(not table.fold_done)
        self.update_title()
        if table.fold_done:
            s.notify(f"done jobs folded ({table.folded}): E shows them", timeout=2)
        else:
            s.notify("done jobs shown in their place: E folds them", timeout=2)
