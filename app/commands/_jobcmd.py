"""What ``gtui kill / pause / resume / retry`` share: one client API (gtui.core.control.client).

The running scheduler is asked through its control socket; with none, the same transitions run
on the saved state (gtui.core.control.offline) under the queue lock, with no scheduler built.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import cast

from gtui.commands.options import GlobalOptions
from gtui.core.control.client import Op, perform
from gtui.core.errors import GtuiError
from gtui.core.paths import QueuePaths, queue_paths

_DONE = {
    "kill": "killed {}",
    "pause": "paused {}",
    "resume": "resumed {}",
    "retry": "queued {} again",
}
_KILLING = (
    "killing {}: SIGTERM sent, SIGKILL after kill_grace if it still runs "
    "(gtui kill --wait waits for the end)"
)


def queue_file(arg: str) -> QueuePaths:
    """The queue's paths; the file must exist (a typo should not act on nothing)."""
    paths = queue_paths(arg)
    if not paths.queue.is_file():
        raise GtuiError(f"{arg}: no such queue file; give the path of your queue.toml")
    return paths


def act(
    paths: QueuePaths, verb: str, names: list[str], *, wait: bool = True
) -> tuple[list[str], bool]:
    """Do ``verb`` on ``names`` (no names: the whole queue, for pause/resume) through the one
    client API: the running scheduler if one answers, else the saved state.

    ``wait=False`` (kill): the scheduler answers once SIGTERM is sent, and the grace and the
    SIGKILL go on there; a person should not stare at a blocked prompt for the whole grace.
    With no scheduler the kill always waits: this process is the one that sends the SIGKILL.
    Returns the lines to print and whether a scheduler did it (False: the saved state changed).
    """
    if not names:
        op = f"{verb}_queue"
        _, live = asyncio.run(perform(paths, cast(Op, op)))
        return [f"{verb}d the queue"], live
    kw: dict[str, object] = {"wait": False} if verb == "kill" and not wait else {}
    _, live = asyncio.run(perform(paths, cast(Op, verb), names, **kw))
    if live and verb == "kill" and not wait:
        return [_KILLING.format(n) for n in names], True
    return [_DONE[verb].format(n) for n in names], live


def main(verb: str, ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    names = list(dict.fromkeys(ns.names or []))  # a name given twice is acted on once
    lines, live = act(paths, verb, names, wait=bool(getattr(ns, "wait", True)))
    for line in lines:
        print(line)
    if not live:
        name = Path(ns.queue).name
        print(
            f"(no scheduler runs {name}: its saved state changed; it applies when one starts)",
            file=sys.stderr,
        )
    return 0
