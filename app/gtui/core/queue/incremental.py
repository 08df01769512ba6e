"""A live edit of one job, taken without reading the whole queue file again.

A sweep's queue file holds 100,000 ``[[jobs]]`` tables; a person (or a script) changes one
job's ``mem`` and saves. A whole load re-parses, expands and checks every table (about 2 s at
100,000 jobs); here the new text is compared with the one the scheduler runs, and when the only
bytes that differ lie inside one ``[[jobs]]`` table, with the same lines, the same explicit
``name`` and no ``matrix``, only that table is read (the queue-file reader's plain path alone)
and checked as ``gtui add`` checks a new entry (``check_new_entry``) against the other jobs'
names. Anything else (several tables, a header, settings, a matrix, a derived name, lines added
or removed, a table the plain reader refuses) returns None, and the caller loads the whole file
as before.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gtui.core.model import JobSpec, Settings
from gtui.core.queue.checks import check_new_entry
from gtui.core.queue.parse import read_plain_document

__all__ = ["OneTable", "edited_job", "one_table"]

_BLOCK = 1 << 16
_HEADER = "[[jobs]]"


@dataclass(frozen=True)
class OneTable:
    """The one ``[[jobs]]`` table whose bytes changed: its fields before and after, and the
    line of its header (1-based)."""

    old: Mapping[str, Any]
    new: Mapping[str, Any]
    line: int
    keys: Mapping[str, int]  # the new table's keys' lines in the file (for messages)


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, compared a block at a time (string equality is C speed)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i : i + _BLOCK] == b[i : i + _BLOCK]:
        i += _BLOCK
    if i >= n:
        return n
    lo, hi = i, min(i + _BLOCK, n)  # the first difference is in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo if a[lo] != b[lo] else hi


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the common suffix, at most ``limit``."""
    la, lb = len(a), len(b)
    n = 0
    while n < limit:
        step = min(_BLOCK, limit - n)
        if a[la - n - step : la - n] != b[lb - n - step : lb - n]:
            break
        n += step
    if n >= limit:
        return limit
    lo, hi = n, min(n + _BLOCK, limit)  # the suffix length is in [lo, hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[la - mid : la - lo] == b[lb - mid : lb - lo]:
            lo = mid
        else:
            hi = mid
    return lo


def _table(text: str) -> tuple[Mapping[str, Any], Mapping[str, int]] | None:
    """The fields of the one [[jobs]] table ``text`` is, and its keys' lines in ``text``."""
    doc = read_plain_document(text)
    if doc is None:
        return None
    data, scan = doc.data, doc.scan
    jobs = data.get("jobs")
    entries = scan.entries("jobs")
    if set(data) != {"jobs"} or not isinstance(jobs, list) or len(jobs) != 1 or not entries:
        return None
    fields = jobs[0]
    return (fields, entries[0].keys) if isinstance(fields, dict) else None


def one_table(old: str, new: str) -> OneTable | None:
    """The one ``[[jobs]]`` table ``new`` changed in ``old``, or None (see the module doc)."""
    if old == new or "\r" in old or "\r" in new:
        return None
    p = _common_prefix(old, new)
    s = _common_suffix(old, new, min(len(old), len(new)) - p)
    start = old.rfind("\n[", 0, p) + 1  # the header of the table the first change is in
    end = old.find("\n[", p)  # the next header
    end = len(old) if end < 0 else end + 1
    first_line = old[start : old.find("\n", start)]
    if first_line.strip() != _HEADER or p < start + len(first_line):
        return None  # not a [[jobs]] table, or its header itself changed
    if len(old) - s > end:
        return None  # the change runs into the next table
    new_end = end + len(new) - len(old)
    old_t, new_t = old[start:end], new[start:new_end]
    if "\n[" in new_t.rstrip("\n") or old_t.count("\n") != new_t.count("\n"):
        return None  # a header added, or lines added or removed (later jobs' lines move)
    if new_end < len(new) and new[new_end] != "[":
        return None
    before, after = _table(old_t), _table(new_t)
    if before is None or after is None:
        return None
    shift = old.count("\n", 0, start)  # lines above the table
    keys = {k: line + shift for k, line in after[1].items()}
    return OneTable(before[0], after[0], shift + 1, keys)


class _Without(Collection[str]):
    """The known names but one (the edited job keeps its own), without copying 100,000."""

    def __init__(self, names: Collection[str], one: str) -> None:
        self._names, self._one = names, one

    def __contains__(self, name: object) -> bool:
        return name != self._one and name in self._names

    def __iter__(self) -> Iterator[str]:
        return (n for n in self._names if n != self._one)

    def __len__(self) -> int:
        return len(self._names) - (self._one in self._names)


def edited_job(
    path: Path | str,
    old: str,
    new: str,
    settings: Settings,
    specs: Mapping[str, JobSpec],
    pool: Sequence[int | None] | None,
) -> tuple[JobSpec, list[str]] | None:
    """The new spec and warnings of the one job ``new`` edited in ``old`` (the text the
    scheduler runs, whose jobs are ``specs``), checked; None when only a whole load can say.
    Raises QueueFileError for a mistake in the edit, as a whole load would."""
    change = one_table(old, new)
    if change is None:
        return None
    name = change.old.get("name")
    if (
        not isinstance(name, str)
        or change.new.get("name") != name
        or "matrix" in change.old
        or "matrix" in change.new
    ):
        return None  # a derived or changed name, or a matrix: other jobs may be involved
    spec = specs.get(name)
    if spec is None or spec.line != change.line:
        return None
    checked = check_new_entry(
        path,
        change.new,
        settings,
        _Without(specs, name),
        spec.entry,
        pool,
        change.line,
        change.keys,
    )
    if checked is None or len(checked[0]) != 1:
        return None
    jobs, warnings = checked
    return jobs[0], warnings
