"""The one reader of queue-file text: text in; the document and the line of every table and
key out.

``tomllib`` keeps no positions, and every message must name a line: a plain file (nearly every
queue file) is read, lines included, by the faster :mod:`gtui.core.queue.plaintoml`, which gives
exactly what ``tomllib`` and :mod:`gtui.core.queue.tomlscan` give, or leaves the file to them.
Every place that reads a queue file's TOML goes through here: a load (``gtui validate``, the
scheduler's start and reloads, the command line), the write-back of edits, the live edit of one
job; so the same text always reads the same, and is refused with the same message.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from typing import Any

from gtui.core.errors import QueueFileError
from gtui.core.queue.plaintoml import parse_plain
from gtui.core.queue.tomlscan import Scan, scan
from gtui.core.queue.where import printable

# Arrays and tables inside each other: a real queue file uses 3 or 4 ([[jobs]] > env, matrix >
# its list); anything deeper is a mistake or an attack on the reader.
MAX_NESTING = 32
TOO_DEEP = f"nested too deeply (a queue file needs at most {MAX_NESTING} levels)"

_SYNTAX_POS = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)\s*$")


@dataclass(frozen=True, slots=True)
class Document:
    """A queue file's text, read: what ``tomllib.loads`` returns, and where each table and key
    is (the scan). Nothing downstream mutates either: a cached one may be shared."""

    data: dict[str, Any]
    scan: Scan


class TomlSyntaxError(QueueFileError):
    """Text that is not TOML: the message a load gives (line, key, the line's text), and
    ``toml_message``, tomllib's own, for a caller that words it otherwise."""

    def __init__(
        self,
        path: str,
        detail: str = "",
        line: int | None = None,
        key: str | None = None,
        toml_message: str = "",
    ) -> None:
        super().__init__(path, detail, line, key)
        self.toml_message = toml_message


def read_document(text: str, shown: str) -> Document:
    """``text`` read (``shown``: the file's name in messages). Raises :class:`TomlSyntaxError`
    for text that is not TOML, and a QueueFileError for a document nested too deeply."""
    try:
        nested: list[tuple[Any, int]] = []
        plain = parse_plain(text, nested=nested)
        if plain is not None:
            # The plain reader's own arrays and inline tables hold scalars only (depth 5 at
            # most): only what it left to tomllib can nest deeper. Walking all of a
            # 100,000-job document instead cost 0.2 s of each load.
            data, sc = plain
            for value, depth in nested:
                check_depth(shown, value, depth)
        else:
            sc = scan(text)
            data = _parse_toml(shown, text, sc)
            check_depth(shown, data)
    except RecursionError:
        # tomllib reads nested arrays and tables recursively: a text nested some hundreds of
        # levels deep exhausts the stack before check_depth can see it.
        raise QueueFileError(shown, TOO_DEEP) from None
    return Document(data, sc)


def read_plain_document(text: str) -> Document | None:
    """``text`` read by the plain reader alone, or None: not plain, not TOML, or nested too
    deeply (a whole load then reads it, and says what is wrong). For the live edit of one
    job, which takes only a table the plain reader reads."""
    nested: list[tuple[Any, int]] = []
    plain = parse_plain(text, nested=nested)
    if plain is None:
        return None
    data, sc = plain
    try:
        for value, depth in nested:
            check_depth("<text>", value, depth)
    except QueueFileError:
        return None
    return Document(data, sc)


def _parse_toml(path: str, text: str, sc: Scan) -> dict[str, Any]:
    """``tomllib.loads(text)``; its refusal worded with the scan's line and key."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        m = _SYNTAX_POS.search(message)
        detail = message[: m.start()] if m else message
        line: int | None = None
        key: str | None = None
        if "overwrite" in message or "twice" in message:
            for t in sc.tables:
                if t.repeated:
                    key, line = t.repeated[0]
                    detail = f"{key} is set twice in the same table; keep one"
                    break
        if line is None and m and m.group(1):
            line = int(m.group(1))
            detail += f" (column {m.group(2)})"
        elif line is None:
            line = max(1, len(sc.lines))
        shown = printable(sc.lines[line - 1].strip()) if 0 < line <= len(sc.lines) else ""
        extra = f"\n    {shown}" if shown else ""
        shown_key = printable(key) if key else key
        raise TomlSyntaxError(
            path, f"TOML syntax error: {printable(detail)}{extra}", line, shown_key, message
        ) from None


def check_depth(path: str, data: object, depth: int = 1) -> None:
    """Refuse a document nested deeper than MAX_NESTING (iteratively: no recursion to break);
    ``data`` may be a part of it, at ``depth`` (the root is 1)."""
    stack: list[tuple[object, int]] = [(data, depth)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise QueueFileError(path, TOO_DEEP)
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))
