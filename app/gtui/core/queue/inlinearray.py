"""Edits of a queue written as one inline array, ``jobs = [{...}, {...}]``, that keep the rest
of the text as the user wrote it.

tomlkit, asked to remove or reorder elements of such an array, rewrites the array and drops
the comments between its elements. Here the array is cut into its elements by their character
positions, and an edit replaces, removes or reorders only those pieces:

- When every element stands on its own line (the usual layout), an element's piece is its
  whole line (indentation, the table, its comma, a comment after it) with the comment lines
  right above it that belong to it: they move and go with it. Blank lines and the other
  comments stay where they are.
- Otherwise (several elements on one line) a piece is the table and the comma after it.

TOML needs a comma between elements (one after the last is allowed): a piece that comes to
stand before another gets one if it had none. An element's own edit goes through tomlkit on
that element alone, so the keys the edit does not touch keep their spelling.

Pure text in, text out: writeback.py does the locking, the checks and the write.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from gtui.core.queue.tomlscan import Scan, _ml_end, _skip_basic, _skip_literal

_KEY = re.compile(r"[ \t]*(?:jobs|\"jobs\"|'jobs')[ \t]*=[ \t]*\[")
_AFTER = re.compile(r"[ \t]*(,)?[ \t]*(#[^\n]*)?(\r?\n|$)")


@dataclass
class Piece:
    """One element of the array as it sits in the text: ``prefix + table + suffix`` spans
    [start, end)."""

    start: int
    end: int
    prefix: str  # its comment lines and indentation (line layout), or ""
    table: str  # the inline table, ``{ ... }``
    suffix: str  # its comma, comment and newline (line layout), or the comma and spaces


@dataclass
class InlineJobs:
    """The elements of ``jobs = [...]`` in ``text``."""

    text: str
    pieces: list[Piece]
    by_line: bool  # every element on its own line
    nl: str

    def rebuild(self, slots: list[list[tuple[str, str, str]]]) -> str:
        """The text with slot ``i`` (piece ``i``'s place) holding the pieces ``slots[i]``, each
        (prefix, table, suffix); an empty slot removes the piece. Commas are put where a piece
        now has another after it."""
        flat = [(i, k) for i, slot in enumerate(slots) for k in range(len(slot))]
        last = flat[-1] if flat else None
        out: list[str] = []
        pos = 0
        for i, (piece, slot) in enumerate(zip(self.pieces, slots, strict=True)):
            out.append(self.text[pos : piece.start])
            pos = piece.end
            for k, (prefix, table, suffix) in enumerate(slot):
                if (i, k) != last and not suffix.lstrip(" \t").startswith(","):
                    suffix = ("," if self.by_line else ", ") + suffix
                out.append(prefix + table + suffix)
        out.append(self.text[pos:])
        return "".join(out)

    def parts(self, i: int) -> tuple[str, str, str]:
        p = self.pieces[i]
        return p.prefix, p.table, p.suffix

    def new_piece(self, after: int, table: str) -> tuple[str, str, str]:
        """A piece for a new element written like piece ``after``: on its own line with the
        same indentation, or after a comma and a space."""
        if not self.by_line:
            return "", table, ""
        p = self.pieces[after]
        indent = p.prefix.rsplit("\n", 1)[-1]
        return indent, table, "," + self.nl


def inline_jobs(text: str, sc: Scan) -> InlineJobs | None:
    """The array's elements, or None where the layout is not one this module can follow (no
    such array, an element that is not an inline table, an empty array)."""
    line = sc.tables[0].keys.get("jobs")
    if not line:
        return None
    starts = [0] + [nl.end() for nl in re.finditer("\n", text)]
    if line - 1 >= len(starts):
        return None
    key = _KEY.match(text, starts[line - 1])
    if key is None:
        return None
    spans = _tables(text, key.end())
    if not spans:
        return None
    nl = "\r\n" if "\r\n" in text else "\n"
    rows = {bisect.bisect_right(starts, s) for s, _ in spans}  # each table's line
    by_line = len(rows) == len(spans) and all(_alone(text, s, e) for s, e in spans)
    pieces: list[Piece] = []
    for k, (s, e) in enumerate(spans):
        if by_line:
            start = _own_comments(text, text.rfind("\n", 0, s) + 1)
            after = _AFTER.match(text, e)
            assert after is not None
            end = after.end()
            pieces.append(Piece(start, end, text[start:s], text[s:e], text[e:end]))
        else:
            comma = re.compile(r"[ \t]*,[ \t]*").match(text, e)
            end = comma.end() if comma is not None and k < len(spans) - 1 else e
            pieces.append(Piece(s, end, "", text[s:e], text[e:end]))
    return InlineJobs(text, pieces, by_line, nl)


def _tables(text: str, i: int) -> list[tuple[int, int]] | None:
    """The [start, end) of each inline table in the array whose ``[`` ends before ``i``; None
    if it holds anything else or never closes."""
    out: list[tuple[int, int]] = []
    depth = 0
    start = -1
    n = len(text)
    while i < n:
        c = text[i]
        if c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if c in "\"'":
            triple = text.startswith(c * 3, i)
            if triple:
                end = _ml_end(text, i + 3, c * 3)
                i = n if end < 0 else end
            else:
                i = _skip_basic(text, i) if c == '"' else _skip_literal(text, i)
            continue
        if depth == 0:
            if c == "]":
                return out
            if c == "{":
                start = i
                depth = 1
            elif c not in " \t\r\n,":
                return None  # a string, a number, a nested array: not a table of a job
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
            if depth == 0:
                out.append((start, i + 1))
        i += 1
    return None


def _alone(text: str, s: int, e: int) -> bool:
    """Whether the table at [s, e) has its line to itself (a comma and a comment may follow)."""
    line_start = text.rfind("\n", 0, s) + 1
    return not text[line_start:s].strip() and _AFTER.match(text, e) is not None


def _own_comments(text: str, line_start: int) -> int:
    """Where the comment lines right above ``line_start`` begin (no blank line between): they
    belong to the element on that line, as comments above a ``[[jobs]]`` header do."""
    start = line_start
    while start > 0:
        prev = text.rfind("\n", 0, start - 1) + 1
        if not text[prev:start].lstrip(" \t").startswith("#"):
            break
        start = prev
    return start
