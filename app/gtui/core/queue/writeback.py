"""Edits made from the dashboard or ``gtui add``, written back into the queue file.

Every operation:

- holds an ``fcntl`` lock on ``QueuePaths(queue).file_lock`` while it reads, edits and writes, so
  two writers never lose each other's change;
- checks the new text with :func:`load_queue` before anything reaches the disk (a bad edit raises
  :class:`QueueFileError` and the file is unchanged); a file that is already broken is refused;
- writes atomically: a temp file in the same folder, fsync, ``os.replace``, keeping the file's
  mode (through a symlink, the file it points to is replaced);
- keeps the user's layout and comments. Each ``[[jobs]]`` table is a block of lines: the comment
  lines directly above its header (no blank line between) belong to it, as do its keys, comments
  among them and its sub-tables (``[jobs.env]``), up to its last line of data. Moving permutes
  blocks in place, so blank lines and section comments between tables stay where they were; key
  edits inside a block go through tomlkit, which keeps every other line as written. A queue
  written as an inline array ``jobs = [{...}]`` is edited element by element in its text
  (gtui.core.queue.inlinearray), so the comments between elements stay; tomlkit edits the
  whole array only for a layout that module cannot follow.
- parses the file once: the check of the file as it is parses it, and the edit reuses that
  parse (the new text is parsed once more, by its check).

Jobs expanded from a ``matrix`` entry share one table, so:

- ``move_job`` moves the whole entry (all its jobs stay together, in matrix order);
- ``remove_job`` takes that job's value out of the matrix list when the matrix has one key (the
  other jobs stay; the entry goes when its last value does); with several keys one combination
  cannot be taken out of the product, so it refuses and says which entry to edit;
- ``update_job`` splits the job out first when the matrix has one key: its value leaves the list
  and a standalone ``[[jobs]]`` with the job's concrete name, command and fields (plus the edit)
  is written right after the entry, so the edit applies to that job only and its name (its run
  state) is kept. The entry's last job is not split out: the entry itself becomes its table, in
  place (``matrix`` goes, name, command, ``after``, ``cwd`` and ``env`` become the job's own), so
  the entry's comments and unchanged lines stay. An edit that changes nothing splits nothing.
  With several keys it refuses, as for remove; it refuses too when another job waits for every
  job of the entry by the entry's name as written (``after = ["train-{ds}"]``): split out, the
  job would silently leave what that job waits for.

Size: every edit of the queue file (append, update, remove, move) shares the format-keeping
parse and the atomic write; one module keeps them consistent.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import itertools
import os
import re
import tomllib
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomlkit
from tomlkit.items import Array, InlineTable, Table

from gtui.core.atomic import write_atomically
from gtui.core.deadline import check as check_deadline
from gtui.core.errors import GtuiError, QueueFileError
from gtui.core.model import JobSpec, Settings
from gtui.core.paths import ensure_state_dir, queue_paths
from gtui.core.queue.inlinearray import InlineJobs, inline_jobs
from gtui.core.queue.placeholders import substitute_matrix
from gtui.core.queue.queuefile import (
    JOB_KEYS,
    QueueFile,
    _scan_and_parse,
    check_new_entry,
    decode_queue,
    load_queue,
    read_queue_bytes,
    read_queue_text,
    scalar_text,
)
from gtui.core.queue.queuewatch import digest_of_bytes
from gtui.core.queue.tomlscan import Scan, scan
from gtui.core.units import first_few

Where = Literal["up", "down", "top"]
# A root ``jobs = [`` (an inline array of jobs); a false match only costs the slower append.
# `jobs = [` (the key bare or quoted) at a line's start. Searched from the literal ``jobs`` and
# its line start checked apart: the same search anchored with ``(?m)^[ \t]*`` tried a match at
# every line, 60-90 ms of a 100,000-job file at each `gtui add`.
_JOBS_ARRAY = re.compile(r"jobs([\"']?)[ \t]*=[ \t]*\[")


def has_inline_jobs(text: str) -> bool:
    """Whether the file holds its jobs as an inline array, ``jobs = [...]``."""
    for m in _JOBS_ARRAY.finditer(text):
        start = m.start()
        lead = text[text.rfind("\n", 0, start) + 1 : start]
        quote = m.group(1)
        if quote:
            if not lead.endswith(quote):
                continue
            lead = lead[:-1]
        elif lead.endswith(("'", '"')):
            continue
        if not lead.strip(" \t"):
            return True
    return False
_Container = Table | InlineTable


# ---------------------------------------------------------------------------------------------
# locking and atomic write


@contextlib.contextmanager
def _locked(queue: Path) -> Iterator[None]:
    paths = queue_paths(queue)
    ensure_state_dir(paths)
    fd = os.open(paths.file_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        # A scheduler's request may have waited here past its client's deadline: then the
        # client has said it was not done, and it must not be.
        check_deadline()
        yield
    finally:
        os.close(fd)  # closing releases the lock


# ---------------------------------------------------------------------------------------------
# blocks of lines


@dataclass(frozen=True)
class _Block:
    start: int  # 0-based index of its first line (attached comments included)
    end: int  # 0-based index after its last line of data


UTF8_BOM = b"\xef\xbb\xbf"


def _read(p: Path) -> tuple[str, bytes]:
    """The file's text, and the UTF-8 byte-order mark it starts with (b"" if none): the
    write puts the mark back, as it keeps all of the file outside the edited job."""
    data = read_queue_bytes(p)
    return decode_queue(p, data), UTF8_BOM if data.startswith(UTF8_BOM) else b""


def _blocks(sc: Scan) -> list[_Block] | None:
    """The ``[[jobs]]`` blocks in file order, or None when jobs are an inline array.

    A block owns the comment lines directly above its header, and the comment lines directly
    after its last line of data when a blank line (or the end of the file) follows them; other
    comments (section dividers) belong to no block and stay where they are.
    """
    entries = sc.entries("jobs")
    if not entries:
        return []
    if any(e.first == 0 for e in entries):
        return None

    def is_comment(i: int) -> bool:
        return not sc.content[i] and bool(sc.lines[i].strip())

    starts: list[int] = []
    ends: list[int] = []
    floor = 0
    for e in entries:
        start = e.first - 1
        while start - 1 >= floor and is_comment(start - 1):
            start -= 1
        end = e.last
        while end > e.first and not sc.content[end - 1]:
            end -= 1
        starts.append(start)
        ends.append(end)
        floor = end
    out: list[_Block] = []
    for i, e in enumerate(entries):
        end = ends[i]
        limit = starts[i + 1] if i + 1 < len(entries) else e.last
        j = end
        while j < limit and is_comment(j):
            j += 1
        if j > end and (j >= len(sc.lines) or (j < limit and not sc.lines[j].strip())):
            end = j
        out.append(_Block(starts[i], end))
    return out


def _newline(lines: Sequence[str]) -> str:
    return "\r\n" if lines and lines[0].endswith("\r\n") else "\n"


def _ends(text: str, nl: str) -> str:
    return text if text.endswith("\n") else text + nl


def _join(parts: Sequence[str]) -> str:
    return "".join(parts)


def _has_text(lines: Sequence[str]) -> bool:
    return any(line.strip() for line in lines)


def _rebuild(lines: list[str], blocks: list[_Block], cores: list[str | None], nl: str) -> str:
    """Put ``cores[i]`` in the slot of ``blocks[i]`` (None removes it, merging the gaps)."""
    out: list[str] = []
    gaps = [lines[: blocks[0].start]]
    for a, b in itertools.pairwise(blocks):
        gaps.append(lines[a.end : b.start])
    gaps.append(lines[blocks[-1].end :])
    drop: set[int] = set()
    for i, core in enumerate(cores):
        if core is None:
            if not _has_text(gaps[i + 1]):
                drop.add(i + 1)
            elif not _has_text(gaps[i]):
                drop.add(i)
    for i, core in enumerate(cores):
        if i not in drop:
            out.append(_join(gaps[i]))
        if core is not None:
            out.append(_ends(core, nl))
    if len(cores) not in drop:
        out.append(_join(gaps[-1]))
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# one entry, through tomlkit


def _plain(value: Any) -> Any:
    """A field value as tomlkit should write it (tuples become lists)."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        table = tomlkit.inline_table()
        for k, v in value.items():
            table[k] = _plain(v)
        return table
    return value


def _unwrap(value: Any) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def _apply(table: _Container, fields: Mapping[str, Any]) -> None:
    """Set (or, for None / an empty ``after``, delete) keys of one job table."""
    for key, value in fields.items():
        if value is None or (key == "after" and value in ([], ())):
            if key in table:
                del table[key]
            continue
        plain = _plain(value)
        if key in table and _unwrap(table[key]) == _unwrap(plain):
            continue  # unchanged: keep it as the user wrote it
        if key == "env" and key in table and isinstance(table[key], Table):
            sub = table[key]
            for k in list(sub.keys()):
                if k not in value:
                    del sub[k]
            for k, v in value.items():
                if k not in sub or _unwrap(sub[k]) != v:
                    sub[k] = v
            continue
        table[key] = plain


def _check_fields(path: Path, fields: Mapping[str, Any]) -> None:
    for key in fields:
        if key not in JOB_KEYS:
            close = difflib.get_close_matches(key, JOB_KEYS, n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise QueueFileError(str(path), f"unknown key{hint}", None, key)


def _new_table(fields: Mapping[str, Any], inline: bool) -> _Container:
    table: _Container = tomlkit.inline_table() if inline else tomlkit.table()
    ordered = sorted(fields, key=lambda k: JOB_KEYS.index(k) if k in JOB_KEYS else 99)
    for key in ordered:
        value = fields[key]
        if value is None or (key == "after" and value in ([], ())):
            continue
        table[key] = _plain(value)
    return table


def _table_text(table: Table) -> str:
    doc = tomlkit.document()
    aot = tomlkit.aot()
    aot.append(table)
    doc.append("jobs", aot)
    return doc.as_string()


def _standalone(raw: Mapping[str, Any], job: JobSpec) -> dict[str, Any]:
    """The fields of one job of a matrix entry, written out on its own."""
    out: dict[str, Any] = {k: v for k, v in raw.items() if k != "matrix"}
    out["name"] = job.name
    out["cmd"] = job.cmd
    if job.after:
        out["after"] = list(job.after)
    else:
        out.pop("after", None)
    if "cwd" in raw:
        out["cwd"] = job.cwd
    if job.env:
        out["env"] = dict(job.env)
    return out


def _set_keys(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The keys a job table written from ``fields`` holds, with their plain values."""
    return {
        k: _unwrap(_plain(v))
        for k, v in fields.items()
        if not (v is None or (k == "after" and v in ([], ())))
    }


def _waiting_for_entry(ctx: _Ctx, job: JobSpec) -> list[str]:
    """The jobs that wait for ``job`` only through its matrix entry's name as written (an
    ``after`` that names ``train-{ds}``, not ``train-a``)."""
    template = ctx.data["jobs"][job.entry].get("name")
    if not isinstance(template, str) or "{" not in template:
        return []
    out: list[str] = []
    for other in ctx.queue.jobs:
        if job.name not in other.after:
            continue
        after = ctx.data["jobs"][other.entry].get("after", [])
        written = {
            substitute_matrix(a, other.matrix, escape=False)
            for a in ([after] if isinstance(after, str) else after)
            if isinstance(a, str)
        }
        if job.name not in written and template in written:
            out.append(other.name)
    return out


# ---------------------------------------------------------------------------------------------
# the operations


@dataclass
class _Ctx:
    path: Path
    text: str
    queue: QueueFile
    sc: Scan
    data: dict[str, Any]

    def job(self, name: str) -> JobSpec:
        for job in self.queue.jobs:
            if job.name == name:
                return job
        raise GtuiError(f"{self.path}: no job named {name!r}")

    def siblings(self, job: JobSpec) -> list[JobSpec]:
        return [j for j in self.queue.jobs if j.entry == job.entry]

    def blocks(self) -> list[_Block] | None:
        """The [[jobs]] blocks, or None when the jobs must be edited with tomlkit as a whole
        (an inline ``jobs = [...]`` array, or a layout the scanner could not follow)."""
        if "jobs" in self.sc.tables[0].keys:
            return None
        blocks = _blocks(self.sc)
        if blocks is None or len(blocks) != len(self.data.get("jobs", [])):
            return None
        return blocks

    def inline(self) -> InlineJobs | None:
        """The elements of an inline ``jobs = [...]`` array, edited piece by piece (module
        gtui.core.queue.inlinearray); None: not such an array, or a layout it cannot follow."""
        if "jobs" not in self.sc.tables[0].keys:
            return None
        found = inline_jobs(self.text, self.sc)
        if found is None or len(found.pieces) != len(self.data.get("jobs", [])):
            return None
        return found

    @property
    def nl(self) -> str:
        return _newline(self.sc.lines)


def _edit(
    path: Path | str,
    change: Callable[[_Ctx], str],
    *,
    pool: Sequence[int | None] | None,
    adding: bool = False,
) -> QueueFile:
    p = Path(path)
    with _locked(p):
        text, mark = _read(p)
        try:
            queue = load_queue(p, text=text)
        except QueueFileError as e:
            raise QueueFileError(
                e.path, f"{e.detail} (fix the file first; nothing was changed)", e.line, e.key
            ) from None
        # The check above parsed this very text: its scan and parse are reused (one parse
        # per edit, not two: 641 ms against 256 ms at 10,000 jobs).
        sc, data = _scan_and_parse(str(p), text)
        ctx = _Ctx(p, text, queue, sc, data)
        new_text = change(ctx)
        try:
            result = load_queue(p, text=new_text, pool=pool)
        except QueueFileError as e:
            # A new job's lines are not in the file yet: its line number would point nowhere.
            what = "the job was not added" if adding else "the file was not changed"
            line = None if adding else e.line
            raise QueueFileError(e.path, f"{e.detail} ({what})", line, e.key) from None
        if new_text != text:
            write_atomically(p, mark + new_text.encode())
        return result


def _matrix_refusal(job: JobSpec, n: int, what: str) -> str:
    keys = ", ".join(job.matrix)
    return (
        f"{job.name} is one of the {n} jobs of the matrix ({keys}) of this [[jobs]] entry; one "
        f"combination of a matrix with several keys cannot be {what} alone: edit the entry"
    )


def _refuse_matrix(ctx: _Ctx, job: JobSpec, what: str) -> QueueFileError:
    message = _matrix_refusal(job, len(ctx.siblings(job)), what)
    return QueueFileError(str(ctx.path), message, job.line or None, "matrix")


def _edit_element(
    table_text: str, edit: Callable[[_Container], object]
) -> tuple[str | None, str | None]:
    """One inline table's text edited through tomlkit alone: its new text (None when no key is
    left) and the text of a table ``edit`` returns to insert after it."""
    doc = tomlkit.parse("v = " + table_text)
    table = doc["v"]
    assert isinstance(table, InlineTable)
    extra = edit(table)
    new = table.as_string().strip() if len(table.keys()) else None
    if extra is None:
        return new, None
    assert isinstance(extra, InlineTable)
    return new, extra.as_string().strip()


def _entry_edit(ctx: _Ctx, entry: int, edit: Callable[[_Container], _Container | None]) -> str:
    """Apply ``edit`` to the table of entry ``entry``; it returns a table to insert after it."""
    blocks = ctx.blocks()
    inline = ctx.inline() if blocks is None else None
    if inline is not None:
        slots = [[inline.parts(i)] for i in range(len(inline.pieces))]
        new, extra_text = _edit_element(inline.pieces[entry].table, edit)
        prefix, _, suffix = inline.parts(entry)
        slots[entry] = [] if new is None else [(prefix, new, suffix)]
        if extra_text is not None:
            slots[entry].append(inline.new_piece(entry, extra_text))
        return inline.rebuild(slots)
    if blocks is None:
        doc = tomlkit.parse(ctx.text)
        arr = doc["jobs"]
        extra = edit(arr[entry])
        if extra is not None:
            arr.insert(entry + 1, extra)
        if isinstance(arr, Array) and len(arr[entry].keys()) == 0:
            del arr[entry]
        return doc.as_string()
    block = blocks[entry]
    core = "".join(ctx.sc.lines[block.start : block.end])
    doc = tomlkit.parse(core)
    table = doc["jobs"][0]
    extra = edit(table)
    nl = ctx.nl
    new_core: str | None = doc.as_string() if len(table.keys()) else None
    if extra is not None:
        assert isinstance(extra, Table)
        text = _table_text(extra).replace("\n", nl)
        new_core = text if new_core is None else _ends(new_core, nl) + nl + text
    cores: list[str | None] = ["".join(ctx.sc.lines[b.start : b.end]) for b in blocks]
    cores[entry] = new_core
    return _rebuild(list(ctx.sc.lines), blocks, cores, nl)


def append_job(
    path: Path | str, fields: Mapping[str, Any], *, pool: Sequence[int | None] | None = None
) -> str:
    """Add a job at the end of the queue; returns its name (the first one, for a matrix)."""
    p = Path(path)
    _check_fields(p, fields)
    if "cmd" not in fields:
        raise QueueFileError(str(p), "a job needs a `cmd`", None, "cmd")

    def change(ctx: _Ctx) -> str:
        blocks = ctx.blocks()
        nl = ctx.nl
        inline = ctx.inline() if blocks is None else None
        if inline is not None:
            slots = [[inline.parts(i)] for i in range(len(inline.pieces))]
            new = _new_table(fields, inline=True).as_string().strip()
            slots[-1].append(inline.new_piece(len(slots) - 1, new))
            return inline.rebuild(slots)
        if blocks is None:
            doc = tomlkit.parse(ctx.text)
            doc["jobs"].append(_new_table(fields, inline=True))
            return doc.as_string()
        table = _new_table(fields, inline=False)
        assert isinstance(table, Table)
        text = _table_text(table).replace("\n", nl)
        if not blocks:
            body = ctx.text
            if body and not body.endswith("\n"):
                body += nl
            return body + (nl if body.strip() else "") + text
        last = blocks[-1].end
        before = "".join(ctx.sc.lines[:last])
        after = "".join(ctx.sc.lines[last:])
        return _ends(before, nl) + nl + text + after

    result = _edit(p, change, pool=pool, adding=True)
    new_entry = max((j.entry for j in result.jobs), default=-1)
    added = [j.name for j in result.jobs if j.entry == new_entry]
    return added[0] if added else str(fields.get("name", ""))


@dataclass(frozen=True)
class Appended:
    """What :func:`append_known` wrote: the new jobs, their warnings, the file's new text."""

    jobs: list[JobSpec]
    warnings: list[str]
    text: str
    digest: bytes  # of the bytes written (QueueWatch's), made here, off the scheduler's loop


def append_known(
    path: Path | str,
    fields: Mapping[str, Any],
    *,
    runs: Callable[[str], bool],
    settings: Settings,
    known: Collection[str],
    entry: int,
    pool: Sequence[int | None] | None = None,
    tables: Callable[[str], bool | None] = lambda text: None,
) -> Appended | None:
    """Append a job for a scheduler that already holds the file's jobs: only the new entry is
    checked (against ``known``), and the file is not parsed again. ``runs(text)`` says whether
    the file on disk is the version the scheduler runs; when it is not (an edit not yet taken),
    or when only a whole load can check the entry, None: use :func:`append_job`. ``tables(text)``
    True: the caller knows the text holds no inline ``jobs = [...]`` (None: search it).

    At 100,000 jobs, ``gtui add`` took 13.9 s through three whole loads; this is a read, one
    entry's check and the atomic write."""
    p = Path(path)
    _check_fields(p, fields)
    if "cmd" not in fields:
        raise QueueFileError(str(p), "a job needs a `cmd`", None, "cmd")
    table = _new_table(fields, inline=False)
    assert isinstance(table, Table)
    plain = tomllib.loads(_table_text(table))["jobs"][0]  # the values as a load reads them
    with _locked(p):
        text, mark = _read(p)
        if not runs(text) or (not tables(text) and has_inline_jobs(text)):
            # An inline ``jobs = [...]`` takes no [[jobs]] table after it: append_job adds an
            # element to the array.
            return None
        nl = "\r\n" if "\r\n" in text[: text.find("\n") + 1] else "\n"
        body = _ends(text, nl) if text else ""
        gap = nl if body and not body.isspace() else ""  # strip() copied all 9 MB
        line = body.count("\n") + len(gap) // len(nl) + 1  # where its [[jobs]] header goes
        try:
            checked = check_new_entry(p, plain, settings, known, entry, pool, line)
        except QueueFileError as e:
            what = f"{e.detail} (the job was not added)"
            raise QueueFileError(e.path, what, None, e.key) from None
        if checked is None:
            return None
        new_text = body + gap + _table_text(table).replace("\n", nl)
        data = mark + new_text.encode()
        write_atomically(p, data)
    jobs, warnings = checked
    return Appended(jobs, warnings, new_text, digest_of_bytes(data))


def update_job(
    path: Path | str,
    name: str,
    fields: Mapping[str, Any],
    *,
    pool: Sequence[int | None] | None = None,
) -> None:
    """Change keys of job ``name`` (a None value deletes the key). See the module docstring."""
    p = Path(path)
    _check_fields(p, fields)

    def change(ctx: _Ctx) -> str:
        job = ctx.job(name)
        if not job.matrix:
            return _entry_edit(ctx, job.entry, lambda t: _apply(t, fields))
        if len(job.matrix) > 1:
            raise _refuse_matrix(ctx, job, "edited")
        raw = ctx.data["jobs"][job.entry]
        own = _standalone(raw, job)
        target = _set_keys({**own, **fields})
        if target == _set_keys(own):
            return ctx.text  # nothing changes: the entry stays whole
        waiters = _waiting_for_entry(ctx, job)
        if waiters:
            shown = first_few(waiters)
            raise QueueFileError(
                str(ctx.path),
                f"{job.name} cannot be edited alone: {shown} wait"
                f"{'s' if len(waiters) == 1 else ''} for every job of {raw['name']} (after), "
                "and split out of that entry it would no longer be one of them; edit the entry "
                "(gtui edit), or name its jobs in that after",
                job.line or None,
                "after",
            )
        if len(ctx.siblings(job)) == 1:

            def in_place(table: _Container) -> None:
                del table["matrix"]
                for k in list(table.keys()):
                    if k not in target:
                        del table[k]
                _apply(table, target)

            return _entry_edit(ctx, job.entry, in_place)
        key, value = next(iter(job.matrix.items()))

        def split(table: _Container) -> _Container:
            _drop_matrix_value(table, key, value)
            inline = isinstance(table, InlineTable)
            return _new_table(target, inline=inline)

        return _entry_edit(ctx, job.entry, split)

    _edit(p, change, pool=pool)


def why_not_remove_alone(jobs: Sequence[JobSpec], job: JobSpec) -> tuple[str, str] | None:
    """Why ``job`` cannot leave the file by itself, as (the key at fault, the sentence), or None:
    other jobs wait for it (``after``), or it is one combination of a matrix with several keys.
    The one rule: ``remove_job`` refuses with it, and the dashboard asks it before its dialog."""
    siblings = [j for j in jobs if j.entry == job.entry]
    leaving = {job.name} if job.matrix and len(siblings) > 1 else None
    gone = leaving or {j.name for j in siblings}
    waiting = [j.name for j in jobs if j.name not in gone and gone & set(j.after)]
    if waiting:
        shown = first_few(waiting)
        verb = "waits" if len(waiting) == 1 else "wait"
        return "after", (
            f"{job.name} cannot be removed: {shown} {verb} for it (after); remove or edit "
            "those first"
        )
    if job.matrix and len(siblings) > 1 and len(job.matrix) > 1:
        return "matrix", _matrix_refusal(job, len(siblings), "removed")
    return None


def remove_job(path: Path | str, name: str) -> None:
    """Take job ``name`` out of the queue file. See the module docstring for matrix jobs."""
    p = Path(path)

    def change(ctx: _Ctx) -> str:
        job = ctx.job(name)
        refused = why_not_remove_alone(ctx.queue.jobs, job)
        if refused is not None:
            key, why = refused
            raise QueueFileError(str(ctx.path), why, job.line or None, key)
        if job.matrix and len(ctx.siblings(job)) > 1:
            key, value = next(iter(job.matrix.items()))
            return _entry_edit(ctx, job.entry, lambda t: _drop_matrix_value(t, key, value))
        return _reorder(ctx, job.entry, None)

    _edit(p, change, pool=None)


def move_job(path: Path | str, name: str, where: Where) -> None:
    """Move job ``name``'s entry one up, one down, or to the top of the queue file."""
    p = Path(path)
    if where not in ("up", "down", "top"):
        raise GtuiError(f"cannot move a job {where!r}: up, down or top")

    def change(ctx: _Ctx) -> str:
        job = ctx.job(name)
        return _reorder(ctx, job.entry, where)

    _edit(p, change, pool=None)


def _drop_matrix_value(table: _Container, key: str, value: str) -> None:
    """Remove ``value`` from ``matrix.key``; an emptied matrix empties the whole table."""
    matrix = table["matrix"]
    values = matrix[key]
    for i, v in enumerate(list(values)):
        if scalar_text(_unwrap(v)) == value:
            del values[i]
            break
    if len(values) == 0:
        for k in list(table.keys()):
            del table[k]


def _reorder(ctx: _Ctx, entry: int, where: Where | None) -> str:
    """Move (``where``) or remove (None) entry ``entry``."""
    n = len(ctx.data.get("jobs", []))
    order = list(range(n))
    if where is None:
        pass
    elif where == "up" and entry > 0:
        order[entry - 1], order[entry] = order[entry], order[entry - 1]
    elif where == "down" and entry < n - 1:
        order[entry + 1], order[entry] = order[entry], order[entry + 1]
    elif where == "top":
        order.remove(entry)
        order.insert(0, entry)
    if order == list(range(n)) and where is not None:
        return ctx.text
    blocks = ctx.blocks()
    inline = ctx.inline() if blocks is None else None
    if inline is not None:
        if where is None:
            slots = [[] if i == entry else [inline.parts(i)] for i in range(n)]
        else:
            slots = [[inline.parts(i)] for i in order]
        return inline.rebuild(slots)
    if blocks is None:
        doc = tomlkit.parse(ctx.text)
        arr = doc["jobs"]
        items = [arr[i] for i in range(n)]
        for i in reversed(range(n)):
            del arr[i]
        for i in order:
            if where is not None or i != entry:
                arr.append(items[i])
        return doc.as_string()
    cores: list[str | None] = ["".join(ctx.sc.lines[b.start : b.end]) for b in blocks]
    if where is None:
        cores[entry] = None
        return _rebuild(list(ctx.sc.lines), blocks, cores, ctx.nl)
    placed = [cores[i] for i in order]
    return _rebuild(list(ctx.sc.lines), blocks, placed, ctx.nl)


# ---------------------------------------------------------------------------------------------
# the command line's edits: ``gtui move`` (any place), ``gtui rm`` / ``gtui clean`` (many jobs at
# once), ``gtui edit`` (one job's table as text)

Place = Literal["top", "bottom", "before", "after"]


def place_job(path: Path | str, name: str, where: Place, other: str | None = None) -> bool:
    """Move job ``name``'s entry to the top or the bottom of the queue file, or right before or
    after the entry of job ``other``; blocks move as ``move_job`` moves them (``top`` gives the
    very same file). Returns whether the order changed."""
    p = Path(path)
    if where not in ("top", "bottom", "before", "after"):
        raise GtuiError(f"cannot place a job {where!r}: top, bottom, before or after")
    if where in ("before", "after") and not other:
        raise GtuiError(f"moving a job {where} another needs that job's name")
    moved = False

    def change(ctx: _Ctx) -> str:
        nonlocal moved
        job = ctx.job(name)
        n = len(ctx.data.get("jobs", []))
        order = [i for i in range(n) if i != job.entry]
        if where == "top":
            order.insert(0, job.entry)
        elif where == "bottom":
            order.append(job.entry)
        else:
            assert other is not None
            target = ctx.job(other)
            if target.entry == job.entry:
                raise GtuiError(
                    f"{name} and {other} are jobs of the same matrix entry, which moves as one"
                )
            k = order.index(target.entry)
            order.insert(k if where == "before" else k + 1, job.entry)
        if order == list(range(n)):
            return ctx.text
        moved = True
        return _permute(ctx, order)

    _edit(p, change, pool=None)
    return moved


def _permute(ctx: _Ctx, order: list[int]) -> str:
    """The file with its entries in ``order`` (a permutation of them all), layout kept."""
    blocks = ctx.blocks()
    inline = ctx.inline() if blocks is None else None
    if inline is not None:
        return inline.rebuild([[inline.parts(i)] for i in order])
    if blocks is None:
        doc = tomlkit.parse(ctx.text)
        arr = doc["jobs"]
        items = [arr[i] for i in range(len(order))]
        for i in reversed(range(len(order))):
            del arr[i]
        for i in order:
            arr.append(items[i])
        return doc.as_string()
    cores: list[str | None] = ["".join(ctx.sc.lines[b.start : b.end]) for b in blocks]
    return _rebuild(list(ctx.sc.lines), blocks, [cores[i] for i in order], ctx.nl)


def removal_plan(queue: QueueFile, names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """Which of ``names`` can leave the file together: the jobs no remaining job waits for
    (``after``), and of a matrix entry with several keys all of its jobs or none. Returns them
    in queue order, and for each of the others why it stays."""
    by_name = {j.name: j for j in queue.jobs}
    entries: dict[int, list[str]] = {}
    for j in queue.jobs:
        entries.setdefault(j.entry, []).append(j.name)
    keep: dict[str, str] = {}
    chosen = {n for n in names if n in by_name}
    for n in names:
        if n not in by_name:
            keep[n] = "not in the queue file"
    for members in entries.values():
        first = by_name[members[0]]
        if len(first.matrix) > 1 and chosen & set(members) and not set(members) <= chosen:
            for m in members:
                if m in chosen:
                    chosen.discard(m)
                    keep[m] = (
                        f"one combination of the matrix ({', '.join(first.matrix)}) of a "
                        f"[[jobs]] entry with {len(members)} jobs: they leave together"
                    )
    changed = True
    while changed:  # a job kept back keeps what it waits for
        changed = False
        for j in queue.jobs:
            if j.name in chosen:
                continue
            for a in j.after:
                if a in chosen:
                    chosen.discard(a)
                    keep[a] = f"{j.name} waits for it (after)"
                    changed = True
                    entry = entries[by_name[a].entry]
                    if len(by_name[a].matrix) > 1:  # its siblings stay with it
                        for m in entry:
                            if m in chosen:
                                chosen.discard(m)
                                keep[m] = f"{a}, of the same matrix entry, stays"
    return [j.name for j in queue.jobs if j.name in chosen], keep


def remove_jobs(path: Path | str, names: Sequence[str]) -> list[str]:
    """Take every job of ``names`` out of the queue file in one write (see ``remove_job`` for
    matrix entries); refuses, changing nothing, if one of them cannot go (``removal_plan``).
    Returns the names removed, in queue order."""
    p = Path(path)
    removed: list[str] = []

    def change(ctx: _Ctx) -> str:
        for n in names:
            ctx.job(n)  # an unknown name: refused by name
        ok, kept = removal_plan(ctx.queue, list(dict.fromkeys(names)))
        if kept:
            name, why = next(iter(kept.items()))
            more = f" (and {len(kept) - 1} more)" if len(kept) > 1 else ""
            raise QueueFileError(
                str(ctx.path),
                f"{name} cannot be removed: {why}{more}; nothing was removed",
                ctx.job(name).line or None,
            )
        removed[:] = ok
        gone = set(ok)
        edits: dict[int, Callable[[_Container], object] | None] = {}
        for entry in dict.fromkeys(ctx.job(n).entry for n in ok):
            members = [j for j in ctx.queue.jobs if j.entry == entry]
            leaving = [j for j in members if j.name in gone]
            if len(leaving) == len(members):
                edits[entry] = None
                continue
            key = next(iter(leaving[0].matrix))
            values = [j.matrix[key] for j in leaving]

            def drop(table: _Container, key: str = key, values: list[str] = values) -> None:
                for v in values:
                    _drop_matrix_value(table, key, v)

            edits[entry] = drop
        return _edit_entries(ctx, edits)

    _edit(p, change, pool=None)
    return removed


def _edit_entries(ctx: _Ctx, edits: Mapping[int, Callable[[_Container], object] | None]) -> str:
    """Apply each edit to its entry's table (None: the entry goes), in one rebuild."""
    blocks = ctx.blocks()
    inline = ctx.inline() if blocks is None else None
    if inline is not None:
        slots = [[inline.parts(i)] for i in range(len(inline.pieces))]
        for entry, fn in edits.items():
            new = None if fn is None else _edit_element(inline.pieces[entry].table, fn)[0]
            prefix, _, suffix = inline.parts(entry)
            slots[entry] = [] if new is None else [(prefix, new, suffix)]
        return inline.rebuild(slots)
    if blocks is None:
        doc = tomlkit.parse(ctx.text)
        arr = doc["jobs"]
        for entry in sorted(edits, reverse=True):
            fn = edits[entry]
            if fn is not None:
                fn(arr[entry])
            if fn is None or len(arr[entry].keys()) == 0:
                del arr[entry]
        return doc.as_string()
    cores: list[str | None] = ["".join(ctx.sc.lines[b.start : b.end]) for b in blocks]
    for entry, fn in edits.items():
        core = cores[entry]
        if fn is None or core is None:
            cores[entry] = None
            continue
        doc = tomlkit.parse(core)
        table = doc["jobs"][0]
        fn(table)
        cores[entry] = doc.as_string() if len(table.keys()) else None
    return _rebuild(list(ctx.sc.lines), blocks, cores, ctx.nl)


@dataclass(frozen=True)
class JobText:
    """The lines of the queue file that declare a job: its ``[[jobs]]`` table with the comments
    that belong to it (a matrix job's table is its whole entry's)."""

    text: str
    line: int  # 1-based line of the file where ``text`` starts
    siblings: tuple[str, ...]  # the jobs this table declares (more than one for a matrix)


def job_text(path: Path | str, name: str) -> JobText:
    """The text of job ``name``'s table, for ``gtui edit``."""
    p = Path(path)
    text = read_queue_text(p)
    queue = load_queue(p, text=text)
    ctx = _Ctx(p, text, queue, scan(text), tomllib.loads(text))
    job = ctx.job(name)
    blocks = ctx.blocks()
    if blocks is None:
        raise GtuiError(
            f"{p}: its jobs are an inline array (jobs = [...]), not [[jobs]] tables; edit the "
            "file itself"
        )
    block = blocks[job.entry]
    return JobText(
        text="".join(ctx.sc.lines[block.start : block.end]),
        line=block.start + 1,
        siblings=tuple(j.name for j in ctx.siblings(job)),
    )


def replace_job_text(
    path: Path | str,
    name: str,
    old: JobText,
    new_text: str,
    *,
    pool: Sequence[int | None] | None = None,
) -> QueueFile:
    """Put ``new_text`` where job ``name``'s table is, every other byte of the file kept, if the
    table still reads ``old.text`` (else the file changed meanwhile: GtuiError, nothing
    written). The new file is checked like any edit; ``new_text`` must be one ``[[jobs]]``
    table (its comments around it are kept as written)."""
    p = Path(path)
    try:
        parsed = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as e:
        at = re.search(r"\(at line (\d+), column \d+\)$", str(e))
        detail = str(e)[: at.start()].rstrip() if at else str(e)
        line = old.line + int(at.group(1)) - 1 if at else None
        raise QueueFileError(str(p), f"not valid TOML: {detail}", line) from None
    extra = sorted(k for k in parsed if k != "jobs")
    jobs = parsed.get("jobs")
    if extra or not isinstance(jobs, list) or len(jobs) != 1:
        what = f"`{extra[0]}`" if extra else f"{len(jobs) if isinstance(jobs, list) else 0} jobs"
        raise QueueFileError(
            str(p),
            f"the text must be exactly one [[jobs]] table, and it has {what}",
            old.line,
        )

    def change(ctx: _Ctx) -> str:
        job = ctx.job(name)
        blocks = ctx.blocks()
        if blocks is None:
            raise GtuiError(f"{p}: its jobs are no longer [[jobs]] tables; edit the file itself")
        block = blocks[job.entry]
        now = "".join(ctx.sc.lines[block.start : block.end])
        if now != old.text:
            raise GtuiError(
                f"{p}: {name}'s table changed in the file while you edited it; nothing was "
                "written"
            )
        nl = ctx.nl
        body = new_text.replace("\r\n", "\n").replace("\n", nl)
        if now.endswith(("\n", "\r")) and not body.endswith("\n"):
            body += nl
        lines = ctx.sc.lines
        return "".join(lines[: block.start]) + body + "".join(lines[block.end :])

    return _edit(p, change, pool=pool)
