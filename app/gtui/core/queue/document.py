"""A read queue file checked into a :class:`QueueFile`: the top level, the settings, every
``[[jobs]]`` entry expanded and the checks across them, then the pool.

Every mistake is a :class:`QueueFileError` naming ``file:line``, the key, and how to fix it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gtui.core.model import JobSpec, Settings
from gtui.core.queue.checks import PoolCheck, find_cycle, job_warnings, resolve_after
from gtui.core.queue.entries import Expanded, expand_entry
from gtui.core.queue.groups import parse_groups
from gtui.core.queue.parse import Document
from gtui.core.queue.schema import JOB_KEYS, SETTINGS_KEYS, TOP_KEYS, QueueFile
from gtui.core.queue.settings import (
    names_nodes,
    parse_cluster,
    parse_notify,
    parse_rules,
    parse_settings,
    pool_from_machine,
)
from gtui.core.queue.tomlscan import Scan
from gtui.core.queue.values import Seen
from gtui.core.queue.where import Where, unknown_key


def settings_where(path: str, sc: Scan) -> tuple[int | None, dict[str, int]]:
    """The line of ``[settings]`` and of each of its keys (a sub-table's header for its key)."""
    t = sc.table("settings")
    if t is not None:
        keys = dict(t.keys)
        for sub in sc.tables:
            if len(sub.path) == 2 and sub.path[0] == "settings":
                keys.setdefault(sub.path[1], sub.line)
        return t.line, keys
    line = sc.tables[0].keys.get("settings")
    return line, {}


Expansion = tuple[list[tuple[JobSpec, Where]], list[str]]
# (the jobs' tables, the settings, where [[jobs]] is) -> the expansion; a reader may reuse one
Expand = Callable[[list[Any], Settings, Where], Expansion]


def expand_jobs(
    shown: str, sc: Scan, raw_jobs: list[Any], settings: Settings, jobs_where: Where
) -> Expansion:
    """Every [[jobs]] table expanded, named, checked and its ``after`` resolved, with where it
    was declared; and the warnings. Everything but the checks against the GPUs, which depend on
    the pool: so a second load of the same text (``gtui validate``, the engine's start, first
    without the GPUs and then with them) may reuse it. For 10,000 jobs it is 0.35 s of a load.
    """
    entries = sc.entries("jobs")
    expanded: list[Expanded] = []
    seen_values = Seen()
    for i, fields in enumerate(raw_jobs):
        e = entries[i] if i < len(entries) else None
        w = Where(shown, e.line if e else jobs_where.line, e if e else {}, "[[jobs]]")
        expanded.append(expand_entry(fields, settings, w, i, seen_values))

    seen: dict[str, Expanded] = {}
    templates: dict[str, list[str]] = {}
    for exp in expanded:
        for job in exp.jobs:
            if job.name in seen:
                other = seen[job.name].where.line
                derived = "name" not in raw_jobs[job.entry]
                how = " (derived from cmd)" if derived else ""
                fix = "give one of them a distinct `name`"
                raise exp.where.error(
                    f"`{job.name}`{how} is already the name of the job at line {other}; {fix}",
                    "name" if not derived else "cmd",
                )
            seen[job.name] = exp
        if exp.template is not None:
            templates.setdefault(exp.template, []).extend(j.name for j in exp.jobs)

    jobs: list[JobSpec] = []
    warnings: list[str] = []
    out: list[tuple[JobSpec, Where]] = []
    for exp in expanded:
        if exp.notes:
            warnings.extend(exp.notes)
        where = exp.where
        for job in exp.jobs:
            # a job that waits for nothing is itself resolved; one whose cmd has no placeholder
            # (nor a CUDA_VISIBLE_DEVICES to read) has no warning: most jobs, 0.2 s of 100,000
            resolved = resolve_after(job, seen, templates, where) if job.after else job
            if exp.used is None or exp.used or "CUDA_VISIBLE_DEVICES" in job.cmd:
                warnings.extend(job_warnings(resolved, where, settings, exp.used))
            jobs.append(resolved)
            out.append((resolved, where))
    cycle = find_cycle(jobs)
    if cycle:
        where_of = {job.name: where for job, where in out}
        raise where_of[cycle[0]].error(
            f"jobs wait for each other in a cycle: {' -> '.join(cycle)}; remove one of these",
            "after",
        )
    return out, warnings


def check_document(
    path: Path | str,
    doc: Document,
    pool: Sequence[int | None] | None,
    machine: Mapping[int, int | None] | None,
    expand: Expand,
) -> QueueFile:
    """A read queue file checked: its top-level keys, its settings, its jobs expanded (by
    ``expand``) and checked against the pool (see :func:`gtui.core.queue.reader.load_queue`)."""
    p = Path(path)
    shown = str(path)
    sc, data = doc.scan, doc.data
    root = Where(shown, None, sc.tables[0].keys, "the top level")
    for key in data:
        if key not in TOP_KEYS:
            # A [table] header's line is not a root key's: look both up.
            t = sc.table(key)
            w = Where(shown, t.line if t else root.line_of(key), {}, "the top level")
            arr = [x for x in sc.tables if x.path == (key,)]
            if arr and t is None:
                w = Where(shown, arr[0].line, {}, "the top level")
            raise unknown_key(
                w, key, TOP_KEYS, {"[settings]": SETTINGS_KEYS, "a [[jobs]] table": JOB_KEYS}
            )

    s_line, s_keys = settings_where(shown, sc)
    raw_settings = data.get("settings", {})
    rule_lines = [(e.line, e.keys) for e in sc.entries("settings", "diagnose")]
    settings = parse_settings(raw_settings, shown, line=s_line, lines=s_keys, rule_lines=rule_lines)
    if "diagnose" in data:
        entries = sc.entries("diagnose")
        wheres = [Where(shown, e.line, e.keys, "[[diagnose]]") for e in entries]
        fallback = Where(shown, root.line_of("diagnose"), {}, "the top level")
        extra = parse_rules(shown, data["diagnose"], wheres, fallback)
        settings = replace(settings, diagnose=settings.diagnose + tuple(extra))
    if "notify" in data:
        t = sc.table("notify")
        nw = Where(shown, _table_line(t) or root.line_of("notify"), t.keys if t else {}, "[notify]")
        settings = replace(settings, notify=parse_notify(data["notify"], nw))

    if "cluster" in data:
        t = sc.table("cluster")
        line = t.line if t else root.line_of("cluster")
        cw = Where(shown, line, t.keys if t else {}, "[cluster]")
        settings = parse_cluster(cw, data["cluster"], settings)

    if "groups" in data:
        groups = parse_groups(shown, sc, data["groups"], root.line_of("groups"))
        settings = replace(settings, groups=groups)

    if machine is not None and pool is None and not names_nodes(settings):
        pool = pool_from_machine(settings, machine, Where(shown, s_line, s_keys, "[settings]"))

    raw_jobs = data.get("jobs", [])
    jobs_where = Where(
        shown,
        root.line_of("jobs") or _table_line(sc.table("jobs")),
        {},
        "the top level",
    )
    if not isinstance(raw_jobs, list):
        raise jobs_where.error("expected [[jobs]] tables (each with a `cmd`)", "jobs")
    expanded_jobs, warnings = expand(raw_jobs, settings, jobs_where)
    check_pool = PoolCheck(settings, pool)
    jobs: list[JobSpec] = []
    for resolved, where in expanded_jobs:
        check_pool(resolved, where)
        jobs.append(resolved)
    return QueueFile(
        path=p, settings=settings, jobs=tuple(jobs), warnings=tuple(dict.fromkeys(warnings))
    )


def _table_line(table: Any) -> int | None:
    """The line of a scanned table, if the scanner found one."""
    return table.line if table is not None else None
