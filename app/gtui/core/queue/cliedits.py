"""The command line's edits of the queue file: ``gtui move`` (any place), ``gtui rm`` /
``gtui clean`` (many jobs at once), ``gtui edit`` (one job's table as text).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tomlkit

from gtui.core.errors import GtuiError, QueueFileError
from gtui.core.queue.editing import (
    EditContext,
    edit_file,
)
from gtui.core.queue.ondisk import read_queue_text
from gtui.core.queue.parse import TomlSyntaxError, read_document
from gtui.core.queue.reader import QueueReader
from gtui.core.queue.schema import QueueFile
from gtui.core.queue.tableblocks import (
    rebuild,
)
from gtui.core.queue.tomlkitedit import (
    Container,
    drop_matrix_value,
    edit_element,
)

Place = Literal["top", "bottom", "before", "after"]


def place_job(
    path: Path | str,
    name: str,
    where: Place,
    other: str | None = None,
    *,
    reader: QueueReader | None = None,
) -> bool:
    """Move job ``name``'s entry to the top or the bottom of the queue file, or right before or
    after the entry of job ``other``; blocks move as ``move_job`` moves them (``top`` gives the
    very same file). Returns whether the order changed."""
    p = Path(path)
    if where not in ("top", "bottom", "before", "after"):
        raise GtuiError(f"cannot place a job {where!r}: top, bottom, before or after")
    if where in ("before", "after") and not other:
        raise GtuiError(f"moving a job {where} another needs that job's name")
    moved = False

    def change(ctx: EditContext) -> str:
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

    edit_file(p, change, pool=None, reader=reader)
    return moved


def _permute(ctx: EditContext, order: list[int]) -> str:
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
    return rebuild(list(ctx.sc.lines), blocks, [cores[i] for i in order], ctx.nl)


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


def remove_jobs(
    path: Path | str, names: Sequence[str], *, reader: QueueReader | None = None
) -> list[str]:
    """Take every job of ``names`` out of the queue file in one write (see ``remove_job`` for
    matrix entries); refuses, changing nothing, if one of them cannot go (``removal_plan``).
    Returns the names removed, in queue order."""
    p = Path(path)
    removed: list[str] = []

    def change(ctx: EditContext) -> str:
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
        edits: dict[int, Callable[[Container], object] | None] = {}
        for entry in dict.fromkeys(ctx.job(n).entry for n in ok):
            members = [j for j in ctx.queue.jobs if j.entry == entry]
            leaving = [j for j in members if j.name in gone]
            if len(leaving) == len(members):
                edits[entry] = None
                continue
            key = next(iter(leaving[0].matrix))
            values = [j.matrix[key] for j in leaving]

            def drop(table: Container, key: str = key, values: list[str] = values) -> None:
                for v in values:
                    drop_matrix_value(table, key, v)

            edits[entry] = drop
        return _edit_entries(ctx, edits)

    edit_file(p, change, pool=None, reader=reader)
    return removed


def _edit_entries(
    ctx: EditContext, edits: Mapping[int, Callable[[Container], object] | None]
) -> str:
    """Apply each edit to its entry's table (None: the entry goes), in one rebuild."""
    blocks = ctx.blocks()
    inline = ctx.inline() if blocks is None else None
    if inline is not None:
        slots = [[inline.parts(i)] for i in range(len(inline.pieces))]
        for entry, fn in edits.items():
            new = None if fn is None else edit_element(inline.pieces[entry].table, fn)[0]
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
    return rebuild(list(ctx.sc.lines), blocks, cores, ctx.nl)


@dataclass(frozen=True)
class JobText:
    """The lines of the queue file that declare a job: its ``[[jobs]]`` table with the comments
    that belong to it (a matrix job's table is its whole entry's)."""

    text: str
    line: int  # 1-based line of the file where ``text`` starts
    siblings: tuple[str, ...]  # the jobs this table declares (more than one for a matrix)


def job_text(path: Path | str, name: str, *, reader: QueueReader | None = None) -> JobText:
    """The text of job ``name``'s table, for ``gtui edit`` (``reader``: the command's, which
    keeps this parse for the edit's check of the same text)."""
    p = Path(path)
    text = read_queue_text(p)
    reader = reader if reader is not None else QueueReader()
    queue = reader.load(p, text=text)
    doc = reader.parse(str(p), text)  # the load's own parse
    ctx = EditContext(p, text, queue, doc.scan, doc.data)
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
    reader: QueueReader | None = None,
) -> QueueFile:
    """Put ``new_text`` where job ``name``'s table is, every other byte of the file kept, if the
    table still reads ``old.text`` (else the file changed meanwhile: GtuiError, nothing
    written). The new file is checked like any edit; ``new_text`` must be one ``[[jobs]]``
    table (its comments around it are kept as written)."""
    p = Path(path)
    try:
        parsed = read_document(new_text, str(p)).data
    except TomlSyntaxError as e:
        message = e.toml_message
        at = re.search(r"\(at line (\d+), column \d+\)$", message)
        detail = message[: at.start()].rstrip() if at else message
        line = old.line + int(at.group(1)) - 1 if at else None
        raise QueueFileError(str(p), f"not valid TOML: {detail}", line) from None
    except QueueFileError as e:  # nested too deeply: refused as the check of the file says it
        what = f"{e.detail} (the file was not changed)"
        raise QueueFileError(e.path, what, e.line, e.key) from None
    extra = sorted(k for k in parsed if k != "jobs")
    jobs = parsed.get("jobs")
    if extra or not isinstance(jobs, list) or len(jobs) != 1:
        what = f"`{extra[0]}`" if extra else f"{len(jobs) if isinstance(jobs, list) else 0} jobs"
        raise QueueFileError(
            str(p),
            f"the text must be exactly one [[jobs]] table, and it has {what}",
            old.line,
        )

    def change(ctx: EditContext) -> str:
        job = ctx.job(name)
        blocks = ctx.blocks()
        if blocks is None:
            raise GtuiError(f"{p}: its jobs are no longer [[jobs]] tables; edit the file itself")
        block = blocks[job.entry]
        now = "".join(ctx.sc.lines[block.start : block.end])
        if now != old.text:
            raise GtuiError(
                f"{p}: {name}'s table changed in the file while you edited it; nothing was written"
            )
        nl = ctx.nl
        body = new_text.replace("\r\n", "\n").replace("\n", nl)
        if now.endswith(("\n", "\r")) and not body.endswith("\n"):
            body += nl
        lines = ctx.sc.lines
        return "".join(lines[: block.start]) + body + "".join(lines[block.end :])

    return edit_file(p, change, pool=pool, reader=reader)
