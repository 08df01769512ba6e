"""``gtui add QUEUE.toml [OPTIONS] -- CMD...`` into a running queue, with nothing imported but the
socket, JSON and the queue's paths: gtui.entry serves such a command line through :func:`quick`
before gtui.cli (argparse, every command's options and help) or the protocol's dataclasses are
imported, which were most of its time. What the job's keys are made of (the command, its cwd,
the options) is here for both ways in: gtui.commands.add takes every other add.
"""

from __future__ import annotations

import os
from pathlib import Path

from gtui.commands.options import queue_file
from gtui.core.errors import GtuiError

TYPE_CHECKING = False  # typing is not imported at run time: ``gtui add`` starts without it
if TYPE_CHECKING:
    import argparse

    from gtui.core.paths import QueuePaths

# The options `gtui add` takes (gtui.cli's add parser; a test holds the two to each other):
# each with whether argparse reads its value as a number.
OPTIONS = {
    "--name": False,
    "--gpus": True,
    "--mem": False,
    "--priority": True,
    "--after": False,
    "--retries": True,
    "--timeout": False,
    "--cwd": False,
}
ADD_OP = "add"  # the protocol's Add.op (a test holds the request here to the protocol's)
ONE_TIMEOUT_S = 30.0  # how long `gtui add` waits for the answer to one job


class AddLine:
    """``gtui add``'s command line as :func:`quick` reads it (the names argparse gives)."""

    def __init__(
        self, queue: str, cmd: list[str], texts: dict[str, str], numbers: dict[str, int]
    ) -> None:
        self.queue = queue
        self.cmd = cmd
        self.from_file: str | None = None
        self.name = texts.get("name")
        self.mem = texts.get("mem")
        self.after = texts.get("after")
        self.timeout = texts.get("timeout")
        self.cwd = texts.get("cwd")
        self.gpus = numbers.get("gpus")
        self.priority = numbers.get("priority")
        self.retries = numbers.get("retries")


def quick_line(argv: list[str]) -> AddLine | None:
    """``add QUEUE [--opt VALUE | --opt=VALUE]... -- CMD...`` read as argparse reads it; None
    for anything else (a global option, --from, --help, an abbreviation, a value that starts
    with ``-`` or is no number where one is needed, the command without ``--``): gtui.cli
    reads those, with argparse's messages."""
    if argv[:1] != ["add"] or "--" not in argv:
        return None
    cut = argv.index("--")
    words = argv[cut + 1 :]
    queue: str | None = None
    texts: dict[str, str] = {}
    numbers: dict[str, int] = {}
    args = argv[1:cut]
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-"):
            if queue is not None:
                return None
            queue = a
            i += 1
            continue
        opt, eq, value = a.partition("=")
        if opt not in OPTIONS:
            return None
        if not eq:
            if i + 1 >= len(args) or args[i + 1].startswith("-"):
                return None
            value = args[i + 1]
            i += 1
        i += 1
        if OPTIONS[opt]:
            try:
                numbers[opt[2:]] = int(value)
            except ValueError:
                return None
        else:
            texts[opt[2:]] = value
    if queue is None or not words:
        return None
    return AddLine(queue, words, texts, numbers)


def quick(argv: list[str]) -> int | None:
    """``gtui add`` into a running scheduler with nothing imported but the socket and the
    queue's paths; None when it did not serve the command line (not :func:`quick_line`'s
    shape, or no scheduler runs: nothing was sent) and gtui.cli takes it."""
    ns = quick_line(argv)
    if ns is None:
        return None
    paths = queue_file(ns.queue)
    fields = fields_of(ns, paths, ns.cmd)
    name = ask_add(paths, fields)
    if name is None:
        return None
    said_added(name, fields, paths)
    return 0


def ask_add(paths: QueuePaths, fields: dict[str, object]) -> str | None:
    """The protocol's ``Add(fields)`` sent to the running scheduler, as its codec would send
    it, without importing it: the name it gave the job ("" when it said none); None when no
    scheduler listens. Its refusal is raised, as :func:`gtui.core.control.rpc.ask` raises it.
    A running scheduler holds the file's jobs already: it checks and appends the new one
    without anything here reading the file (100,000 jobs: 13.9 s the other way)."""
    from gtui.core.control.transport import decode_reply, exchange_line, refusal_in

    line = exchange_line(paths, ADD_OP, {"fields": fields}, reads=False, timeout=ONE_TIMEOUT_S)
    if line is None:
        return None
    reply = decode_reply(line)
    refused = refusal_in(reply)
    if refused is not None:
        raise GtuiError(*refused)
    name = reply.get("name")
    return name if isinstance(name, str) else ""


def said_added(name: str, fields: dict[str, object], paths: QueuePaths) -> None:
    print(f"added {name or fields.get('name', 'the job')} to {paths.queue.name}")


def command_line(words: list[str]) -> str:
    if not words:
        raise GtuiError(
            "gtui add: no command; put it after --, e.g. gtui add q.toml -- python a.py"
        )
    if len(words) == 1:
        return words[0]
    import shlex

    return shlex.join(words)


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


def fields_of(
    ns: argparse.Namespace | AddLine, paths: QueuePaths, words: list[str]
) -> dict[str, object]:
    fields: dict[str, object] = {}
    if ns.name:
        fields["name"] = ns.name
    fields["cmd"] = command_line(words)
    fields.update(option_fields(ns, paths))
    return fields


def option_fields(ns: argparse.Namespace | AddLine, paths: QueuePaths) -> dict[str, object]:
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
