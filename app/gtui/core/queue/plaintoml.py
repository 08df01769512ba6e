"""A fast reader for the plain shape of a queue file, exact or nothing.

``tomllib`` is pure Python and reads a 10,000-job queue file (70,000 lines) in ~0.35 s, then
:mod:`gtui.core.queue.tomlscan` looks for the lines
again. Nearly every queue file is plain: blank and
comment lines, ``[name]`` / ``[[name]]`` headers of one bare key, and ``key = value`` lines of one
bare key whose value fits on its line. :func:`parse_plain` reads such a text line by line with
string methods and returns what ``tomllib.loads`` returns, with the line of every table and key
(a :class:`~gtui.core.queue.tomlscan.Scan` equal to ``scan(text)``'s) in the same pass.

It never guesses: a line it does not read exactly (a dotted or quoted key, a multi-line value, a
key set twice, a table defined twice, a control character...) makes it return None, and the
caller uses ``tomllib`` and ``scan``, which also word any error. A value other than a plain
string, integer, float, boolean, or a one-line array / inline table of those, is handed to
``tomllib`` alone (``v = <the rest of the line>``): a single TOML value means the same wherever
its line stands, so the result is still exactly tomllib's.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from collections.abc import Callable
from typing import Any

from gtui.core.queue.tomlscan import Paths, Scan, Table, scan, shared_path

# Characters TOML refuses outside multi-line strings (the ASCII controls but tab and newline; a
# CR only as part of CRLF), and those ``str.splitlines`` takes as line breaks but TOML does not
# (U+0085, U+2028, U+2029): with any of them the slow path decides, which counts lines as TOML
# does (``tomlscan.toml_lines``).
_REFUSED = re.compile("[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]")
_FLOAT = re.compile(r"[+-]?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NESTED = re.compile(r"[\[\]{}#\\]")  # in an array or inline table: tomllib reads it
_NOT_PLAIN = object()  # a value the string methods cannot read exactly


class _NotPlain(Exception):
    """The text is not of the plain shape: the caller falls back to tomllib."""


def _is_bare(key: str) -> bool:
    """A bare TOML key: ASCII letters, digits, ``_`` and ``-``, at least one."""
    return key.isascii() and key.replace("-", "a").replace("_", "a").isalnum()


def _scalar(s: str) -> Any:
    """The value of ``s`` (stripped) if it is a plain string / integer / float / boolean."""
    if not s:
        return _NOT_PLAIN
    c = s[0]
    if c == '"':
        inner = s[1:-1]
        if len(s) >= 2 and s[-1] == '"' and '"' not in inner and "\\" not in inner:
            return inner
        return _NOT_PLAIN
    if c == "'":
        inner = s[1:-1]
        if len(s) >= 2 and s[-1] == "'" and "'" not in inner:
            return inner
        return _NOT_PLAIN
    if s == "true":
        return True
    if s == "false":
        return False
    digits = s[1:] if c in "+-" else s
    if digits.isdigit() and digits.isascii():
        if digits[0] == "0" and len(digits) > 1:
            return _NOT_PLAIN  # a leading zero: tomllib says why it is wrong
        return int(s)
    if _FLOAT.fullmatch(s) is not None:
        return float(s)
    return _NOT_PLAIN


def _array(s: str) -> Any:
    """``[a, b, ...]`` of plain scalars on one line (a trailing comma allowed, as in TOML)."""
    inner = s[1:-1]
    if _NESTED.search(inner) is not None:
        return _NOT_PLAIN
    if not inner.strip(" \t"):
        return []
    pieces = inner.split(",")
    if not pieces[-1].strip(" \t"):
        pieces.pop()  # a trailing comma
    out = []
    for piece in pieces:
        v = _scalar(piece.strip(" \t"))
        if v is _NOT_PLAIN:
            return _NOT_PLAIN
        out.append(v)
    return out


def _inline_table(s: str) -> Any:
    """``{ k = v, ... }`` of bare keys and plain scalars on one line (no trailing comma)."""
    inner = s[1:-1]
    if _NESTED.search(inner) is not None:
        return _NOT_PLAIN
    out: dict[str, Any] = {}
    if not inner.strip(" \t"):
        return out
    for piece in inner.split(","):
        k, eq, v = piece.partition("=")
        key = k.strip(" \t")
        if not eq or not _is_bare(key) or key in out:
            return _NOT_PLAIN
        value = _scalar(v.strip(" \t"))
        if value is _NOT_PLAIN:
            return _NOT_PLAIN
        out[key] = value
    return out


def _value(rest: str) -> tuple[Any, bool]:
    """The value written after a key's ``=`` (to the end of the line) and whether tomllib read it
    alone. A string piece holding a ``,`` or ``=`` leaves an unpaired quote, so a split that went
    through a string never reads as plain values."""
    s = rest.strip(" \t")
    c = s[:1]
    if c == "{":
        v = _inline_table(s) if s[-1] == "}" else _NOT_PLAIN
    elif c == "[":
        v = _array(s) if s[-1] == "]" else _NOT_PLAIN
    else:
        v = _scalar(s)
    if v is not _NOT_PLAIN:
        return v, False
    try:
        return tomllib.loads("v =" + rest)["v"], True
    except tomllib.TOMLDecodeError:
        raise _NotPlain from None  # tomllib reads the whole text again, for its message


def parse_plain(
    text: str, *, nested: list[tuple[Any, int]] | None = None
) -> tuple[dict[str, Any], Scan] | None:
    """``(tomllib.loads(text), scan(text))`` for a plain text (see the module docstring), or None
    when the text is not plain (or not valid TOML): then use tomllib and the scanner.

    ``nested``, if given, receives each array or table that tomllib read alone, with its depth
    in the document (the root is 1): only those can nest deeper than a plain array or inline
    table of scalars (depth 5 at most), so a caller that bounds the nesting need look at them
    alone rather than walk the whole document."""
    src = text.replace("\r\n", "\n") if "\r" in text else text
    if "\r" in src or _REFUSED.search(src) is not None:
        return None
    try:
        return _parse(src, text, nested)
    except (_NotPlain, ValueError, RecursionError):
        return None  # (an integer too long for int(), a deep array: tomllib says the same)


# A table of an array whose lines are all ``key = "string"`` / ``key = integer`` (no escape,
# no comment, no space at the end), then empty lines: its shape, the keys in order with how each
# line is written up to its value and whether that value is an integer. A generated queue file
# repeats one shape 100,000 times: once a [[name]] table of a shape has been read line by line,
# the tables after it are matched whole by a regex made of that shape (``_shaped``), a few C
# calls a table rather than some twenty string methods a line.
_Shape = tuple[tuple[str, str, bool], ...]
_STRING = r'"([^"\\\n]*)"\n'  # the string the line-by-line reading takes, as a regex
_INTEGER = r"(0|[1-9][0-9]{0,17})\n"  # an integer, up to 18 digits (longer: line by line)
_Shaped = tuple[re.Pattern[str], tuple[str, ...], tuple[int, ...], Callable[[Table], None]]


def _shaped(shape: _Shape, shapes: dict[_Shape, _Shaped]) -> _Shaped:
    """The regex that matches a table of ``shape`` and the empty lines after it (the last
    group), its keys, which of its values are integers, and what fills a table's key lines
    when they are asked for (rarely: for a message). ``shapes``: those one read made already
    (a sweep's tables share one or a few)."""
    got = shapes.get(shape)
    if got is None:
        body = "".join(re.escape(prefix) + (_INTEGER if i else _STRING) for _, prefix, i in shape)
        keys = tuple(k for k, _, _ in shape)
        ints = tuple(j for j, (_, _, i) in enumerate(shape) if i)

        def fill(table: Table) -> None:
            lines = range(table.line + 1, table.line + 1 + len(keys))
            table._keys = dict(zip(keys, lines, strict=True))

        got = (re.compile(body + r"(\n*)"), keys, ints, fill)
        if len(shapes) < 64:
            shapes[shape] = got
    return got


def _shape_of(lines: list[str]) -> _Shape | None:
    """The shape of a table whose lines (after its header) are ``lines``, or None."""
    shape: list[tuple[str, str, bool]] = []
    ended = False
    for line in lines:
        if not line:
            ended = True
            continue
        k, eq, rest = line.partition("=")
        v = rest.strip(" \t")
        if ended or not eq or not v or not line.endswith(v):
            return None
        if v[0] == '"':
            if len(v) < 2 or v[-1] != '"' or '"' in v[1:-1] or "\\" in v[1:-1]:
                return None
            is_int = False
        elif v.isdigit() and v.isascii() and (v[0] != "0" or len(v) == 1) and len(v) <= 18:
            is_int = True
        else:
            return None
        key = k.strip(" \t")
        if not _is_bare(key):
            return None
        shape.append((key, line[: len(line) - len(v)], is_int))
    return tuple(shape) or None


def _parse(
    src: str, text: str, nested: list[tuple[Any, int]] | None
) -> tuple[dict[str, Any], Scan]:
    root: dict[str, Any] = {}
    cur = root
    depth = 2  # of a value in ``cur``: 2 at the root, 3 in a [table], 4 in an [[array]]'s table
    root_table = Table(path=(), array=False, line=1)
    tables = [root_table]
    paths: Paths = {}  # one tuple per table path, shared by its tables
    shapes: dict[_Shape, _Shaped] = {}
    keys: dict[str, int] = {}
    root_table._keys = keys
    arrays: set[str] = set()  # names made by [[name]]
    bare: set[str] = set()  # keys already found bare
    needs_scan = False  # a one-line array of inline tables: the scanner finds its entries
    header = ""  # the line of the last [[name]] header
    header_at = 0  # its line number
    # after a table of no shape, or whose shape the next did not have, the line to look again
    # (each time further on, until a shape is matched again)
    next_try = 0
    gap = 8
    lines = src.split("\n")
    mark, mark_pos = 0, 0  # lines[mark] starts at src[mark_pos]
    lineno = 0
    it = iter(lines)
    for line in it:
        lineno += 1
        s = line.lstrip(" \t")
        if not s or s[0] == "#":
            continue
        if s[0] == "[":
            if '"' in s or "'" in s:
                raise _NotPlain  # a quoted header key
            head = s.partition("#")[0].rstrip(" \t")
            is_array = head.startswith("[[")
            if is_array:
                if not head.endswith("]]"):
                    raise _NotPlain
                name = head[2:-2].strip(" \t")
            else:
                if not head.endswith("]"):
                    raise _NotPlain
                name = head[1:-1].strip(" \t")
            if not _is_bare(name):
                raise _NotPlain  # dotted, or not a key at all
            cur = {}
            depth = 4 if is_array else 3
            if name in root:
                if not is_array or name not in arrays:
                    raise _NotPlain  # defined twice: tomllib words the error
                root[name].append(cur)
            elif is_array:
                root[name] = [cur]
                arrays.add(name)
            else:
                root[name] = cur
            table = Table(path=shared_path(paths, (name,)), array=is_array, line=lineno)
            keys = {}
            table._keys = keys
            tables.append(table)
            known = None
            if is_array and line == header and lineno >= next_try:
                known = _shape_of(lines[header_at : lineno - 1])
            header, header_at = line, lineno
            if known is None:
                if is_array and lineno >= next_try:
                    next_try, gap = lineno + gap, gap * 2  # not shaped here: look less often
                continue
            # The tables after a table of a known shape: each matched whole, with the empty
            # lines after it, while the next line is the same header again.
            pattern, names, ints, fill = _shaped(known, shapes)
            pos = mark_pos + sum(map(len, lines[mark:lineno])) + lineno - mark  # lines[lineno]'s
            mark, mark_pos = lineno, pos
            m = pattern.match(src, pos)
            if m is None:
                next_try, gap = lineno + gap, gap * 2  # shapes vary here: look less often
                continue
            n = len(names)
            again = line + "\n"
            items = root[name]
            path = table.path  # (the tables of the run share it)
            start = lineno
            values = m.groups()
            cur.update(zip(names, values, strict=False))  # (the last value: the empty lines)
            while True:
                for j in ints:
                    cur[names[j]] = int(values[j])
                table._fill = fill  # its keys' lines, made when asked for
                lineno += n + len(values[n])
                pos = m.end()
                if not src.startswith(again, pos):
                    keys = table.keys  # made now: more lines of this table may follow
                    break
                lineno += 1  # the next table, of the same name
                pos += len(again)
                header_at = lineno
                m = pattern.match(src, pos)
                if m is None:  # of another shape: its lines are read below
                    cur = {}
                    items.append(cur)
                    table = Table(path=path, array=True, line=lineno)
                    keys = {}
                    table._keys = keys
                    tables.append(table)
                    break
                values = m.groups()
                cur = dict(zip(names, values, strict=False))
                items.append(cur)
                table = Table(path=path, array=True, line=lineno)
                tables.append(table)
            next(itertools.islice(it, lineno - start, lineno - start), None)  # the lines read
            gap = 8
            mark, mark_pos = lineno, pos
            continue
        k, eq, rest = s.partition("=")
        key = k.rstrip(" \t")
        if key not in bare:
            if not _is_bare(key):
                raise _NotPlain
            bare.add(key)
        if not eq or key in cur:
            raise _NotPlain  # no value, or set twice: tomllib words the error
        keys[key] = lineno
        # the usual values, a plain string or a small integer, read here; the rest by _value
        v = rest.strip(" \t")
        c = v[:1]
        if c == '"':
            inner = v[1:-1]
            if v[-1] == '"' and inner and '"' not in inner and "\\" not in inner:
                cur[key] = inner
                continue
        elif c.isdigit() and v.isdigit() and v.isascii() and (c != "0" or len(v) == 1):
            cur[key] = int(v)
            continue
        value, alone = _value(rest)
        if alone and "{" in rest and isinstance(value, list):
            needs_scan = True  # inline tables in an array: the scanner lists them
        if alone and nested is not None and isinstance(value, (list, dict)):
            nested.append((value, depth))
        cur[key] = value
    if needs_scan:
        return root, scan(text)
    return root, Scan.from_text(text, tables)
