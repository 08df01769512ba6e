"""Which jobs the queue table shows, and in what order: its filters, the fold of done jobs,
the fold of each group into one line with its counts. Pure functions of the jobs' views, apart
from the widget: it keeps the result and paints it (gtui.ui.widgets.job_table)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from rich.text import Text

from gtui.core.api import JobView
from gtui.core.model import ACTIVE_STATES, WAITING_STATES, JobState
from gtui.ui.format import COUNT_ORDER

_KINDS = frozenset({"done", "running", "waiting"})

# Groups first, then each state alone (the filter dialog lists them in this order).
FILTERS: dict[str, frozenset[JobState] | None] = {
    "all": None,
    "active": ACTIVE_STATES,
    "waiting": WAITING_STATES,
    "trouble": frozenset({JobState.FAILED, JobState.KILLED, JobState.BLOCKED, JobState.UNKNOWN}),
    **{s.value: frozenset({s}) for s in COUNT_ORDER},
}
FILTER_LABELS = {
    "all": "all jobs",
    "active": "active: running + suspended",
    "waiting": "waiting: queued + held",
    "trouble": "trouble: failed + killed + blocked",
}


def text_matches(text: str, v: JobView) -> bool:
    """The filter's text (lowered) is part of the job's name or of its group's."""
    group = v.spec.group
    return text in v.spec.name.lower() or (group is not None and text in group.lower())


def visible(
    views: Mapping[str, JobView],
    filter_name: str,
    filter_text: str,
    *,
    fold_done: bool,
    keep: str | None,
) -> list[str]:
    """The names the filter lets through, in the views' own order. ``fold_done``: the done
    jobs are folded away, all but ``keep`` (the selected job: its log is what the user reads).
    The state set and the lowered text are taken once: a filter typed with 10,000 jobs runs
    this at every key (benchmarks/daily_use.py)."""
    states = FILTERS.get(filter_name)
    text = filter_text.lower()
    if fold_done:
        done = JobState.DONE
        return [n for n, v in views.items() if v.record.state is not done or n == keep]
    if states is None and not text:
        return list(views)
    if not text:
        return [n for n, v in views.items() if v.record.state in states]  # type: ignore[operator]
    return [
        n
        for n, v in views.items()
        if text_matches(text, v) and (states is None or v.record.state in states)
    ]


def _state_kind(state: JobState) -> str:
    """How a folded group counts a job: done, running (or suspended), waiting (queued or held),
    else its state (failed, killed, ...)."""
    if state is JobState.DONE:
        return "done"
    if state in ACTIVE_STATES:
        return "running"
    if state in WAITING_STATES:
        return "waiting"
    return state.value


def fold_groups(
    order: list[str], views: Mapping[str, JobView]
) -> tuple[list[str], dict[str, str], dict[str, Counter[str]]]:
    """``order`` with each group's jobs folded into its first one's row; the folded rows (a
    row's job -> its group); every group's counts by kind of state (of all its jobs, shown or
    not)."""
    counts: dict[str, Counter[str]] = {}
    for v in views.values():
        group = v.spec.group
        if group is not None:
            counts.setdefault(group, Counter())[_state_kind(v.record.state)] += 1
    rows: dict[str, str] = {}
    seen: set[str] = set()
    out = []
    for n in order:
        group = views[n].spec.group
        if group is not None:
            if group in seen:
                continue
            seen.add(group)
            rows[n] = group
        out.append(n)
    return out, rows, counts


def group_cells(group: str, counts: Counter[str]) -> dict[str, Text]:
    """A folded group's cells: its name and its jobs' counts (done / running / waiting,
    then any other state)."""
    kinds = ["done", "running", "waiting", *sorted(set(counts) - _KINDS)]
    said = " · ".join(f"{counts[k]} {k}" for k in kinds if counts[k] or k in _KINDS)
    blank = Text("")
    return {
        "glyph": Text("▸", style="bold"),
        "name": Text(group, style="bold"),
        "state": Text("group", style="dim"),
        "gpu": blank, "mem": blank, "tries": blank, "time": blank,
        "note": Text(said), "progress": blank,
    }  # fmt: skip
