"""``[groups.NAME]`` tables: each group's limits, checked.

A job joins a group by ``group = "NAME"`` (a matrix entry's jobs form one by default, named in
entries.py); a group needs no table. Its table may hold ``max_parallel`` (at most this many of
its jobs run at once, 0: no limit of its own) and ``priority`` (added to each of its jobs'
own when the policy ranks them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gtui.core.model import GroupRule
from gtui.core.queue.entries import group_name
from gtui.core.queue.schema import GROUP_KEYS, JOB_KEYS
from gtui.core.queue.tomlscan import Scan
from gtui.core.queue.values import int_value
from gtui.core.queue.where import Where, check_keys, kind_of


def parse_groups(shown: str, sc: Scan, data: Any, fallback: int | None) -> tuple[GroupRule, ...]:
    """The ``[groups]`` top-level table: one :class:`GroupRule` per ``[groups.NAME]``, in file
    order. ``fallback``: the line to name when the file has no ``[groups]`` header of its own
    (``groups = {...}`` inline)."""
    top = sc.table("groups")
    w = Where(shown, top.line if top else fallback, top.keys if top else {}, "[groups]")
    if not isinstance(data, Mapping):
        raise w.error(f"expected [groups.NAME] tables, got {kind_of(data)}", "groups")
    out: list[GroupRule] = []
    for name, fields in data.items():
        t = sc.table("groups", name)
        gw = Where(shown, t.line if t else w.line_of(name), t.keys if t else {}, f"[groups.{name}]")
        group_name(gw, name, "groups")
        if not isinstance(fields, Mapping):
            raise gw.error(
                f"expected a table such as [groups.{name}] max_parallel = 4, got {kind_of(fields)}",
                name,
            )
        check_keys(gw, fields, GROUP_KEYS, {"a [[jobs]] table": JOB_KEYS})
        limit = int_value(gw, "max_parallel", fields.get("max_parallel", 0), 0, " (0 = no limit)")
        priority = int_value(gw, "priority", fields.get("priority", 0))
        out.append(GroupRule(name, limit, priority))
    return tuple(out)
