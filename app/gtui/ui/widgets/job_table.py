"""The queue table: one keyed row per job, updated in place, fast with 10,000 jobs.

A Line API widget rather than a DataTable: rows live in a dict keyed by job name and are turned
into text only when they are on screen, so a job changing state costs one dict store and the
repaint of one line (if visible), never a rebuild. The visible order (queue order, through the
filter) is recomputed once per batch of changes that can alter it, not per event.

Size: the table and everything that is drawn per row of it (marks for bulk actions, the
cursor); which rows it shows and in what order (its filters, the folds of done jobs and of
groups) is gtui.ui.widgets.job_order, and the backfill note's rule, which reads the whole
queue, is gtui.ui.widgets.backfill.
"""

from __future__ import annotations

import operator
import time
from collections import Counter
from collections.abc import Callable, Iterable
from itertools import islice

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gtui.core.api import JobView
from gtui.core.model import JobState
from gtui.core.sched.eta import Estimate
from gtui.core.state.usage import MemAdvice
from gtui.ui.forecast import progress_cell
from gtui.ui.format import (
    count_states,
    cut_name,
    gpu_cell,
    job_cells,
    note_cell,
    sweep_start,
)
from gtui.ui.widgets.backfill import backfill_note, first_blocker
from gtui.ui.widgets.job_order import FILTERS, fold_groups, group_cells, text_matches, visible

_ORDER = operator.attrgetter("order")
GPU_CELL_MAX = 16  # the gpu column grows to this on a cluster (node2:0,1)

# (key, title, width or 0 = flexible, justify)
_FIXED = (
    ("sel", "", 1, "left"),
    ("glyph", "", 1, "left"),
    ("name", "name", 0, "left"),
    ("state", "state", 9, "left"),
    ("gpu", "gpu", 4, "left"),
    ("mem", "mem", 7, "left"),
    ("tries", "try", 4, "right"),
    ("time", "time", 8, "right"),
    ("note", "note", 0, "left"),
)
# Shown before "note" once some job has progress or an estimate, where the table
# is this wide; narrower, it goes in the note instead (see _with_progress).
_PROGRESS = ("progress", "progress", 14, "left")
PROGRESS_COLUMN_FROM = 96
NAME_MAX = 40  # the name column's widest: a longer name is cut (sweep members keep their tail)
NOTE_ROOM = 40  # what a note needs ("needs 40G, best GPU has 31G free"): the column gives way


def column_widths(
    width: int, longest_name: int, gpu_w: int = 4, *, progress: bool = False
) -> list[tuple[str, str, int, str]]:
    """Fit the columns into ``width``: fixed ones as they are, name and note share the rest.
    ``gpu_w``: wider on a cluster, where the cell names the node (``node2:0,1``);
    ``progress``: with the progress / estimate column."""
    columns = _columns(progress)
    fixed = _fixed_width(columns, gpu_w)
    rest = max(10, width - fixed)
    name_w = max(8, min(longest_name, NAME_MAX, max(12, rest // 2)))
    note_w = max(4, rest - name_w)
    out = []
    for key, title, w, justify in columns:
        if key == "name":
            w = name_w
        elif key == "note":
            w = note_w
        elif key == "gpu":
            w = gpu_w
        out.append((key, title, w, justify))
    return out


def _columns(progress: bool) -> tuple[tuple[str, str, int, str], ...]:
    return (*_FIXED[:-1], _PROGRESS, _FIXED[-1]) if progress else _FIXED


def _fixed_width(columns: tuple[tuple[str, str, int, str], ...], gpu_w: int) -> int:
    """The cells of every column but name and note, with the spaces between all of them."""
    return sum(w for _, _, w, _ in columns) + (len(columns) - 1) + gpu_w - 4


def table_width(longest_name: int, gpu_w: int = 4, *, progress: bool = False) -> int:
    """The width at which no name (up to NAME_MAX) and no note (up to NOTE_ROOM) is cut: the
    main screen puts the log beside the table only where the table keeps this much."""
    fixed = _fixed_width(_columns(progress), gpu_w)
    return fixed + min(max(8, longest_name), NAME_MAX) + NOTE_ROOM


def _with_progress(
    note: Text, progress: Text, waiting: bool, cols: list[tuple[str, str, int, str]]
) -> Text:
    """The note with the progress or estimate where the table has no column for it. A running
    job's bar leads (its note is what it used, if anything); a waiting job's reason leads with
    its key part and its start estimate follows only where it fits whole."""
    if not note.plain:
        return progress
    if not waiting:
        return progress + Text(" · ") + note
    width = next(w for key, _, w, _ in cols if key == "note")
    both = note + Text(" · ") + progress
    return both if both.cell_len <= width else note


def _cell(text: Text, width: int, justify: str) -> Text:
    t = text.copy()
    t.no_wrap = True
    t.overflow = "ellipsis"
    t.truncate(width, overflow="ellipsis", pad=False)
    if t.cell_len < width:
        if justify == "right":
            t.pad_left(width - t.cell_len)
        else:
            t.pad_right(width - t.cell_len)
    return t


class JobTable(ScrollView, can_focus=True):
    """Jobs in queue order; the cursor row is the selected job."""

    COMPONENT_CLASSES = {
        "job-table--header",
        "job-table--cursor",
        "job-table--cursor-blurred",
    }
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,g", "first", "First", show=False),
        Binding("end,G", "last", "Last", show=False),
        Binding("space", "toggle_mark", "Mark", show=False),
        Binding("shift+down", "extend_mark(1)", "Mark down", show=False),
        Binding("shift+up", "extend_mark(-1)", "Mark up", show=False),
    ]

    class Selected(Message):
        """The cursor moved to another job (or to none)."""

        def __init__(self, name: str | None) -> None:
            super().__init__()
            self.name = name

    class MarksChanged(Message):
        """Jobs were marked or unmarked."""

    def __init__(self, *, clock: Callable[[], float] = time.time, id: str | None = None) -> None:
        super().__init__(id=id)
        self.clock = clock
        self._views: dict[str, JobView] = {}
        self._order: list[str] = []  # visible names, queue order
        self._pos: dict[str, int] = {}
        self._in_order = True  # _views iterates in queue order: no sort needed
        self._counts: Counter[JobState] = Counter()  # the jobs by state, kept as they change
        self._longest = 8
        self._gpu_w = 4
        self._cursor = 0
        self._selected: str | None = None
        self.starve_after_s = 600.0  # the queue's starve_after (the main screen sets it)
        self._gen = 0  # bumped at every change of the jobs: the backfill cache's key
        self._blocker_at = -1
        self._blocker_view: JobView | None = None
        self.marked: set[str] = set()  # jobs marked for a bulk action (space, shift+arrows)
        self.filter_name = "all"
        self.filter_text = ""
        self.reorders = 0  # how often the visible order was recomputed (tests, benchmark)
        self.estimates: dict[str, Estimate] = {}
        self.mem_advice: dict[str, MemAdvice] = {}  # a mem far from the last runs
        self._after_paint: list[Callable[[], object]] = []
        # Done jobs are folded (E shows them) while no filter is on: what runs, waits or
        # failed stays in view on a small terminal. The selected job is never folded away.
        self.fold_done = True
        self.folded = 0  # done jobs folded away at the last reorder
        self._names_gen = 0  # bumped when the set of names changes: the sweeps' cache key
        self._sweeps_at = -1
        self._sweeps: dict[int, int] = {}  # a matrix entry -> where its members' names differ
        # F folds each group into one line, drawn on its first visible job's row, with its
        # jobs' counts; the line's job is what the row's keys act on.
        self.fold_groups = False
        self._group_rows: dict[str, str] = {}  # a folded group's row (its job) -> the group
        self._group_counts: dict[str, Counter[str]] = {}

    def after_paint(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` once the rows are next painted (the frame is then out)."""
        self._after_paint.append(callback)
        self.refresh()

    # -- data -----------------------------------------------------------------------------------

    @property
    def selected(self) -> str | None:
        return self._selected

    @property
    def longest_name(self) -> int:
        return self._longest

    @property
    def gpu_width(self) -> int:
        """The gpu column's width: wider on a cluster, where the cell names the node."""
        return self._gpu_w

    @property
    def visible_names(self) -> list[str]:
        return list(self._order)

    def view(self, name: str) -> JobView | None:
        return self._views.get(name)

    @property
    def marked_names(self) -> list[str]:
        """The marked jobs the table shows, in queue order: what a bulk action acts on (a
        marked job the filter hides is not acted on: the user does not see it)."""
        return [n for n in self._order if n in self.marked]

    def action_toggle_mark(self) -> None:
        """space: mark / unmark the job under the cursor, then go on to the next row."""
        name = self.selected
        if name is None:
            return
        self.marked ^= {name}
        self._refresh_row(self._cursor)
        self._move_to(self._cursor + 1)
        self.post_message(self.MarksChanged())

    def action_extend_mark(self, delta: int) -> None:
        """shift+arrow: mark the job under the cursor and the one it moves to."""
        if self.selected is None:
            return
        self.marked.add(self.selected)
        self._refresh_row(self._cursor)
        self._move_to(self._cursor + delta)
        if self.selected is not None:
            self.marked.add(self.selected)
        self._refresh_row(self._cursor)
        self.post_message(self.MarksChanged())

    def clear_marks(self) -> bool:
        """Unmark every job; False when none was marked."""
        if not self.marked:
            return False
        self.marked.clear()
        self.refresh()
        self.post_message(self.MarksChanged())
        return True

    def views(self) -> Iterable[JobView]:
        return self._views.values()

    def __len__(self) -> int:
        return len(self._views)

    @property
    def counts(self) -> dict[JobState, int]:
        """The jobs by state (the header's), kept up to date by every change rather than
        counted again after each: at 100,000 jobs a count was ~30 ms of every batch."""
        return {state: n for state, n in self._counts.items() if n}

    def _folding(self) -> bool:
        """Whether done jobs are folded now: E chose it and no filter is on (a filter shows
        what it matches, @done the done jobs)."""
        return self.fold_done and self.filter_name == "all" and not self.filter_text

    def set_fold_done(self, fold: bool) -> None:
        """E: fold the done jobs away, or show them in their place in the queue."""
        self.fold_done = fold
        self._reorder()

    def set_fold_groups(self, fold: bool) -> None:
        """F: each group folded into one line with its counts, or its jobs shown again."""
        self.fold_groups = fold
        self._reorder()

    def group_row(self, name: str) -> str | None:
        """The group whose folded line ``name``'s row is, if it is one."""
        return self._group_rows.get(name)

    def _matches(self, v: JobView) -> bool:
        if self._folding():
            return v.record.state is not JobState.DONE or v.spec.name == self._selected
        states = FILTERS.get(self.filter_name)
        if states is not None and v.record.state not in states:
            return False
        return not self.filter_text or text_matches(self.filter_text.lower(), v)

    def set_jobs(self, views: Iterable[JobView]) -> None:
        """The whole queue (start, reload, add / remove / move): keep the selection by name.

        Not sorted again when the views come in queue order, as the engine sends them: at
        100,000 jobs the sort was ~0.08 s of the first screen, and again at the first
        placement pass (its whole queue of reasons)."""
        self._gen += 1
        self._names_gen += 1
        views = list(views)
        self._views = {v.spec.name: v for v in views}
        self._counts = Counter(count_states(self._views.values()))
        orders = list(map(_ORDER, views))
        self._in_order = all(map(operator.lt, orders, islice(orders, 1, None)))
        self._longest = max(map(len, self._views), default=8)
        self._reorder()

    def update_jobs(self, views: Iterable[JobView]) -> None:
        """Changed jobs: store them; repaint their lines; reorder only if visibility changed."""
        self._gen += 1
        reorder = False
        top = int(self.scroll_y)
        bottom = top + self.size.height
        repaint: list[int] = []
        for v in views:
            name = v.spec.name
            old = self._views.get(name)
            self._views[name] = v
            if old is not None:
                self._counts[old.record.state] -= 1
            self._counts[v.record.state] += 1
            if v.record.node:  # a cluster: the cell names the node
                wide = min(GPU_CELL_MAX, len(gpu_cell(v)))
                if wide > self._gpu_w:
                    self._gpu_w = wide
                    self.refresh()
            if old is None:
                self._names_gen += 1
                self._longest = max(self._longest, len(name))
                self._in_order = False  # at the dict's end, wherever its place in the queue
                reorder = True
                continue
            if self.fold_groups and v.spec.group is not None:
                reorder = True  # its group's line counts it (or it is that line)
                continue
            was = name in self._pos
            now = self._matches(v)
            if old.order != v.order:
                self._in_order = False
                reorder = True
            elif was != now:
                reorder = True
            elif was:
                i = self._pos[name]
                if top <= i < bottom:  # off-screen rows are painted when scrolled to
                    repaint.append(i)
        if reorder:
            self._reorder()
        elif len(repaint) > 8:
            self.refresh()
        else:
            for i in repaint:
                self._refresh_row(i)

    def remove_jobs(self, names: Iterable[str]) -> None:
        self._gen += 1
        self._names_gen += 1
        changed = False
        for name in names:
            self.marked.discard(name)
            if (old := self._views.pop(name, None)) is not None:
                self._counts[old.record.state] -= 1
                changed = True
        if changed:
            self._reorder()

    def set_filter(self, name: str, text: str = "") -> None:
        self.filter_name = name if name in FILTERS else "all"
        self.filter_text = text.strip()
        self._reorder()

    def _reorder(self) -> None:
        self.reorders += 1
        keep = self._selected
        views = self._views
        folding = self._folding() and self._counts[JobState.DONE] > 0
        order = visible(views, self.filter_name, self.filter_text, fold_done=folding, keep=keep)
        if not self._in_order:  # the dict's order is the queue's (set_jobs saw it)
            order.sort(key=lambda n: views[n].order)
        if self.fold_groups:
            order, self._group_rows, self._group_counts = fold_groups(order, views)
        elif self._group_rows:
            self._group_rows, self._group_counts = {}, {}
        self._order = order
        self.folded = len(views) - len(order) if self._folding() else 0
        self._pos = dict(zip(order, range(len(order)), strict=True))
        self.virtual_size = Size(self.size.width, len(order) + 1)
        if keep is not None and keep in self._pos:
            self._cursor = self._pos[keep]
        else:
            self._cursor = max(0, min(self._cursor, len(order) - 1))
        self._set_selected()
        self._scroll_cursor_into_view()
        # Again once the new height is laid out: a scroll past the old one was cut to it (the
        # cursor on the last job when the done jobs come back above it).
        self.call_after_refresh(self._scroll_cursor_into_view)
        self.refresh()

    # -- cursor ---------------------------------------------------------------------------------

    def select(self, name: str) -> bool:
        """Move the cursor to ``name`` if it is visible, or only folded (a done job asked for
        by name, the one just added say: it is shown, as the selected job always is)."""
        if (
            name not in self._pos
            and name in self._views
            and self._folding()
            and self._views[name].record.state is JobState.DONE
        ):
            self._selected = name
            self._reorder()  # keeps the selected job (and no longer the one it left)
            self.post_message(self.Selected(name))
            return True
        if name not in self._pos:
            return False
        self._move_to(self._pos[name])
        return True

    def _set_selected(self) -> None:
        name = self._order[self._cursor] if self._order else None
        if name != self._selected:
            self._selected = name
            self.post_message(self.Selected(name))

    def _move_to(self, index: int) -> None:
        if not self._order:
            return
        old = self._cursor
        self._cursor = max(0, min(index, len(self._order) - 1))
        if old != self._cursor:
            self._refresh_row(old)
            self._refresh_row(self._cursor)
        left = self._selected
        self._set_selected()
        if left != self._selected and self._kept_only_as_selected(left):
            self._reorder()  # the cursor left a done job it kept in view: it folds now
        self._scroll_cursor_into_view()

    def _kept_only_as_selected(self, name: str | None) -> bool:
        view = self._views.get(name) if name is not None else None
        return view is not None and view.record.state is JobState.DONE and self._folding()

    def _scroll_cursor_into_view(self) -> None:
        rows = max(1, self.size.height - 1)  # line 0 is the column header
        top = int(self.scroll_y)
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False)
        elif self._cursor >= top + rows:
            self.scroll_to(y=self._cursor - rows + 1, animate=False)

    def action_cursor(self, delta: int) -> None:
        self._move_to(self._cursor + delta)

    def action_page(self, direction: int) -> None:
        self._move_to(self._cursor + direction * max(1, self.size.height - 2))

    def action_first(self) -> None:
        self._move_to(0)

    def action_last(self) -> None:
        self._move_to(len(self._order) - 1)

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self._move_to(int(self.scroll_y) + event.y - 1)

    def on_resize(self, event: events.Resize) -> None:
        self.virtual_size = Size(event.size.width, len(self._order) + 1)
        self._scroll_cursor_into_view()

    def tick(self) -> None:
        """Repaint the elapsed time of active jobs on screen (called once a second)."""
        top = int(self.scroll_y)
        for i in range(top, min(len(self._order), top + self.size.height)):
            if self._views[self._order[i]].record.active:
                self._refresh_row(i)

    def set_estimates(self, estimates: dict[str, Estimate]) -> None:
        """Progress, finish and start estimates (gtui.ui.forecast): repaint if they moved."""
        if estimates != self.estimates:
            self.estimates = estimates
            self.refresh()

    def set_mem_advice(self, advice: dict[str, MemAdvice]) -> None:
        """The jobs whose ``mem`` their last runs say is wrong (gtui.ui.forecast): repaint if
        that changed."""
        if advice != self.mem_advice:
            self.mem_advice = advice
            self.refresh()

    # -- painting -------------------------------------------------------------------------------

    def _blocker(self) -> JobView | None:
        """The job later ones overtake by backfill: worked out once per change of the jobs,
        when a row asks."""
        if self._blocker_at != self._gen:
            self._blocker_view = first_blocker(self._views.values())
            self._blocker_at = self._gen
        return self._blocker_view

    def backfill_note(self, view: JobView) -> Text | None:
        """Why a running job went ahead of a multi-GPU job waiting before it."""
        return backfill_note(view, self._blocker, self.starve_after_s)

    def note(self, name: str, base: Text | None = None) -> Text:
        """Row ``name``'s note, uncut: the backfill note or the job's own (``base``, when the
        caller has it), then what its last runs say of its ``mem``, last: shown where it fits."""
        view = self._views[name]
        note = self.backfill_note(view) or (base if base is not None else note_cell(view))
        advice = self.mem_advice.get(name)
        if advice is None:
            return note
        extra = Text(advice.short(), style="yellow")
        return note + Text(" · ") + extra if note.plain else extra

    def _refresh_row(self, index: int) -> None:
        """Repaint row ``index`` if it is on screen. Row i is virtual line i + 1: the column
        header is painted over the first virtual line in view, so the last row can scroll in."""
        self.refresh_line(index + 1)

    def render_line(self, y: int) -> Strip:
        if self._after_paint:  # called once this frame is written out
            for callback in self._after_paint:
                self.call_later(callback)
            self._after_paint.clear()
        width = self.size.width
        base = self.rich_style
        column = bool(self.estimates) and width >= max(
            PROGRESS_COLUMN_FROM, table_width(self._longest, self._gpu_w, progress=True)
        )
        cols = column_widths(width, self._longest, self._gpu_w, progress=column)
        if y == 0:
            header = Text(no_wrap=True, end="")
            for i, (_, title, w, justify) in enumerate(cols):
                if i:
                    header.append(" ")
                header.append_text(_cell(Text(title), w, justify))
            style = self.get_component_rich_style("job-table--header")
            return self._strip(header, width, base + style)
        index = int(self.scroll_y) + y - 1
        if index == 0 and not self._order and self.folded:
            said = f"  every job is done: E shows the {self.folded}"
            return self._strip(Text(said, style="dim"), width, base)
        if index >= len(self._order):
            return Strip.blank(width, base)
        name = self._order[index]
        cells = job_cells(self._views[name], self.clock())
        rec = self._views[name].record
        selected = index == self._cursor
        by_key = {
            "sel": Text(
                ("»" if name in self.marked else "›")
                if selected
                else ("+" if name in self.marked else " "),
                style="bold" if name not in self.marked else "bold yellow",
            ),
            "glyph": cells.glyph,
            "name": cells.name,
            "state": cells.state,
            "gpu": cells.gpu,
            "mem": cells.mem,
            "tries": cells.tries,
            "time": cells.time,
            "note": self.note(name, cells.note),
            # An estimate is worked out every 2 s: one for a job that has ended since is old.
            "progress": progress_cell(
                self.estimates.get(name) if rec.active or rec.waiting else None, self.clock()
            ),
        }
        group = self._group_rows.get(name)
        if group is not None:  # a folded group's line
            by_key.update(group_cells(group, self._group_counts.get(group, Counter())))
        if not column and by_key["progress"].plain:  # no room for the column: in the note
            by_key["note"] = _with_progress(by_key["note"], by_key["progress"], rec.waiting, cols)
        line = Text(no_wrap=True, end="")
        for i, (key, _, w, justify) in enumerate(cols):
            if i:
                line.append(" ")
            cell = by_key[key]
            if key == "name" and cell.cell_len > w:
                keep = self._sweep_from(self._views[name])
                cell = Text(cut_name(cell.plain, w, keep), style=cell.style)
            line.append_text(_cell(cell, w, justify))
        style = base
        if selected:
            cursor = "job-table--cursor" if self.has_focus else "job-table--cursor-blurred"
            style = base + self.get_component_rich_style(cursor)
        return self._strip(line, width, style)

    def _sweep_from(self, view: JobView) -> int:
        """Where a matrix member's name starts to differ from its siblings' (0: not one).
        Worked out for every matrix entry at once, only when a cut name asks, and again only
        once names come or go: never per row, never at a state change."""
        if not view.spec.matrix:
            return 0
        if self._sweeps_at != self._names_gen:
            members: dict[int, list[str]] = {}
            for n, v in self._views.items():
                if v.spec.matrix:
                    members.setdefault(v.spec.entry, []).append(n)
            self._sweeps = {entry: sweep_start(names) for entry, names in members.items()}
            self._sweeps_at = self._names_gen
        return self._sweeps.get(view.spec.entry, 0)

    def _strip(self, text: Text, width: int, style: Style) -> Strip:
        segments = list(text.render(self.app.console))
        strip = Strip(segments).apply_style(style)
        return strip.crop_extend(0, width, style)

    def on_focus(self) -> None:
        self._refresh_row(self._cursor)

    def on_blur(self) -> None:
        self._refresh_row(self._cursor)


__all__ = ["FILTERS", "JobTable", "column_widths", "table_width"]
