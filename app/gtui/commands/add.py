"""``gtui add QUEUE.toml [--name N] [--gpus K] [--mem 20G] ... -- CMD...``: append a job.

The job is written to the queue file (validated like the file, comments kept, under the file
lock) whether or not a scheduler runs; a running one is then told to reload at once (it would
notice the file change within one poll anyway).

The command: one argument is taken as a shell command line as it is (``-- "a | b"``); several
are one word each, quoted as given (``-- python train.py --name "my run"``). Without ``--cwd``
the job runs where ``gtui add`` was run, as in task-spooler and pueue.

``--from FILE`` (``-``: stdin) adds one job per line, all in one edit of the file that a running
scheduler takes in at once (10,000 commands in one call, not 10,000 calls): see
gtui.commands.addfrom for what a line may hold.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.control.protocol import Add, Refused, Reload
from gtui.core.control.rpc import ask, send
from gtui.core.errors import GtuiError
from gtui.core.paths import QueuePaths

if TYPE_CHECKING:
    from gtui.core.queue.reader import QueueReader


def command_line(words: list[str]) -> str:
    if not words:
        raise GtuiError(
            "gtui add: no command; put it after --, e.g. gtui add q.toml -- python a.py"
        )
    return words[0] if len(words) == 1 else shlex.join(words)


def job_cwd(paths: QueuePaths, given: str | None) -> str | None:
    """The job's cwd as written to the file: relative to the queue's folder when inside it."""
    where = Path(os.path.abspath(os.path.expanduser(given))) if given else Path.cwd()
    if given and not where.is_dir():
        raise GtuiError(f"--cwd {given}: no such directory")
    base = paths.queue.parent
    if where == base:
        return "." if given else None
    try:
        return str(where.relative_to(base))
    except ValueError:
        return str(where)


def fields_of(ns: argparse.Namespace, paths: QueuePaths, words: list[str]) -> dict[str, object]:
    fields: dict[str, object] = {}
    if ns.name:
        fields["name"] = ns.name
    fields["cmd"] = command_line(words)
    fields.update(option_fields(ns, paths))
    return fields


def option_fields(ns: argparse.Namespace, paths: QueuePaths) -> dict[str, object]:
    """The job keys the command line's options give (all but the name and the command)."""
    fields: dict[str, object] = {}
    for key in ("gpus", "mem", "priority", "retries", "timeout"):
        value = getattr(ns, key, None)
        if value is not None:
            fields[key] = value
    if ns.after:
        fields["after"] = [a.strip() for a in ns.after.split(",") if a.strip()]
    cwd = job_cwd(paths, ns.cwd)
    if cwd is not None:
        fields["cwd"] = cwd
    return fields


def current_pool(
    paths: QueuePaths, opts: GlobalOptions, reader: QueueReader | None = None
) -> list[int | None] | None:
    """The usable GPUs' totals, as `gtui validate` reads them, so that a job no GPU can take is
    refused now rather than written into the file (where it would stop the next `gtui run`).
    ``reader``: the command's, whose parse the write that follows reuses."""
    from gtui.commands.validate import read_machine
    from gtui.core.queue.queuefile import load_queue, pool_from_machine

    settings = load_queue(paths.queue, reader=reader).settings
    machine, _ = read_machine(
        opts.fake_gpus or settings.fake_gpus, paths.queue.parent, settings.gpus
    )
    return pool_from_machine(settings, machine) if machine else None


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    # Only what a running scheduler needs is imported before it is asked (see control/rpc).
    paths = queue_file(ns.queue)
    if getattr(ns, "from_file", None) is not None:
        from gtui.commands.addfrom import add_from

        return add_from(ns, opts, paths)
    fields = fields_of(ns, paths, list(ns.cmd or []))
    # A running scheduler holds the file's jobs already: it checks and appends the new one
    # without anything here reading the file (100,000 jobs: 13.9 s the other way).
    added = ask(paths, Add(fields), timeout=30.0)
    if added is not None:
        print(f"added {added.name or fields.get('name', 'the job')} to {paths.queue.name}")
        return 0
    from gtui.core.queue.queuefile import QueueReader
    from gtui.core.queue.writeback import append_job

    reader = QueueReader()
    pool = current_pool(paths, opts, reader)
    name = append_job(paths.queue, fields, pool=pool, reader=reader)
    shown = name if isinstance(name, str) and name else fields.get("name", "the job")
    print(f"added {shown} to {paths.queue.name}")
    try:
        reloaded = send(paths, Reload(), timeout=30.0)
    except GtuiError as e:
        print(f"(the scheduler did not take it yet: {e}; it will within one poll)", file=sys.stderr)
        return 0
    if reloaded is None:
        print(
            f"(no scheduler runs {paths.queue.name}: the job starts when one does)", file=sys.stderr
        )
    elif isinstance(reloaded, Refused):
        print(f"(the scheduler says: {reloaded.error})", file=sys.stderr)
    return 0
