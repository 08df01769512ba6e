"""Where things are in a TOML text: the line of each table and key, and each entry's extent.

``tomllib`` parses but keeps no positions, and error messages must name a line. This scanner is
not a parser: it follows strings, comments and brackets well enough to find, for valid TOML, every
table header, every key written at the start of a line, and the start of each inline table of an
inline array (``jobs = [ {...}, {...} ]``). It never raises; on odd input it finds less.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field

_BARE = re.compile(r"[A-Za-z0-9_-]+")


@dataclass
class Table:
    """A ``[header]`` or ``[[header]]`` (the root has path ``()``) and where its keys are."""

    path: tuple[str, ...]
    array: bool
    line: int  # 1-based line of the header (1 for the root)
    keys: dict[str, int] = field(default_factory=dict)  # first key part -> line
    inline_entries: dict[str, list[int]] = field(default_factory=dict)  # key -> '{' lines
    repeated: list[tuple[str, int]] = field(
        default_factory=list
    )  # a key written twice: (key, line)


@dataclass
class Entry:
    """One ``[[name]]`` element (or one inline table of ``name = [...]``) and its sub-tables."""

    line: int
    keys: dict[str, int] = field(default_factory=dict)
    first: int = 0  # first line of the header (tables only; 0 for inline entries)
    last: int = 0  # last line before the next unrelated header (tables only)


@dataclass
class Scan:
    lines: list[str]  # the text's lines, with their line endings
    tables: list[Table]
    content: list[bool]  # per line (index = line - 1): holds TOML data, not blank / comment only

    def table(self, *path: str) -> Table | None:
        for t in self.tables:
            if t.path == path and not t.array:
                return t
        return None

    def key_line(self, path: tuple[str, ...], key: str) -> int | None:
        """The line of ``key`` in table ``path`` (a sub-table ``[path.key]`` counts too)."""
        t = self.table(*path)
        if t is not None and key in t.keys:
            return t.keys[key]
        sub = self.table(*path, key)
        if sub is not None:
            return sub.line
        if path:
            parent = self.table(*path[:-1])
            if parent is not None and path[-1] in parent.keys:
                return parent.keys[path[-1]]
        return t.line if t is not None and path else None

    def entries(self, *path: str) -> list[Entry]:
        """The elements of the array of tables ``path``, in order, with their keys' lines."""
        out: list[Entry] = []
        cur: Entry | None = None
        n = len(path)
        for i, t in enumerate(self.tables):
            if t.path == path and t.array:
                cur = Entry(line=t.line, keys=dict(t.keys), first=t.line)
                out.append(cur)
            elif cur is not None and len(t.path) > n and t.path[:n] == path:
                cur.keys.setdefault(t.path[n], t.line)
            else:
                cur = None
            if cur is not None:
                nxt = self.tables[i + 1].line - 1 if i + 1 < len(self.tables) else len(self.lines)
                cur.last = nxt
        if not out and n >= 1:
            parent = self.table(*path[:-1]) if n > 1 else self.tables[0]
            if parent is not None:
                for line in parent.inline_entries.get(path[-1], []):
                    out.append(Entry(line=line))
        return out


def _skip_basic(s: str, i: int) -> int:
    """Index after the basic string starting at ``s[i] == '"'`` (or len(s))."""
    j = i + 1
    while j < len(s):
        if s[j] == "\\":
            j += 2
            continue
        if s[j] == '"':
            return j + 1
        j += 1
    return len(s)


def _skip_literal(s: str, i: int) -> int:
    j = s.find("'", i + 1)
    return len(s) if j < 0 else j + 1


def _ml_end(s: str, i: int, delim: str) -> int:
    """Index after the closing ``delim`` of a multi-line string, or -1 if not on this line."""
    j = i
    while True:
        k = s.find(delim, j)
        if k < 0:
            return -1
        if delim == '"""':
            backslashes = 0
            b = k - 1
            while b >= i and s[b] == "\\":
                backslashes += 1
                b -= 1
            if backslashes % 2:
                j = k + 1
                continue
        end = k + 3
        while end < len(s) and s[end] == delim[0] and end - k < 5:  # up to two extra quotes
            end += 1
        return end


def _key_parts(s: str, i: int) -> tuple[list[str], int] | None:
    """Read a dotted key at ``s[i:]``: its parts and the index after it, or None."""
    parts: list[str] = []
    while True:
        while i < len(s) and s[i] in " \t":
            i += 1
        if i >= len(s):
            return None
        if s[i] == '"':
            j = _skip_basic(s, i)
            try:
                parts.append(str(tomllib.loads(f"k = {s[i:j]}")["k"]))
            except tomllib.TOMLDecodeError:
                return None
            i = j
        elif s[i] == "'":
            j = _skip_literal(s, i)
            parts.append(s[i + 1 : j - 1])
            i = j
        else:
            m = _BARE.match(s, i)
            if not m:
                return None
            parts.append(m.group(0))
            i = m.end()
        while i < len(s) and s[i] in " \t":
            i += 1
        if i < len(s) and s[i] == ".":
            i += 1
            continue
        return parts, i


# The fast path: a whole line that is blank, a comment, a bare ``key = value`` whose value has
# only one-line strings and at most one pair of brackets, or a ``[header]`` / ``[[header]]`` of
# bare keys, optionally followed by a comment. Such a line reads the same to the character loop
# below (which handles everything else), only much faster: 10,000 jobs are ~70,000 lines.
_BASIC = r'(?!""")"(?:[^"\\]++|\\.)*+"'
_LITERAL = r"(?!''')'[^']*+'"
_HEADER = r"[ \t]*+[A-Za-z0-9_-]++[ \t]*+(?:\.[ \t]*+[A-Za-z0-9_-]++[ \t]*+)*+"
_FAST = re.compile(
    r"[ \t]*+(?:"
    rf"(?P<key>[A-Za-z0-9_-]++)[ \t]*+=(?P<val>(?:{_BASIC}|{_LITERAL}|[^\"'#]++)*+)"
    rf"|\[\[(?P<aot>{_HEADER})\]\]"
    rf"|\[(?P<tab>{_HEADER})\]"
    r")?+[ \t]*+(?:#.*+)?+\Z",
    re.DOTALL,
)
_STRINGS = re.compile(f"{_BASIC}|{_LITERAL}", re.DOTALL)
# A value, strings removed, with no brackets or one pair not nested: it leaves no state behind.
_FLAT = re.compile(r"[^\[\]{}]*+(?:(?:\[[^\[\]{}]*+\]|\{[^\[\]{}]*+\})[^\[\]{}]*+)?+\Z")


def scan(text: str) -> Scan:
    """Find the tables, keys and inline entries of ``text`` (see the module docstring)."""
    lines = text.splitlines(keepends=True)
    root = Table(path=(), array=False, line=1)
    tables = [root]
    cur = root
    in_ml: str | None = None
    depth = 0
    array_key: str | None = None
    content: list[bool] = []
    fast = _FAST.match
    flat = _FLAT.match
    strings = _STRINGS.sub
    for lineno, raw in enumerate(lines, 1):
        s = raw.rstrip("\r\n")
        if in_ml is None and depth == 0:
            m = fast(s)
            if m is not None:
                key = m.group("key")
                if key is not None:
                    val = m.group("val")
                    if (
                        "[" not in val and "{" not in val and "]" not in val and "}" not in val
                    ) or flat(strings("", val)):
                        if key in cur.keys:
                            cur.repeated.append((key, lineno))
                        else:
                            cur.keys[key] = lineno
                        content.append(True)
                        continue
                else:
                    header = m.group("aot")
                    is_array = header is not None
                    if header is None:
                        header = m.group("tab")
                    if header is not None:
                        path = tuple(p.strip(" \t") for p in header.split("."))
                        cur = Table(path=path, array=is_array, line=lineno)
                        tables.append(cur)
                    content.append(header is not None)
                    continue
        n = len(s)
        i = 0
        has_content = in_ml is not None
        last_key: str | None = None
        if in_ml is None and depth == 0:
            i = n - len(s.lstrip())
            if s.startswith("[", i):
                is_array = s.startswith("[[", i)
                got = _key_parts(s, i + (2 if is_array else 1))
                if got is not None:
                    parts, j = got
                    close = "]]" if is_array else "]"
                    if s.startswith(close, j):
                        cur = Table(path=tuple(parts), array=is_array, line=lineno)
                        tables.append(cur)
                        i = j + len(close)
                        has_content = True
            elif i < n and s[i] != "#":
                got = _key_parts(s, i)
                if got is not None and got[1] < n and s[got[1]] == "=":
                    last_key = got[0][0]
                    if last_key in cur.keys and len(got[0]) == 1:
                        cur.repeated.append((last_key, lineno))
                    cur.keys.setdefault(last_key, lineno)
                    i = got[1] + 1
                    has_content = True
        while i < n:
            if in_ml is not None:
                end = _ml_end(s, i, in_ml)
                if end < 0:
                    break
                in_ml = None
                i = end
                continue
            c = s[i]
            if c == "#":
                break
            if c in " \t":
                i += 1
                continue
            has_content = True
            if s.startswith('"""', i) or s.startswith("'''", i):
                in_ml = s[i : i + 3]
                i += 3
                continue
            if c == '"':
                i = _skip_basic(s, i)
                continue
            if c == "'":
                i = _skip_literal(s, i)
                continue
            if c in "[{":
                if depth == 0 and c == "[":
                    array_key = last_key
                elif depth == 1 and c == "{" and array_key is not None:
                    cur.inline_entries.setdefault(array_key, []).append(lineno)
                depth += 1
            elif c in "]}":
                depth = max(0, depth - 1)
                if depth == 0:
                    array_key = None
            i += 1
        content.append(has_content)
    return Scan(lines=lines, tables=tables, content=content)
