"""``gtui add QUEUE.toml [--name N] [--gpus K] [--mem 20G] ... -- CMD...``: append a job.

The job is written to the queue file (validated like the file, comments kept, under the file
lock) whether or not a scheduler runs; a running one is then told to reload at once (it would
notice the file change within one poll anyway). One that is starting (it holds the queue's lock,
its socket not open yet) is waited for a few seconds, so that it takes the job itself. Into a
running queue, a plain command line is served before this module is imported
(gtui.commands.add_job, from gtui.entry); the keys of the job are made there for both.

The command: one argument is taken as a shell command line as it is (``-- "a | b"``); several
are one word each, quoted as given (``-- python train.py --name "my run"``). Without ``--cwd``
the job runs where ``gtui add`` was run, as in task-spooler and pueue.

``--from FILE`` (``-``: stdin) adds one job per line, all in one edit of the file that a running
scheduler takes in at once (10,000 commands in one call, not 10,000 calls): see
:func:`add_from` for what a line may hold.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gtui.commands.add_job import ask_add, fields_of, option_fields, said_added
from gtui.commands.options import queue_file
from gtui.core.control.starting import once_started
from gtui.core.errors import GtuiError

if TYPE_CHECKING:
    import argparse

    from gtui.commands.options import GlobalOptions
    from gtui.core.paths import QueuePaths
    from gtui.core.queue.reader import QueueReader


def current_pool(
    paths: QueuePaths,
    opts: GlobalOptions,
    reader: QueueReader | None = None,
    text: str | None = None,
) -> list[int | None] | None:
    """The usable GPUs' totals, as `gtui validate` reads them, so that a job no GPU can take is
    refused now rather than written into the file (where it would stop the next `gtui run`).
    ``reader``: the command's, whose parse the write that follows reuses; ``text``: the file
    as the command read it (else it is read here)."""
    from gtui.commands.validate import read_machine
    from gtui.core.queue.queuefile import load_queue, pool_from_machine

    settings = load_queue(paths.queue, reader=reader, text=text).settings
    machine, _ = read_machine(
        opts.fake_gpus or settings.fake_gpus, paths.queue.parent, settings.gpus
    )
    return pool_from_machine(settings, machine) if machine else None


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    if getattr(ns, "from_file", None) is not None:
        return add_from(ns, opts, paths)
    fields = fields_of(ns, paths, list(ns.cmd or []))
    name = ask_add(paths, fields)
    if name is None:
        name = once_started(paths, lambda: ask_add(paths, fields), said=_say)
    if name is not None:
        said_added(name, fields, paths)
        return 0
    from gtui.core.queue.queuefile import QueueReader
    from gtui.core.queue.writeback import append_job

    reader = QueueReader()
    pool = current_pool(paths, opts, reader)
    name = append_job(paths.queue, fields, pool=pool, reader=reader)
    shown = name if isinstance(name, str) and name else fields.get("name", "the job")
    print(f"added {shown} to {paths.queue.name}")
    tell_scheduler(paths, "it", "the job starts")
    return 0


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def tell_scheduler(paths: QueuePaths, what: str, starts: str) -> None:
    """After a write with no scheduler answering: tell one that has started since to take the
    file in now (it would within one poll), or say that none runs."""
    from gtui.core.control.protocol import Refused, Reload
    from gtui.core.control.rpc import send

    try:
        reloaded = send(paths, Reload(), timeout=30.0)
    except GtuiError as e:
        print(
            f"(the scheduler did not take {what} yet: {e}; it will within one poll)",
            file=sys.stderr,
        )
        return
    if reloaded is None:
        print(f"(no scheduler runs {paths.queue.name}: {starts} when one does)", file=sys.stderr)
    elif isinstance(reloaded, Refused):
        print(f"(the scheduler says: {reloaded.error})", file=sys.stderr)


# -- gtui add --from FILE ------------------------------------------------------------------

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
    import json

    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise GtuiError(f"{at}: not valid JSON ({e.msg}, column {e.colno})") from None
    if not isinstance(obj, dict):
        raise GtuiError(f"{at}: a JSON line must be an object with a `cmd`")
    from gtui.core.queue.schema import JOB_KEYSET

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
    import re

    m = re.search(r"job (\d+) of (\d+)", message)
    if m is None or not 1 <= int(m.group(1)) <= len(where):
        return message
    return f"{message} [{label} line {where[int(m.group(1)) - 1]}]"


def add_from(ns: argparse.Namespace, opts: GlobalOptions, paths: QueuePaths) -> int:
    """Each line of FILE (``-``: stdin) is one job: a shell command line as it is, or a JSON
    object (a line that starts with ``{``) with ``cmd`` and any other key a ``[[jobs]]`` table
    takes. Blank lines and lines that start with ``#`` are skipped; the command's options
    (``--gpus``, ``--mem``, ...) apply to every line unless its JSON sets the key. Nothing is
    added when one line is wrong, and the message names its line. A running scheduler gets all
    of them in one request and writes them in one edit, checking only the new entries; with
    none running, the file gets one edit here."""
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
    from gtui.core.control.protocol import Acted, AddMany
    from gtui.core.control.rpc import ask

    def send() -> Acted | None:
        return ask(paths, AddMany(tuple(jobs)), timeout=ADD_TIMEOUT_S)

    try:
        added = send()
        if added is None:
            added = once_started(paths, send, said=_say)
    except GtuiError as e:
        raise GtuiError(_which_line(str(e), where, label), e.exit_code) from None
    if added is not None:
        _said(list(added.names), len(jobs), paths)
        return 0
    try:
        names = _write(paths, opts, jobs)
    except GtuiError as e:
        raise GtuiError(_which_line(str(e), where, label), e.exit_code) from None
    _said(names, len(jobs), paths)
    tell_scheduler(paths, "them", "they start")
    return 0


def _write(paths: QueuePaths, opts: GlobalOptions, jobs: list[dict[str, object]]) -> list[str]:
    """With no scheduler: one edit of the file, each new entry checked against the file's jobs
    (so a wrong one is named), the whole file checked again only where that cannot tell."""
    from gtui.core.queue.editing import read_with_mark
    from gtui.core.queue.queuefile import QueueReader, load_queue
    from gtui.core.queue.writeback import append_jobs, append_known_many

    reader = QueueReader()
    # One read and one parse of the file: the pool's settings and the check of the new entries
    # against the jobs come from the same text (the reader keeps its parse for the second load).
    text, _ = read_with_mark(paths.queue)
    pool = current_pool(paths, opts, reader, text)
    queue = load_queue(paths.queue, text=text, reader=reader, pool=pool)
    from gtui.core.queue.names import named_apart

    known = {j.name for j in queue.jobs}
    jobs = named_apart(jobs, known)
    fast = append_known_many(
        paths.queue,
        jobs,
        runs=lambda now: now == text,  # not edited since it was read
        settings=queue.settings,
        known=known,
        entry=max((j.entry for j in queue.jobs), default=-1) + 1,
        pool=pool,
    )
    if fast is not None:
        for warning in fast.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        return fast.firsts
    return append_jobs(paths.queue, jobs, pool=pool, reader=reader)


def _said(names: list[str], count: int, paths: QueuePaths) -> None:
    span = f" ({names[0]} .. {names[-1]})" if len(names) > 1 else f" ({names[0]})" if names else ""
    print(f"added {count} job{'s' if count != 1 else ''} to {paths.queue.name}{span}")
