"""The frame of every edit of the queue file: under the file's lock, the file as it is checked,
the change made on that check's parse, the new text checked, then written atomically.

An edit of one entry (``entry_edit``) works on whichever layout the file has: ``[[jobs]]``
blocks of lines, an inline ``jobs = [...]`` array edited element by element
(gtui.core.queue.inlinearray), or tomlkit over the whole array when neither can be followed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import Array, Table

from gtui.core.atomic import write_atomically
from gtui.core.deadline import check as check_deadline
from gtui.core.errors import GtuiError, QueueFileError
from gtui.core.flock import locked as file_locked
from gtui.core.model import JobSpec
from gtui.core.paths import ensure_state_dir, queue_paths
from gtui.core.queue.encodings import decode_queue
from gtui.core.queue.inlinearray import InlineJobs, inline_jobs
from gtui.core.queue.ondisk import read_queue_bytes
from gtui.core.queue.reader import QueueReader
from gtui.core.queue.schema import QueueFile
from gtui.core.queue.tableblocks import (
    Block,
    ended,
    job_blocks,
    newline_of,
    rebuild,
)
from gtui.core.queue.tomlkitedit import (
    Container,
    edit_element,
    table_text,
)
from gtui.core.queue.tomlscan import Scan


@contextlib.contextmanager
def locked(queue: Path) -> Iterator[None]:
    """Hold the queue file's edit lock (``QueuePaths.file_lock``) for the block."""
    paths = queue_paths(queue)
    ensure_state_dir(paths)
    with file_locked(paths.file_lock):
        # A scheduler's request may have waited here past its client's deadline: then the
        # client has said it was not done, and it must not be.
        check_deadline()
        yield


UTF8_BOM = b"\xef\xbb\xbf"


def read_with_mark(p: Path) -> tuple[str, bytes]:
    """The file's text, and the UTF-8 byte-order mark it starts with (b"" if none): the
    write puts the mark back, as it keeps all of the file outside the edited job."""
    data = read_queue_bytes(p)
    return decode_queue(p, data), UTF8_BOM if data.startswith(UTF8_BOM) else b""


@dataclass
class EditContext:
    """An edit's view of the file as it is: its text, its checked queue, its scan and parse."""

    path: Path
    text: str
    queue: QueueFile
    sc: Scan
    data: dict[str, Any]

    def job(self, name: str) -> JobSpec:
        """The job named ``name``, or GtuiError naming the file."""
        for job in self.queue.jobs:
            if job.name == name:
                return job
        raise GtuiError(f"{self.path}: no job named {name!r}")

    def siblings(self, job: JobSpec) -> list[JobSpec]:
        """The jobs of ``job``'s entry (several for a matrix), in file order."""
        return [j for j in self.queue.jobs if j.entry == job.entry]

    def blocks(self) -> list[Block] | None:
        """The [[jobs]] blocks, or None when the jobs must be edited with tomlkit as a whole
        (an inline ``jobs = [...]`` array, or a layout the scanner could not follow)."""
        if "jobs" in self.sc.tables[0].keys:
            return None
        blocks = job_blocks(self.sc)
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
        """The file's line ending."""
        return newline_of(self.sc.lines)


def edit_file(
    path: Path | str,
    change: Callable[[EditContext], str],
    *,
    pool: Sequence[int | None] | None,
    adding: bool = False,
    reader: QueueReader | None = None,
) -> QueueFile:
    """Check the file, ``change`` its text, check the new text, write it: under the lock.
    ``reader``: the caller's (the scheduler's queue source), whose last parse may be this
    very text, and which then keeps the new text's for the reload that follows the edit."""
    p = Path(path)
    reader = reader if reader is not None else QueueReader()
    with locked(p):
        text, mark = read_with_mark(p)
        try:
            queue = reader.load(p, text=text)
        except QueueFileError as e:
            raise QueueFileError(
                e.path, f"{e.detail} (fix the file first; nothing was changed)", e.line, e.key
            ) from None
        # The check above parsed this very text: its scan and parse are reused (one parse
        # per edit, not two: 641 ms against 256 ms at 10,000 jobs).
        doc = reader.parse(str(p), text)
        ctx = EditContext(p, text, queue, doc.scan, doc.data)
        new_text = change(ctx)
        try:
            result = reader.load(p, text=new_text, pool=pool)
        except QueueFileError as e:
            # A new job's lines are not in the file yet: its line number would point nowhere.
            what = "the job was not added" if adding else "the file was not changed"
            line = None if adding else e.line
            raise QueueFileError(e.path, f"{e.detail} ({what})", line, e.key) from None
        if new_text != text:
            write_atomically(p, mark + new_text.encode())
        return result


def matrix_refusal(job: JobSpec, n: int, what: str) -> str:
    """Why one combination of a matrix with several keys cannot be ``what`` alone."""
    keys = ", ".join(job.matrix)
    return (
        f"{job.name} is one of the {n} jobs of the matrix ({keys}) of this [[jobs]] entry; one "
        f"combination of a matrix with several keys cannot be {what} alone: edit the entry"
    )


def refuse_matrix(ctx: EditContext, job: JobSpec, what: str) -> QueueFileError:
    """The refusal to edit one combination of a matrix with several keys."""
    message = matrix_refusal(job, len(ctx.siblings(job)), what)
    return QueueFileError(str(ctx.path), message, job.line or None, "matrix")


def entry_edit(ctx: EditContext, entry: int, edit: Callable[[Container], Container | None]) -> str:
    """Apply ``edit`` to the table of entry ``entry``; it returns a table to insert after it."""
    blocks = ctx.blocks()
    inline = ctx.inline() if blocks is None else None
    if inline is not None:
        slots = [[inline.parts(i)] for i in range(len(inline.pieces))]
        new, extra_text = edit_element(inline.pieces[entry].table, edit)
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
        text = table_text(extra).replace("\n", nl)
        new_core = text if new_core is None else ended(new_core, nl) + nl + text
    cores: list[str | None] = ["".join(ctx.sc.lines[b.start : b.end]) for b in blocks]
    cores[entry] = new_core
    return rebuild(list(ctx.sc.lines), blocks, cores, nl)
