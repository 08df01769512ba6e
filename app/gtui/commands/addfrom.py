"""``gtui add QUEUE.toml --from FILE``: many jobs in one call and one edit of the queue file.

Each line of FILE (``-``: stdin) is one job: a shell command line as it is, or a JSON object
(a line that starts with ``{``) with ``cmd`` and any other key a ``[[jobs]]`` table takes
(``name``, ``gpus``, ``mem``, ``priority``, ``after``, ...). Blank lines and lines that start
with ``#`` are skipped. The add command's options (``--gpus``, ``--mem``, ...) apply to every
line unless its JSON sets the key. Nothing is added when one line is wrong: the message names
its line.

A running scheduler gets all of them in one request and writes them in one edit, checking only
the new entries; with none running, the file gets one edit here.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from gtui.commands.add import current_pool, option_fields
from gtui.commands.options import GlobalOptions
from gtui.core.control.protocol import AddMany, Refused, Reload
from gtui.core.control.rpc import ask, send
from gtui.core.errors import GtuiError
from gtui.core.paths import QueuePaths
from gtui.core.queue.schema import JOB_KEYSET

ADD_TIMEOUT_S = 300.0  # 100,000 lines are checked and written in one request


def read_lines(source: str) -> tuple[str, list[str]]:
    """FILE's lines (``-``: stdin) and the name messages give it."""
    if source == "-":
        return "stdin", sys.stdin.read().splitlines()
    path = Path(source).expanduser()
    try:
        return source, path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise GtuiError(f"--from {source}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise GtuiError(f"--from {source}: cannot read it ({e})") from None


def jobs_of(
    lines: list[str], label: str, defaults: dict[str, object]
) -> tuple[list[dict[str, object]], list[int]]:
    """Each job's keys, and the line (1-based) each came from."""
    jobs: list[dict[str, object]] = []
    where: list[int] = []
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("{"):
            fields = _json_job(line, f"{label} line {number}")
        else:
            fields = {"cmd": line}
        jobs.append({**defaults, **fields})
        where.append(number)
    return jobs, where


def _json_job(line: str, at: str) -> dict[str, object]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise GtuiError(f"{at}: not valid JSON ({e.msg}, column {e.colno})") from None
    if not isinstance(obj, dict):
        raise GtuiError(f"{at}: a JSON line must be an object with a `cmd`")
    unknown = sorted(k for k in obj if k not in JOB_KEYSET)
    if unknown:
        raise GtuiError(
            f"{at}: unknown key {', '.join(f'`{k}`' for k in unknown)} "
            f"(a job takes {', '.join(sorted(JOB_KEYSET))})"
        )
    cmd = obj.get("cmd")
    if not isinstance(cmd, str) or not cmd.strip():
        raise GtuiError(f"{at}: a job needs a `cmd` (a non-empty string)")
    return obj


def _which_line(message: str, where: list[int], label: str) -> str:
    """The scheduler's "job N of M" said as the line of FILE it came from."""
    m = re.search(r"job (\d+) of (\d+)", message)
    if m is None or not 1 <= int(m.group(1)) <= len(where):
        return message
    return f"{message} [{label} line {where[int(m.group(1)) - 1]}]"


def add_from(ns: argparse.Namespace, opts: GlobalOptions, paths: QueuePaths) -> int:
    if ns.cmd:
        raise GtuiError("gtui add: give a command after -- or --from FILE, not both")
    if ns.name:
        raise GtuiError(
            "gtui add --from: --name names one job; give each line its name as JSON "
            '({"name": "a", "cmd": "..."}) or leave names to gtui'
        )
    label, lines = read_lines(ns.from_file)
    jobs, where = jobs_of(lines, label, option_fields(ns, paths))
    if not jobs:
        print(f"nothing to add: {label} has no commands", file=sys.stderr)
        return 0
    try:
        added = ask(paths, AddMany(tuple(jobs)), timeout=ADD_TIMEOUT_S)
    except GtuiError as e:
        raise GtuiError(_which_line(str(e), where, label)) from None
    if added is not None:
        _said(list(added.names), len(jobs), paths)
        return 0
    try:
        names = _write(paths, opts, jobs)
    except GtuiError as e:
        raise GtuiError(_which_line(str(e), where, label)) from None
    _said(names, len(jobs), paths)
    try:
        reloaded = send(paths, Reload(), timeout=30.0)
    except GtuiError as e:
        said = f"(the scheduler did not take them yet: {e}; it will within one poll)"
        print(said, file=sys.stderr)
        return 0
    if reloaded is None:
        print(f"(no scheduler runs {paths.queue.name}: they start when one does)", file=sys.stderr)
    elif isinstance(reloaded, Refused):
        print(f"(the scheduler says: {reloaded.error})", file=sys.stderr)
    return 0


def _write(paths: QueuePaths, opts: GlobalOptions, jobs: list[dict[str, object]]) -> list[str]:
    """With no scheduler: one edit of the file, each new entry checked against the file's jobs
    (so a wrong one is named), the whole file checked again only where that cannot tell."""
    from gtui.core.queue.editing import read_with_mark
    from gtui.core.queue.queuefile import QueueReader, load_queue
    from gtui.core.queue.writeback import append_jobs, append_known_many

    reader = QueueReader()
    pool = current_pool(paths, opts, reader)
    text, _ = read_with_mark(paths.queue)
    queue = load_queue(paths.queue, text=text, reader=reader, pool=pool)
    fast = append_known_many(
        paths.queue,
        jobs,
        runs=lambda now: now == text,  # not edited since it was read
        settings=queue.settings,
        known={j.name for j in queue.jobs},
        entry=max((j.entry for j in queue.jobs), default=-1) + 1,
        pool=pool,
    )
    if fast is not None:
        firsts: dict[int, str] = {}
        for spec in fast.jobs:
            firsts.setdefault(spec.entry, spec.name)
        for warning in fast.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        return list(firsts.values())
    return append_jobs(paths.queue, jobs, pool=pool, reader=reader)


def _said(names: list[str], count: int, paths: QueuePaths) -> None:
    span = f" ({names[0]} .. {names[-1]})" if len(names) > 1 else f" ({names[0]})" if names else ""
    print(f"added {count} job{'s' if count != 1 else ''} to {paths.queue.name}{span}")
