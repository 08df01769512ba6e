"""Edits made from the dashboard or ``gtui add``, written back into the queue file.

Every operation:

- holds an ``fcntl`` lock on ``QueuePaths(queue).file_lock`` while it reads, edits and writes, so
  two writers never lose each other's change;
- checks the new text with a whole load (:class:`QueueReader`) before anything reaches the disk
  (a bad edit raises :class:`QueueFileError` and the file is unchanged); a file that is already
  broken is refused;
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

The frame every edit shares (the lock, the checks, the atomic write) is
gtui.core.queue.editing; the blocks of lines, gtui.core.queue.tableblocks; one table through
tomlkit, gtui.core.queue.tomlkitedit; the command line's own edits (``gtui move`` to any place,
``gtui rm`` / ``gtui clean``, ``gtui edit``), gtui.core.queue.cliedits, whose names are also
importable from here.

Size: the four edits the dashboard and the scheduler make (append, update, remove, move) and
the matrix rules above, which they share.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomlkit
from tomlkit.items import InlineTable

from gtui.core.atomic import write_atomically
from gtui.core.errors import GtuiError, QueueFileError
from gtui.core.model import JobSpec, Settings
from gtui.core.queue.checks import EitherNames, check_new_entry
from gtui.core.queue.cliedits import (
    JobText,
    Place,
    job_text,
    place_job,
    removal_plan,
    remove_jobs,
    replace_job_text,
)
from gtui.core.queue.editing import (
    EditContext,
    edit_file,
    entry_edit,
    locked,
    matrix_refusal,
    read_with_mark,
    refuse_matrix,
)
from gtui.core.queue.parse import read_document
from gtui.core.queue.placeholders import substitute_matrix
from gtui.core.queue.queuewatch import digest_of_bytes
from gtui.core.queue.reader import QueueReader
from gtui.core.queue.tableblocks import (
    ended,
    rebuild,
)
from gtui.core.queue.tomlkitedit import (
    Container,
    apply_fields,
    check_fields,
    drop_matrix_value,
    job_table_text,
    new_table,
    set_keys,
    standalone,
)
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


def _waiting_for_entry(ctx: EditContext, job: JobSpec) -> list[str]:
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


def append_job(
    path: Path | str,
    fields: Mapping[str, Any],
    *,
    pool: Sequence[int | None] | None = None,
    reader: QueueReader | None = None,
) -> str:
    """Add a job at the end of the queue; returns its name (the first one, for a matrix)."""
    return append_jobs(path, [fields], pool=pool, reader=reader)[0]


def append_jobs(
    path: Path | str,
    many: Sequence[Mapping[str, Any]],
    *,
    pool: Sequence[int | None] | None = None,
    reader: QueueReader | None = None,
) -> list[str]:
    """Add jobs at the end of the queue in one edit (one lock, one check, one write), so a
    scheduler takes them in together or, if one is wrong, none; returns the first name of each
    entry (a matrix entry's first job)."""
    p = Path(path)
    if not many:
        return []
    for fields in many:
        check_fields(p, fields)
        if "cmd" not in fields:
            raise QueueFileError(str(p), "a job needs a `cmd`", None, "cmd")

    def change(ctx: EditContext) -> str:
        blocks = ctx.blocks()
        nl = ctx.nl
        inline = ctx.inline() if blocks is None else None
        if inline is not None:
            slots = [[inline.parts(i)] for i in range(len(inline.pieces))]
            for fields in many:
                new = new_table(fields, inline=True).as_string().strip()
                slots[-1].append(inline.new_piece(len(slots) - 1, new))
            return inline.rebuild(slots)
        if blocks is None:
            doc = tomlkit.parse(ctx.text)
            for fields in many:
                doc["jobs"].append(new_table(fields, inline=True))
            return doc.as_string()
        text = nl.join(job_table_text(fields).replace("\n", nl) for fields in many)
        if not blocks:
            body = ctx.text
            if body and not body.endswith("\n"):
                body += nl
            return body + (nl if body.strip() else "") + text
        last = blocks[-1].end
        before = "".join(ctx.sc.lines[:last])
        after = "".join(ctx.sc.lines[last:])
        return ended(before, nl) + nl + text + after

    result = edit_file(p, change, pool=pool, adding=True, reader=reader)
    entries = sorted({j.entry for j in result.jobs})[-len(many) :]
    first: dict[int, str] = {}
    for j in result.jobs:
        if j.entry in entries:
            first.setdefault(j.entry, j.name)
    names = [first[e] for e in entries if e in first]
    return names or [str(f.get("name", "")) for f in many]


@dataclass(frozen=True)
class Appended:
    """What :func:`append_known` wrote: the new jobs, their warnings, the file's new text."""

    jobs: list[JobSpec]
    warnings: list[str]
    text: str
    digest: bytes  # of the bytes written (QueueWatch's), made here, off the scheduler's loop

    @property
    def firsts(self) -> list[str]:
        """The first job's name of each entry written, in order: what an add replies with (a
        matrix entry is several jobs, named by its first)."""
        firsts: dict[int, str] = {}
        for spec in self.jobs:
            firsts.setdefault(spec.entry, spec.name)
        return list(firsts.values())


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
    """Append a job for a scheduler that already holds the file's jobs: see
    :func:`append_known_many`."""
    return append_known_many(
        path,
        [fields],
        runs=runs,
        settings=settings,
        known=known,
        entry=entry,
        pool=pool,
        tables=tables,
    )


def append_known_many(
    path: Path | str,
    many: Sequence[Mapping[str, Any]],
    *,
    runs: Callable[[str], bool],
    settings: Settings,
    known: Collection[str],
    entry: int,
    pool: Sequence[int | None] | None = None,
    tables: Callable[[str], bool | None] = lambda text: None,
) -> Appended | None:
    """Append jobs, in one write, for a scheduler that already holds the file's jobs: only the
    new entries are checked (against ``known`` and each other), and the file is not parsed
    again. ``runs(text)`` says whether the file on disk is the version the scheduler runs; when
    it is not (an edit not yet taken), or when only a whole load can check an entry, None: use
    :func:`append_jobs`. ``tables(text)`` True: the caller knows the text holds no inline
    ``jobs = [...]`` (None: search it).

    At 100,000 jobs, ``gtui add`` took 13.9 s through three whole loads; this is a read, each
    new entry's check and one atomic write."""
    p = Path(path)
    for fields in many:
        check_fields(p, fields)
        if "cmd" not in fields:
            raise QueueFileError(str(p), "a job needs a `cmd`", None, "cmd")
    texts = [job_table_text(fields) for fields in many]
    # Each entry as a load reads it; one parse for all of them.
    plains = read_document("\n".join(texts), str(p)).data["jobs"]
    with locked(p):
        text, mark = read_with_mark(p)
        if not runs(text) or (not tables(text) and has_inline_jobs(text)):
            # An inline ``jobs = [...]`` takes no [[jobs]] table after it: append_jobs adds
            # elements to the array.
            return None
        nl = "\r\n" if "\r\n" in text[: text.find("\n") + 1] else "\n"
        body = ended(text, nl) if text else ""
        gap = nl if body and not body.isspace() else ""  # strip() copied all 9 MB
        line = body.count("\n") + len(gap) // len(nl) + 1  # where the first [[jobs]] header goes
        jobs: list[JobSpec] = []
        warnings: list[str] = []
        added: set[str] = set()
        names = EitherNames(known, added)
        for n, (plain, table) in enumerate(zip(plains, texts, strict=True)):
            try:
                checked = check_new_entry(p, plain, settings, names, entry + n, pool, line)
            except QueueFileError as e:
                if len(many) == 1:
                    what = f"{e.detail} (the job was not added)"
                else:
                    what = f"{e.detail} (job {n + 1} of {len(many)}: nothing was added)"
                raise QueueFileError(e.path, what, None, e.key) from None
            if checked is None:
                return None
            jobs.extend(checked[0])
            warnings.extend(checked[1])
            added.update(j.name for j in checked[0])
            line += table.count("\n") + 1
        new_text = body + gap + nl.join(t.replace("\n", nl) for t in texts)
        data = mark + new_text.encode()
        write_atomically(p, data)
    return Appended(jobs, warnings, new_text, digest_of_bytes(data))


def update_job(
    path: Path | str,
    name: str,
    fields: Mapping[str, Any],
    *,
    pool: Sequence[int | None] | None = None,
    reader: QueueReader | None = None,
) -> None:
    """Change keys of job ``name`` (a None value deletes the key). See the module docstring."""
    p = Path(path)
    check_fields(p, fields)

    def change(ctx: EditContext) -> str:
        job = ctx.job(name)
        if not job.matrix:
            return entry_edit(ctx, job.entry, lambda t: apply_fields(t, fields))
        if len(job.matrix) > 1:
            raise refuse_matrix(ctx, job, "edited")
        raw = ctx.data["jobs"][job.entry]
        own = standalone(raw, job)
        target = set_keys({**own, **fields})
        if target == set_keys(own):
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

            def in_place(table: Container) -> None:
                del table["matrix"]
                for k in list(table.keys()):
                    if k not in target:
                        del table[k]
                apply_fields(table, target)

            return entry_edit(ctx, job.entry, in_place)
        key, value = next(iter(job.matrix.items()))

        def split(table: Container) -> Container:
            drop_matrix_value(table, key, value)
            inline = isinstance(table, InlineTable)
            return new_table(target, inline=inline)

        return entry_edit(ctx, job.entry, split)

    edit_file(p, change, pool=pool, reader=reader)


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
        return "matrix", matrix_refusal(job, len(siblings), "removed")
    return None


def remove_job(path: Path | str, name: str, *, reader: QueueReader | None = None) -> None:
    """Take job ``name`` out of the queue file. See the module docstring for matrix jobs."""
    p = Path(path)

    def change(ctx: EditContext) -> str:
        job = ctx.job(name)
        refused = why_not_remove_alone(ctx.queue.jobs, job)
        if refused is not None:
            key, why = refused
            raise QueueFileError(str(ctx.path), why, job.line or None, key)
        if job.matrix and len(ctx.siblings(job)) > 1:
            key, value = next(iter(job.matrix.items()))
            return entry_edit(ctx, job.entry, lambda t: drop_matrix_value(t, key, value))
        return _reorder(ctx, job.entry, None)

    edit_file(p, change, pool=None, reader=reader)


def move_job(
    path: Path | str, name: str, where: Where, *, reader: QueueReader | None = None
) -> None:
    """Move job ``name``'s entry one up, one down, or to the top of the queue file."""
    p = Path(path)
    if where not in ("up", "down", "top"):
        raise GtuiError(f"cannot move a job {where!r}: up, down or top")

    def change(ctx: EditContext) -> str:
        job = ctx.job(name)
        return _reorder(ctx, job.entry, where)

    edit_file(p, change, pool=None, reader=reader)


def _reorder(ctx: EditContext, entry: int, where: Where | None) -> str:
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
        return rebuild(list(ctx.sc.lines), blocks, cores, ctx.nl)
    placed = [cores[i] for i in order]
    return rebuild(list(ctx.sc.lines), blocks, placed, ctx.nl)


__all__ = [
    "Appended",
    "JobText",
    "Place",
    "Where",
    "append_job",
    "append_known",
    "has_inline_jobs",
    "job_text",
    "move_job",
    "place_job",
    "removal_plan",
    "remove_job",
    "remove_jobs",
    "replace_job_text",
    "update_job",
]
