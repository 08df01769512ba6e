"""One job's table edited through tomlkit, which keeps every other line as written: the
values as tomlkit writes them, a key set or deleted, a new table, a matrix value taken out.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import tomlkit
from tomlkit.items import InlineTable, Table

from gtui.core.errors import QueueFileError
from gtui.core.model import JobSpec
from gtui.core.queue.schema import JOB_KEYS
from gtui.core.queue.values import scalar_text

Container = Table | InlineTable


def plain_value(value: Any) -> Any:
    """A field value as tomlkit should write it (tuples become lists)."""
    if isinstance(value, tuple):
        return [plain_value(v) for v in value]
    if isinstance(value, list):
        return [plain_value(v) for v in value]
    if isinstance(value, Mapping):
        table = tomlkit.inline_table()
        for k, v in value.items():
            table[k] = plain_value(v)
        return table
    return value


def unwrap(value: Any) -> Any:
    """A tomlkit item's plain value (a plain value as it is)."""
    return value.unwrap() if hasattr(value, "unwrap") else value


def apply_fields(table: Container, fields: Mapping[str, Any]) -> None:
    """Set (or, for None / an empty ``after``, delete) keys of one job table."""
    for key, value in fields.items():
        if value is None or (key == "after" and value in ([], ())):
            if key in table:
                del table[key]
            continue
        plain = plain_value(value)
        if key in table and unwrap(table[key]) == unwrap(plain):
            continue  # unchanged: keep it as the user wrote it
        if key == "env" and key in table and isinstance(table[key], Table):
            sub = table[key]
            for k in list(sub.keys()):
                if k not in value:
                    del sub[k]
            for k, v in value.items():
                if k not in sub or unwrap(sub[k]) != v:
                    sub[k] = v
            continue
        table[key] = plain


def check_fields(path: Path, fields: Mapping[str, Any]) -> None:
    """Refuse a key no job table has, with the close one."""
    for key in fields:
        if key not in JOB_KEYS:
            close = difflib.get_close_matches(key, JOB_KEYS, n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise QueueFileError(str(path), f"unknown key{hint}", None, key)


def new_table(fields: Mapping[str, Any], inline: bool) -> Container:
    """A job table for ``fields``, keys in the schema's order (inline: ``{...}``)."""
    table: Container = tomlkit.inline_table() if inline else tomlkit.table()
    ordered = sorted(fields, key=lambda k: JOB_KEYS.index(k) if k in JOB_KEYS else 99)
    for key in ordered:
        value = fields[key]
        if value is None or (key == "after" and value in ([], ())):
            continue
        table[key] = plain_value(value)
    return table


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES: Mapping[str, str] = MappingProxyType({
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
})
_TO_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f]')


def _string(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        c = m.group()
        return _ESCAPES.get(c) or f"\\u{ord(c):04x}"

    return '"' + _TO_ESCAPE.sub(one, text) + '"'


def _plain_text(value: Any) -> str | None:
    """``value`` as tomlkit writes it, for the shapes a job's keys take (strings, integers,
    booleans, lists of them, a table of strings); None for any other."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        items: list[str] = []
        for v in value:
            text = None if isinstance(v, list | tuple | Mapping) else _plain_text(v)
            if text is None:
                return None
            items.append(text)
        return "[" + ", ".join(items) + "]"
    if isinstance(value, Mapping):
        parts = []
        for k, v in value.items():
            if not isinstance(k, str) or not isinstance(v, str | int) or isinstance(v, bool):
                return None
            key = k if _BARE_KEY.fullmatch(k) else _string(k)
            parts.append(f"{key} = {_plain_text(v)}")
        return "{" + ", ".join(parts) + "}"
    return None


def job_table_text(fields: Mapping[str, Any]) -> str:
    """The text of a new ``[[jobs]]`` table for ``fields``, exactly as
    ``table_text(new_table(fields, inline=False))`` writes it, without building tomlkit's
    objects where every value has a plain shape: ``gtui add --from`` writes 10,000 of them in
    one edit, and tomlkit took a millisecond and a half for each."""
    lines = ["[[jobs]]"]
    for key in sorted(fields, key=lambda k: JOB_KEYS.index(k) if k in JOB_KEYS else 99):
        value = fields[key]
        if value is None or (key == "after" and value in ([], ())):
            continue
        text = _plain_text(value)
        if text is None:
            table = new_table(fields, inline=False)
            assert isinstance(table, Table)
            return table_text(table)
        lines.append(f"{key if _BARE_KEY.fullmatch(key) else _string(key)} = {text}")
    return "\n".join(lines) + "\n"


def table_text(table: Table) -> str:
    """The text of ``table`` as one ``[[jobs]]`` table."""
    doc = tomlkit.document()
    aot = tomlkit.aot()
    aot.append(table)
    doc.append("jobs", aot)
    return doc.as_string()


def standalone(raw: Mapping[str, Any], job: JobSpec) -> dict[str, Any]:
    """The fields of one job of a matrix entry, written out on its own."""
    out: dict[str, Any] = {k: v for k, v in raw.items() if k != "matrix"}
    out["name"] = job.name
    out["cmd"] = job.cmd
    if job.after:
        out["after"] = list(job.after)
    else:
        out.pop("after", None)
    if "cwd" in raw:
        out["cwd"] = job.cwd
    if job.env:
        out["env"] = dict(job.env)
    return out


def set_keys(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The keys a job table written from ``fields`` holds, with their plain values."""
    return {
        k: unwrap(plain_value(v))
        for k, v in fields.items()
        if not (v is None or (k == "after" and v in ([], ())))
    }


def edit_element(
    table_text: str, edit: Callable[[Container], object]
) -> tuple[str | None, str | None]:
    """One inline table's text edited through tomlkit alone: its new text (None when no key is
    left) and the text of a table ``edit`` returns to insert after it."""
    doc = tomlkit.parse("v = " + table_text)
    table = doc["v"]
    assert isinstance(table, InlineTable)
    extra = edit(table)
    new = table.as_string().strip() if len(table.keys()) else None
    if extra is None:
        return new, None
    assert isinstance(extra, InlineTable)
    return new, extra.as_string().strip()


def drop_matrix_value(table: Container, key: str, value: str) -> None:
    """Remove ``value`` from ``matrix.key``; an emptied matrix empties the whole table."""
    matrix = table["matrix"]
    values = matrix[key]
    for i, v in enumerate(list(values)):
        if scalar_text(unwrap(v)) == value:
            del values[i]
            break
    if len(values) == 0:
        for k in list(table.keys()):
            del table[k]
