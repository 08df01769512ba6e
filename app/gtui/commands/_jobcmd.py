"""What ``gtui kill / pause / resume / retry`` share: one client API (gtui.core.control.client).

The running scheduler is asked through its control socket; with none, the same transitions run
on the saved state (gtui.core.control.offline) under the queue lock, with no scheduler built.

Names may be globs or a sweep's base name (gtui.commands._names). A job named exactly must be in
a state the verb applies to (else nothing is done, and the refusal names it); of the jobs a
pattern matched, those the verb applies to are acted on and the others are counted as skipped
(``gtui retry q.toml 'sweep-*'`` runs the failed ones again, not the done ones).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from gtui.commands._names import JobNames, is_pattern
from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.control.client import perform
from gtui.core.control.protocol import (
    Kill,
    Pause,
    PauseQueue,
    Request,
    Resume,
    ResumeQueue,
    Retry,
    Status,
)
from gtui.core.errors import GtuiError
from gtui.core.model import FINAL_STATES
from gtui.core.paths import QueuePaths
from gtui.core.units import plural

_DONE = {
    "kill": "killed {}",
    "pause": "paused {}",
    "resume": "resumed {}",
    "retry": "queued {} again",
}
# The states each verb applies to, for the jobs a pattern matched.
APPLIES = {
    "kill": frozenset({"queued", "held", "running", "suspended"}),
    "pause": frozenset({"queued", "running"}),
    "resume": frozenset({"held", "suspended"}),
    "retry": frozenset({"failed", "killed", "blocked", "unknown"}),
}
_KILLING = (
    "killing {}: SIGTERM sent, SIGKILL after kill_grace if it still runs "
    "(gtui kill --wait waits for the end)"
)


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
        whole: Request[Any] = PauseQueue() if verb == "pause" else ResumeQueue()
        _, live = asyncio.run(perform(paths, whole))
        return [f"{verb}d the queue"], live
    _, live = asyncio.run(perform(paths, _request(verb, tuple(names), wait)))
    if live and verb == "kill" and not wait:
        return [_KILLING.format(n) for n in names], True
    return [_DONE[verb].format(n) for n in names], live


def _request(verb: str, names: tuple[str, ...], wait: bool) -> Request[Any]:
    """The request of ``verb`` on ``names``."""
    if verb == "kill":
        return Kill(names, wait)
    return {"pause": Pause, "resume": Resume, "retry": Retry}[verb](names)


def resolve(paths: QueuePaths, verb: str, words: list[str]) -> list[str]:
    """The jobs ``words`` name (module docstring), in queue order."""
    status = asyncio.run(perform(paths, Status()))[0].status
    got = JobNames.of_status(paths, status).expand(words, strict=False)
    got.note()
    if not got.patterns:
        return got.names
    states = {str(j["name"]): str(j["state"]) for j in status["jobs"]}
    exact = set(words)
    names = [n for n in got.names if n in exact or states.get(n) in APPLIES[verb]]
    skipped = [n for n in got.names if n not in names]
    if skipped:
        by_state: dict[str, int] = {}
        for n in skipped:
            by_state[states.get(n, "?")] = by_state.get(states.get(n, "?"), 0) + 1
        counts = ", ".join(f"{k} {v}" for k, v in by_state.items())
        print(
            f"skipped {plural(len(skipped), 'job')} that {verb} does not apply to ({counts})",
            file=sys.stderr,
        )
    return names


def every_ended(paths: QueuePaths) -> list[str]:
    """``gtui retry --all``: every job that has ended, done ones too, in queue order."""
    status = asyncio.run(perform(paths, Status()))[0].status
    ended = {s.value for s in FINAL_STATES}
    return [str(j["name"]) for j in status["jobs"] if str(j["state"]) in ended]


def main(verb: str, ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    wait = bool(getattr(ns, "wait", True))
    words = list(dict.fromkeys(ns.names or []))  # a name given twice is acted on once
    if verb == "retry":
        if getattr(ns, "all", False):
            if words:
                raise GtuiError("give job names or --all, not both")
            words = every_ended(paths)
            if not words:
                print(f"no job of {paths.queue.name} has ended: nothing to run again")
                return 0
        elif not words:
            raise GtuiError(
                "name the jobs to run again (globs too: 'sweep-*'), or --all for every job "
                "that has ended, done ones too"
            )
    if words and not any(is_pattern(w) for w in words):
        # Names only: straight to the scheduler (no status of every job first). Every name is
        # checked before anything changes, so a word that is a sweep's base name is refused
        # with nothing done, and expanded below.
        try:
            lines, live = act(paths, verb, words, wait=wait)
        except GtuiError as first:
            names = resolve(paths, verb, words)
            if names == words:
                raise first from None
            lines, live = _act_on(paths, verb, names, wait)
    elif words:
        lines, live = _act_on(paths, verb, resolve(paths, verb, words), wait)
    else:
        lines, live = act(paths, verb, [], wait=wait)
    for line in lines:
        print(line)
    if not live:
        name = Path(ns.queue).name
        print(
            f"(no scheduler runs {name}: its saved state changed; it applies when one starts)",
            file=sys.stderr,
        )
    return 0


def _act_on(paths: QueuePaths, verb: str, names: list[str], wait: bool) -> tuple[list[str], bool]:
    if not names:
        return [f"nothing to {verb}"], True  # (nothing changed: no note about the saved state)
    return act(paths, verb, names, wait=wait)
