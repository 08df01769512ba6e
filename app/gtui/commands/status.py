"""``gtui status QUEUE.toml [--json] [--state S,...] [--watch]``: as the running scheduler sees
it, else from the store. ``--state`` keeps the jobs in those states (``waiting`` = queued + held,
``active`` = running + suspended, ``ended``, ``trouble`` = failed + killed + blocked +
unknown); ``--watch`` redraws it in place every ``--interval`` seconds, as ``watch(1)`` does."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

from gtui.commands._names import group_members
from gtui.commands.options import GlobalOptions
from gtui.core.control.client import TIMEOUT_S, perform
from gtui.core.control.protocol import Status
from gtui.core.control.rpc import NoAnswer, status_document
from gtui.core.errors import GtuiError
from gtui.core.gpus.snapshot import gpu_label
from gtui.core.paths import queue_paths
from gtui.core.sched.policy import format_wait
from gtui.core.sched.requeue import shown_word
from gtui.core.units import UnitError, format_duration, format_mib, parse_duration_s, plural

STATES = (
    "queued",
    "held",
    "running",
    "suspended",
    "done",
    "failed",
    "killed",
    "blocked",
    "unknown",
)
GROUPS = {
    "waiting": ("queued", "held"),
    "active": ("running", "suspended"),
    "ended": ("done", "failed", "killed", "blocked", "unknown"),
    "trouble": ("failed", "killed", "blocked", "unknown"),
}


def _with_estimate(note: str, j: dict[str, Any]) -> str:
    """``note`` with the job's progress and estimated finish or start, marked as estimates."""
    if j.get("progress") is None and j.get("eta_s") is None and j.get("starts_in_s") is None:
        return note
    from gtui.core.sched.eta import short_duration  # only when there is one to show

    extra = []
    if j.get("progress") is not None:
        extra.append(f"{j['progress'] * 100:.0f}% ({j.get('progress_text') or ''})")
    if j.get("eta_s") is not None:
        extra.append(f"ends in {short_duration(j['eta_s'])} (estimate)")
    if j.get("starts_in_s") is not None:
        extra.append(f"starts in {short_duration(j['starts_in_s'])} (estimate)")
    return " · ".join([p for p in (note, *extra) if p])


def parse_states(text: str) -> frozenset[str]:
    """``failed,waiting`` -> the states it names; GtuiError (exit 2) for a word that is none."""
    out: set[str] = set()
    for word in (w.strip().lower() for w in text.split(",")):
        if not word:
            continue
        if word in GROUPS:
            out.update(GROUPS[word])
        elif word in STATES:
            out.add(word)
        else:
            known = ", ".join([*STATES, *GROUPS])
            raise GtuiError(f"--state: {word!r} is no state; use {known}")
    if not out:
        raise GtuiError("--state: name at least one state, e.g. --state failed,waiting")
    return frozenset(out)


def get_status(queue: str) -> dict[str, Any]:
    """From the running scheduler if one answers, else from the store (the one client API)."""
    paths = queue_paths(queue)
    if not paths.queue.exists():
        raise GtuiError(f"{queue}: no such queue file")
    return asyncio.run(perform(paths, Status()))[0].status


def _scheduler_line(sched: dict[str, Any]) -> str:
    def when(t: float | None) -> str:
        if t is None:
            return "?"
        return f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(t))} ({_ago(t)} ago)"

    if sched.get("not_answering"):
        why = str(sched["not_answering"])
        return f"{why[:1].upper()}{why[1:]}; the saved state is shown"
    if sched.get("running"):
        return f"scheduler: running, pid {sched.get('pid')}, since {when(sched.get('since'))}"
    if sched.get("pid") is None:
        return "scheduler: none has run this queue yet (start one with `gtui` or `gtui run`)"
    stopped = sched.get("stopped")
    last = f"the last one, pid {sched['pid']}" + (
        f", stopped {when(stopped)}" if stopped else ", did not stop cleanly"
    )
    return f"scheduler: not running ({last}); the saved state is shown"


def _start_hint(status: dict[str, Any]) -> str | None:
    """With no scheduler, jobs waiting to start (or running, whose ends nobody records): how to
    start one."""
    sched = status.get("scheduler") or {}
    if sched.get("running") or sched.get("pid") is None:
        return None  # one runs, or none ever ran (the scheduler's line says how to start one)
    states = {j["state"] for j in status["jobs"]}
    waiting = "queued" in states and not status.get("paused")
    if not waiting and not states & {"running", "suspended"}:
        return None
    q = Path(status["queue"]).name
    return f"no scheduler runs: `gtui run {q}` (or `gtui {q}`) starts one"


def _ago(t: float) -> str:
    return format_wait(time.time() - t)


def _quarantine_lines(status: dict[str, Any], index: int) -> list[str]:
    """A quarantined GPU's why, under its line (the health watch's words say it plainly)."""
    entry = (status.get("quarantined") or {}).get(str(index))
    if not isinstance(entry, dict):
        return []
    return [f"    QUARANTINED: {entry.get('why', '')}"]


def render(status: dict[str, Any], states: frozenset[str] | None = None) -> list[str]:
    """The human-readable status, line by line."""
    out: list[str] = []
    out.append(f"{status['queue']}{'  (queue paused)' if status['paused'] else ''}")
    out.append(_scheduler_line(status.get("scheduler") or {}))
    hint = _start_hint(status)
    if hint:
        out.append(hint)
    for problem in status.get("problems") or []:
        out.append(f"problem: {problem}")
    for g in status["gpus"]:
        used = format_mib(g["mem_used_mib"])
        total = format_mib(g["mem_total_mib"])
        util = "n/a" if g["util"] is None else f"{g['util']}%"
        label = gpu_label(g["index"], g.get("node"))  # node2:3 on a Ray cluster
        out.append(f"  GPU {label} {g['name']}: {used}/{total}, util {util}")
        out.extend(_quarantine_lines(status, g["index"]))
    rows = []
    jobs = status["jobs"]
    if states is not None:
        shown = [j for j in jobs if j["state"] in states]
        # "0 of 1 job in state failed", "2 of 7 jobs in state failed, held, queued": no verb
        # to agree with a count (it read "0 of 1 jobs are failed").
        total = plural(len(jobs), "job")
        out.append(f"  {len(shown)} of {total} in state {', '.join(sorted(states))}")
        jobs = shown
    for j in jobs:
        gpus = ",".join(gpu_label(g, j.get("node")) for g in j["gpus"]) if j["gpus"] else "-"
        mem = format_mib(j["mem_mib"]) if j["mem_mib"] else "-"
        note = j["reason"]
        if note and j.get("reason_at"):
            note += f" ({_ago(j['reason_at'])} ago)"
        if j["diagnosis"]:
            note = f"{j['diagnosis']['kind']}: {j['diagnosis']['line']}"
        elif j["state"] in ("running", "suspended") and j["started_at"]:
            note = format_duration(time.time() - j["started_at"])
            if j.get("preempting_for"):
                note += f"; stopping: preempted by {j['preempting_for']}"
        note = _with_estimate(note, j)  # progress, ETA, start
        note = "; ".join([note, *j["warnings"]]) if j["warnings"] else note
        # a queued job stopped through no fault of its own shows why: preempted, interrupted
        state = shown_word(j["state"], j.get("requeued_as"))
        rows.append((j["name"], state, gpus, mem, str(j["attempt"]), note))
    width = max([len(r[0]) for r in rows] + [4])
    gw = max([len(r[2]) for r in rows] + [3])
    out.append(f"  {'name':<{width}}  {'state':<9}  {'gpu':<{gw}}  {'mem':>6}  try  note")
    for name, state, gpus, mem, attempt, note in rows:
        row = f"{name:<{width}}  {state:<9}  {gpus:<{gw}}  {mem:>6}  {attempt:>3}  {note}"
        out.append(f"  {row}".rstrip())
    return out


def filtered(status: dict[str, Any], states: frozenset[str] | None) -> dict[str, Any]:
    if states is None:
        return status
    return {**status, "jobs": [j for j in status["jobs"] if j["state"] in states]}


def of_group(status: dict[str, Any], members: frozenset[str] | None) -> dict[str, Any]:
    """``status`` with only the jobs of one group (``--group``; None: every job)."""
    if members is None:
        return status
    return {**status, "jobs": [j for j in status["jobs"] if j["name"] in members]}


def _members(ns: argparse.Namespace) -> frozenset[str] | None:
    group = getattr(ns, "group", None)
    return None if not group else group_members(queue_paths(ns.queue), group)


def watch(ns: argparse.Namespace, states: frozenset[str] | None) -> int:
    """Redraw in place until interrupted (``watch(1)``): to a terminal, from its top left,
    each line cut to the width and the whole to the height; piped, one status after another
    (``--json``: one document a line)."""
    try:
        interval = max(parse_duration_s(ns.interval), 0.1)
    except UnitError as e:
        raise GtuiError(f"--interval: {e}") from None
    tty = sys.stdout.isatty()
    if tty:
        sys.stdout.write("\x1b[2J\x1b[?25l")  # a clear screen, no cursor blinking over it
    # Ctrl-C must end it wherever it lands. Under the default handler, asyncio.run (inside
    # get_status) takes SIGINT over, and one that arrives as its work finishes is lost: the
    # loop redrew on (seen under load in tests/commands/test_cli_events.py).
    interrupted = False

    def on_interrupt(signum: int, frame: object) -> None:
        nonlocal interrupted
        interrupted = True
        raise KeyboardInterrupt

    members = _members(ns)
    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        while not interrupted:
            status = of_group(get_status(ns.queue), members)
            lines = [json.dumps(filtered(status, states))] if ns.json else render(status, states)
            head = f"every {interval:g}s: gtui status {ns.queue}"
            stamp = time.strftime("%H:%M:%S")
            if tty:
                cols, rows = shutil.get_terminal_size()
                pad = max(1, cols - len(head) - len(stamp))
                lines = [head + " " * pad + stamp, "", *lines][: max(1, rows - 1)]
                body = "".join(f"{line[:cols]}\x1b[K\n" for line in lines)
                sys.stdout.write("\x1b[H" + body + "\x1b[J")
                sys.stdout.flush()
            elif ns.json:
                print(lines[0], flush=True)  # one document a line, for a reader to take
            else:
                print("\n".join([f"{head}    {stamp}", "", *lines, ""]), flush=True)
            time.sleep(interval)
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGINT, previous)
        if tty:
            sys.stdout.write("\x1b[?25h")
            sys.stdout.flush()
    return 0


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    states = parse_states(ns.state) if ns.state else None
    if ns.watch:
        return watch(ns, states)
    # A short-lived command that reads 100,000 jobs' dicts: the garbage collector's full passes
    # over them find nothing and took a third of its time.
    gc.disable()
    members = _members(ns)
    if ns.json and states is None and members is None and not sys.stdout.isatty():
        # Into a pipe, the running scheduler's document goes through as it came, not decoded
        # and encoded again (at 100,000 jobs, 45 MiB: most of the client's time).
        paths = queue_paths(ns.queue)
        if not paths.queue.exists():
            raise GtuiError(f"{ns.queue}: no such queue file")
        try:
            doc = status_document(paths, timeout=TIMEOUT_S)
        except NoAnswer:
            doc = None  # stopped, or too busy: the saved state below says so
        if doc is not None:
            out = sys.stdout.buffer
            out.write(doc)
            out.write(b"\n")
            out.flush()
            return 0
    status = of_group(get_status(ns.queue), members)
    why = (status.get("scheduler") or {}).get("not_answering")
    if ns.json and why:
        print(f"gtui status: {why}; the saved state is shown", file=sys.stderr)
    if ns.json:
        # Indented for a person; compact into a pipe, where 100,000 jobs' indentation is
        # megabytes and most of the time.
        print(json.dumps(filtered(status, states), indent=2 if sys.stdout.isatty() else None))
        return 0
    for line in render(status, states):
        print(line)
    return 0
