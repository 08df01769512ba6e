"""Where a value sits in the queue file (file, line, key), and the messages that name it.

Every mistake in a queue file is a :class:`QueueFileError` naming ``file:line``, the key and how
to fix it; a :class:`Where` is one table's half of that: its line and its keys' lines.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from gtui.core.errors import QueueFileError
from gtui.core.queue.tomlscan import Entry


class Where:
    """A table of the file: which lines its keys are on, and how to name it in messages.

    ``keys`` may be a scanned :class:`Entry`, whose key lines are then looked up only when a
    message asks (a load makes one of these per job; its keys are rarely read)."""

    __slots__ = ("_keys", "line", "path", "section")

    def __init__(
        self, path: str, line: int | None, keys: Mapping[str, int] | Entry, section: str
    ) -> None:
        self.path = path
        self.line = line
        self._keys = keys
        self.section = section

    @property
    def keys(self) -> Mapping[str, int]:
        keys = self._keys
        return keys.keys if isinstance(keys, Entry) else keys

    def line_of(self, key: str | None) -> int | None:
        if key is not None:
            top = key.split(".", 1)[0]
            if top in self.keys:
                return self.keys[top]
        return self.line

    def error(self, message: str, key: str | None = None) -> QueueFileError:
        shown = None if key is None else printable(key)
        return QueueFileError(self.path, printable(message), self.line_of(key), shown)


def printable(text: str) -> str:
    """``text`` with control characters escaped (``\\x1b``, ``\\r``, ``\\n``...): a key or
    value quoted from the file must not move the cursor or restyle the user's terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def kind_of(value: object) -> str:
    """How a message names a value it refuses: its type, and the value when short."""
    if isinstance(value, bool):
        return f"true/false ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 30 else value[:27] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def unknown_key(
    w: Where, key: str, known: Sequence[str], elsewhere: Mapping[str, Sequence[str]]
) -> QueueFileError:
    """The error for an unknown key: the close known key, or the table it belongs in."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return w.error(f"unknown key; did you mean `{close[0]}`?", key)
    for place, keys in elsewhere.items():
        if key in keys:
            return w.error(f"unknown key in {w.section}; `{key}` belongs in {place}", key)
    return w.error(f"unknown key in {w.section}; known keys: {', '.join(known)}", key)


def check_keys(
    w: Where,
    table: Mapping[str, Any],
    known: Sequence[str],
    elsewhere: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Refuse the first key of ``table`` not in ``known`` (see :func:`unknown_key`)."""
    for key in table:
        if key not in known:
            raise unknown_key(w, key, known, elsewhere or {})


# ---------------------------------------------------------------------------------------------
