"""``gtui edit QUEUE.toml JOB``: the job's ``[[jobs]]`` table in ``$EDITOR`` (then ``$VISUAL``,
then ``vi``); on save it is checked like the queue file and written back in its place, every
other byte of the file kept. A text that does not check is opened again with the error on top;
an empty one, or one saved unchanged, changes nothing. A running scheduler takes it at once
(a running job keeps the command it started with: the edit applies from its next attempt)."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from gtui.commands._edits import ACTIVE, Jobs, tell_scheduler
from gtui.commands.add import current_pool
from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.errors import GtuiError, QueueFileError
from gtui.core.exec.runner import safe_name
from gtui.core.queue.reader import QueueReader
from gtui.core.queue.writeback import JobText, job_text, replace_job_text

MARK = "# gtui: "  # the lines gtui puts on top of the text; taken off again on save


def editor_command() -> list[str]:
    raw = os.environ.get("EDITOR") or os.environ.get("VISUAL") or "vi"
    try:
        words = shlex.split(raw)
    except ValueError:
        words = [raw]
    return words or ["vi"]


def strip_header(text: str) -> str:
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].startswith(MARK.rstrip()):
        i += 1
    return "".join(lines[i:])


def header(name: str, q: str, orig: JobText, state: str, error: str | None) -> list[str]:
    out = []
    if error:
        out += [f"error: {line}" for line in error.splitlines()]
        out.append("fix it and save, or empty the file (or quit unchanged) to give up")
    at = orig.line + next(
        (i for i, line in enumerate(orig.text.splitlines()) if line.lstrip().startswith("[[")), 0
    )
    out.append(f"{name} in {q}, line {at}: save and quit to apply; empty the file to cancel")
    if len(orig.siblings) > 1:
        n = len(orig.siblings)
        shown = ", ".join(orig.siblings[:4]) + (" ..." if n > 4 else "")
        out.append(f"this table is a matrix entry of {n} jobs ({shown}): the edit applies to all")
    if state in ACTIVE:
        out.append(f"{name} is {state}: it keeps its command; the edit applies from its next try")
    return [MARK + line + "\n" for line in out]


def error_text(e: QueueFileError, orig: JobText, new: str, top: int) -> str:
    """The error, with its line counted in the editor's text when it falls in the table."""
    line = e.line
    lines_in_table = new.count("\n") + 1
    if line is not None and orig.line <= line < orig.line + lines_in_table:
        where = f"line {line - orig.line + 1 + top}"
    elif line is not None:
        where = f"{Path(e.path).name}:{line} (outside this table)"
    else:
        where = Path(e.path).name
    return f"{where}: {e.key + ': ' if e.key else ''}{e.detail}"


def run_editor(path: Path) -> int:
    cmd = [*editor_command(), str(path)]
    try:
        return subprocess.run(cmd).returncode
    except OSError as e:
        raise GtuiError(
            f"cannot start the editor {cmd[0]!r}: {e.strerror or e}; set $EDITOR"
        ) from None


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    q = paths.queue.name
    jobs = Jobs(paths)
    name = jobs.names.one(ns.job, table=True)
    reader = QueueReader()  # the file's parse, for the checks of the same text that follow
    orig = job_text(paths.queue, name, reader=reader)
    text, error = orig.text, None
    with tempfile.TemporaryDirectory(prefix="gtui-edit-") as tmp:
        path = Path(tmp) / f"{safe_name(name)}.toml"
        while True:
            top = header(name, q, orig, jobs.state(name), error)
            path.write_text("".join(top) + text)
            code = run_editor(path)
            if code != 0:
                print(f"the editor exited with status {code}: {q} was not changed", file=sys.stderr)
                return 1
            new = strip_header(path.read_text())
            if not new.strip():
                print(f"the text was emptied: {q} was not changed")
                return 0
            if new == text:
                if error is None:
                    print(f"no change to {name}")
                    return 0
                print(f"saved unchanged with the error: {q} was not changed", file=sys.stderr)
                return 1
            try:
                pool = current_pool(paths, opts, reader)
                replace_job_text(paths.queue, name, orig, new, pool=pool, reader=reader)
            except QueueFileError as e:
                error = error_text(e, orig, new, len(header(name, q, orig, jobs.state(name), "x")))
                text = new
                continue
            except GtuiError:
                kept = paths.queue.with_name(f".{paths.queue.name}.{safe_name(name)}.edit")
                kept.write_text(new)
                print(f"your text is kept in {kept}", file=sys.stderr)
                raise
            break
    tell_scheduler(paths)
    print(f"edited {name} in {q}")
    return 0
