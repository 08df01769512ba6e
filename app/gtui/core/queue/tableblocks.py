"""A queue file's ``[[jobs]]`` tables as blocks of lines, for edits that keep its layout.

Each ``[[jobs]]`` table is a block of lines: the comment lines directly above its header (no
blank line between) belong to it, as do its keys, comments among them and its sub-tables
(``[jobs.env]``), up to its last line of data. Moving permutes blocks in place, so blank lines
and section comments between tables stay where they were.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from gtui.core.queue.tomlscan import Scan


@dataclass(frozen=True)
class Block:
    """One ``[[jobs]]`` table's lines, with the comments that belong to it."""

    start: int  # 0-based index of its first line (attached comments included)
    end: int  # 0-based index after its last line of data


def job_blocks(sc: Scan) -> list[Block] | None:
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
    out: list[Block] = []
    for i, e in enumerate(entries):
        end = ends[i]
        limit = starts[i + 1] if i + 1 < len(entries) else e.last
        j = end
        while j < limit and is_comment(j):
            j += 1
        if j > end and (j >= len(sc.lines) or (j < limit and not sc.lines[j].strip())):
            end = j
        out.append(Block(starts[i], end))
    return out


def newline_of(lines: Sequence[str]) -> str:
    """The file's line ending, from its first line."""
    return "\r\n" if lines and lines[0].endswith("\r\n") else "\n"


def ended(text: str, nl: str) -> str:
    """``text`` ending with a line break."""
    return text if text.endswith("\n") else text + nl


def joined(parts: Sequence[str]) -> str:
    """The lines as one text."""
    return "".join(parts)


def has_text(lines: Sequence[str]) -> bool:
    """Whether any of the lines holds more than blanks."""
    return any(line.strip() for line in lines)


def rebuild(lines: list[str], blocks: list[Block], cores: list[str | None], nl: str) -> str:
    """Put ``cores[i]`` in the slot of ``blocks[i]`` (None removes it, merging the gaps)."""
    out: list[str] = []
    gaps = [lines[: blocks[0].start]]
    for a, b in itertools.pairwise(blocks):
        gaps.append(lines[a.end : b.start])
    gaps.append(lines[blocks[-1].end :])
    drop: set[int] = set()
    for i, core in enumerate(cores):
        if core is None:
            if not has_text(gaps[i + 1]):
                drop.add(i + 1)
            elif not has_text(gaps[i]):
                drop.add(i)
    for i, core in enumerate(cores):
        if i not in drop:
            out.append(joined(gaps[i]))
        if core is not None:
            out.append(ended(core, nl))
    if len(cores) not in drop:
        out.append(joined(gaps[-1]))
    return "".join(out)
