"""Where things are in a TOML text: the line of each table and key, and each entry's extent.

``tomllib`` parses but keeps no positions, and error messages must name a line. This scanner is
not a parser: it follows strings, comments and brackets well enough to find, for valid TOML, every
table header, every key written at the start of a line, and the start of each inline table of an
inline array (``jobs = [ {...}, {...} ]``). It never raises; on odd input it finds less.

Size: one scanner of TOML's line structure; splitting it would split one state machine.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable

_BARE = re.compile(r"[A-Za-z0-9_-]+")


class Table:
    """A ``[header]`` or ``[[header]]`` (the root has path ``()``) and where its keys are.

    ``keys`` and ``repeated`` may be filled on first use: they are only read for messages.

    A file's parse keeps one per table, 100,000 in a 100,000-job sweep, until the engine's
    start is done with it: slots, a shared path, and no list or dict made before one is
    needed (88 bytes, ~420 with an instance dict, an empty dict and list and a path each).
    The path is shared by whoever reads the text: one tuple per table path (``("jobs",)``)
    for the 100,000 ``[[jobs]]`` tables of a sweep (see :func:`shared_path`)."""

    __slots__ = ("_fill", "_inline", "_keys", "_repeated", "array", "line", "path")

    def __init__(self, path: tuple[str, ...], array: bool, line: int) -> None:
        self.path = path
        self.array = array
        self.line = line  # 1-based line of the header (1 for the root)
        self._inline: dict[str, list[int]] | None = None  # key -> '{' lines
        self._keys: dict[str, int] | None = {}  # first key part -> line
        self._repeated: list[tuple[str, int]] | None = None  # a key written twice: (key, line)
        self._fill: Callable[[Table], None] | None = None

    @property
    def inline_entries(self) -> dict[str, list[int]]:
        """Key -> the lines of the ``{`` of each inline table in its array (``jobs = [...]``)."""
        if self._inline is None:
            self._inline = {}
        return self._inline

    def repeat(self, key: str, line: int) -> None:
        """``key`` is written again at ``line``."""
        if self._repeated is None:
            self._repeated = []
        self._repeated.append((key, line))

    @property
    def keys(self) -> dict[str, int]:
        if self._fill is not None:
            fill, self._fill = self._fill, None
            fill(self)
        assert self._keys is not None
        return self._keys

    @property
    def repeated(self) -> list[tuple[str, int]]:
        self.keys  # noqa: B018 - fills both
        return self._repeated if self._repeated is not None else []


class Entry:
    """One ``[[name]]`` element (or one inline table of ``name = [...]``) and its sub-tables.

    One per job of a sweep, kept with the parse: slots, and no list of sub-tables before one
    is found (80 bytes, ~190 with an instance dict and an empty list)."""

    __slots__ = ("_keys", "_subs", "_table", "first", "last", "line")

    def __init__(
        self,
        line: int,
        table: Table | None = None,
        first: int = 0,
        subs: list[tuple[str, int]] | None = None,
    ) -> None:
        self.line = line
        self.first = first  # first line of the header (tables only; 0 for inline entries)
        self.last = 0  # last line before the next unrelated header (tables only)
        self._table = table
        self._subs = subs
        self._keys: dict[str, int] | None = None

    def add_sub(self, key: str, line: int) -> None:
        """A sub-table ``[name.key]`` of this element, at ``line``."""
        if self._subs is None:
            self._subs = []
        self._subs.append((key, line))

    @property
    def keys(self) -> dict[str, int]:
        if self._keys is None:
            keys = dict(self._table.keys) if self._table is not None else {}
            for k, line in self._subs or ():
                keys.setdefault(k, line)
            self._keys = keys
        return self._keys


class Scan:
    def __init__(
        self, lines: list[str], tables: list[Table], content: list[bool] | None = None
    ) -> None:
        self._lines: list[str] | None = lines
        self._text = ""
        self._count = len(lines)
        self.tables = tables
        self._content = content
        # Built at the first lookup (the tables are complete by then): a 100,000-job file has
        # 100,000 tables, and each lookup of a table or array that is not there walked them all.
        self._index: tuple[dict[tuple[str, ...], Table], set[tuple[str, ...]]] | None = None
        self._index_n = -1  # len(tables) when it was built: tables added since, built again

    @classmethod
    def from_text(cls, text: str, tables: list[Table]) -> Scan:
        """The scan of ``text`` with its ``tables`` found by another reader
        (:mod:`gtui.core.queue.plaintoml`), for a text whose only line breaks are LF and CRLF: the
        lines are split only when asked for."""
        sc = cls([], tables)
        sc._lines = None
        sc._text = text
        sc._count = text.count("\n") + (not text.endswith("\n") and bool(text))
        return sc

    @property
    def lines(self) -> list[str]:
        """The text's lines, with their line endings."""
        if self._lines is None:
            self._lines = toml_lines(self._text)
        return self._lines

    @property
    def content(self) -> list[bool]:
        """Per line (index = line - 1): holds TOML data, not blank / comment only."""
        if self._content is None:
            self._content = [bool(s.strip()) and s.lstrip()[0] != "#" for s in self.lines]
        return self._content

    def _indexed(self) -> tuple[dict[tuple[str, ...], Table], set[tuple[str, ...]]]:
        """The plain tables by path (the first of each) and every array table's path."""
        if self._index is None or self._index_n != len(self.tables):
            plain: dict[tuple[str, ...], Table] = {}
            arrays: set[tuple[str, ...]] = set()
            for t in self.tables:
                if not t.array:
                    plain.setdefault(t.path, t)
                else:
                    arrays.add(t.path)
            self._index, self._index_n = (plain, arrays), len(self.tables)
        return self._index

    def table(self, *path: str) -> Table | None:
        return self._indexed()[0].get(path)

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
        # (no [[path]] table: none of the tables, 100,000 [[jobs]] ones, is looked at)
        tables = self.tables if path in self._indexed()[1] else []
        last = len(tables) - 1
        for i, t in enumerate(tables):
            if t.array and t.path == path:
                cur = Entry(t.line, t, t.line)
                out.append(cur)
            elif cur is not None and len(t.path) > n and t.path[:n] == path:
                cur.add_sub(t.path[n], t.line)
            else:
                cur = None
            if cur is not None:
                cur.last = tables[i + 1].line - 1 if i < last else self._count
        if not out and n >= 1:
            parent = self.table(*path[:-1]) if n > 1 else self.tables[0]
            if parent is not None:
                for line in (parent._inline or {}).get(path[-1], []):
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


def toml_lines(text: str) -> list[str]:
    """The lines of ``text`` as TOML counts them, with their endings: only LF (or CRLF) ends a
    line. ``str.splitlines`` also breaks at U+2028, U+0085, form feeds and the like, which a
    TOML string or comment may hold, and every message below it would name the wrong line."""
    lines = [line + "\n" for line in text.split("\n")]
    if lines[-1] == "\n":
        lines.pop()  # the text ends with a line break (or is empty): no line after it
    else:
        lines[-1] = lines[-1][:-1]
    return lines


def scan(text: str) -> Scan:
    """Find the tables, keys and inline entries of ``text`` (see the module docstring)."""
    lines = toml_lines(text)
    return _scan_clean(text, lines) or _scan_lines(lines)


# A text is "clean" when every line starts outside any string or bracket: no multi-line string,
# no line break that str.splitlines sees but a regex's ``^`` does not, every quote closed on its
# line, and on each line (strings and comments removed) brackets that close on it, nested two
# deep at most, with no ``{`` right inside a ``[`` (an inline entry of an array). Then a
# line's meaning depends on that line alone: headers are found with one regex
# over the text, and a table's keys are read only when asked for (they are only needed for
# messages); 10,000 jobs are 70,000 lines, of which only the 10,000 headers are looked at.
_ODD_BREAK = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]|\r(?!\n)")
_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\\n]|\\[^\n])*"|\'[^\'\n]*\'|#[^\n]*')
_NB = r"[^\[\]{}\n]*+"
_L2 = rf"(?:\[{_NB}\]|\{{{_NB}\}})"
_L1 = rf"(?:\[{_NB}(?:\[{_NB}\]{_NB})*+\]|\{{{_NB}(?:{_L2}{_NB})*+\}})"
_BAD_LINE = re.compile(rf"^(?!{_NB}(?:{_L1}{_NB})*+$)", re.MULTILINE)
_HEADER_START = re.compile(r"^[^\S\n]*\[", re.MULTILINE)


Paths = dict[tuple[str, ...], tuple[str, ...]]


def shared_path(paths: Paths, path: tuple[str, ...]) -> tuple[str, ...]:
    """``path``, or the equal tuple already in ``paths`` (one read's: it goes with the read)."""
    return paths.setdefault(path, path)


def _scan_clean(text: str, lines: list[str]) -> Scan | None:
    if '"""' in text or "'''" in text or _ODD_BREAK.search(text):
        return None
    plain = _STRING_OR_COMMENT.sub("", text.replace("\r\n", "\n") if "\r" in text else text)
    if '"' in plain or "'" in plain or _BAD_LINE.search(plain):
        return None
    root = Table(path=(), array=False, line=1)
    tables = [root]
    paths: Paths = {}
    lineno, at = 1, 0
    for m in _HEADER_START.finditer(text):
        pos = m.start()
        lineno += text.count("\n", at, pos)
        at = pos
        got = _header(lines[lineno - 1].rstrip("\r\n"))
        if got is not None:
            tables.append(Table(path=shared_path(paths, got[0]), array=got[1], line=lineno))
    for i, t in enumerate(tables):
        end = tables[i + 1].line if i + 1 < len(tables) else len(lines) + 1
        t._keys = None
        t._fill = _filler(lines, t.line + 1 if t.path else 1, end)
    return Scan(lines=lines, tables=tables)


def _header(s: str) -> tuple[tuple[str, ...], bool] | None:
    """The path of the header on line ``s`` (read at a line start) and whether it is ``[[...]]``."""
    m = _FAST.match(s)
    if m is not None:
        header = m.group("aot")
        if header is not None:
            return tuple(p.strip(" \t") for p in header.split(".")), True
        header = m.group("tab")
        if header is not None:
            return tuple(p.strip(" \t") for p in header.split(".")), False
        return None
    i = len(s) - len(s.lstrip())
    if not s.startswith("[", i):
        return None
    is_array = s.startswith("[[", i)
    got = _key_parts(s, i + (2 if is_array else 1))
    if got is not None and s.startswith("]]" if is_array else "]", got[1]):
        return tuple(got[0]), is_array
    return None


def _filler(lines: list[str], start: int, end: int) -> Callable[[Table], None]:
    """Fills a table's keys from its lines ``start`` up to ``end`` (excluded), of a clean text."""

    def fill(t: Table) -> None:
        keys: dict[str, int] = {}
        for lineno in range(start, end):
            s = lines[lineno - 1].rstrip("\r\n")
            m = _FAST.match(s)
            if m is not None:
                key = m.group("key")
                if key is None:
                    continue
                parts = [key]
            else:
                i = len(s) - len(s.lstrip())
                if i >= len(s) or s[i] in "[#":
                    continue
                got = _key_parts(s, i)
                if got is None or got[1] >= len(s) or s[got[1]] != "=":
                    continue
                parts = got[0]
            if parts[0] in keys:
                if len(parts) == 1:
                    t.repeat(parts[0], lineno)
            else:
                keys[parts[0]] = lineno
        t._keys = keys

    return fill


def _scan_lines(lines: list[str]) -> Scan:
    """The character loop over every line, for any text (with a fast path for plain lines)."""
    root = Table(path=(), array=False, line=1)
    tables = [root]
    paths: Paths = {}
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
                        cur = Table(path=shared_path(paths, path), array=is_array, line=lineno)
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
                        path = shared_path(paths, tuple(parts))
                        cur = Table(path=path, array=is_array, line=lineno)
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
