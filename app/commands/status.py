"""``gtui status QUEUE.toml [--json]``: as the running scheduler sees it, else from the store."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from gtui.commands.options import GlobalOptions
from gtui.core.control.client import perform
from gtui.core.errors import GtuiError
from gtui.core.paths import queue_paths
from gtui.core.sched.policy import format_wait
from gtui.core.units import format_duration, format_mib


def get_status(queue: str) -> dict[str, Any]:
    """From the running scheduler if one answers, else from the store (the one client API)."""
    paths = queue_paths(queue)
    if not paths.queue.exists():
        raise GtuiError(f"{queue}: no such queue file")
    status, _live = asyncio.run(perform(paths, "status"))
    result: dict[str, Any] = status
    return result


def _scheduler_line(sched: dict[str, Any]) -> str:
    def when(t: float | None) -> str:
        if t is None:
            return "?"
        return f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(t))} ({_ago(t)} ago)"

    if sched.get("running"):
        return f"scheduler: running, pid {sched.get('pid')}, since {when(sched.get('since'))}"
    if sched.get("pid") is None:
        return "scheduler: none has run this queue yet (start one with `gtui` or `gtui run`)"
    stopped = sched.get("stopped")
    last = f"the last one, pid {sched['pid']}" + (
        f", stopped {when(stopped)}" if stopped else ", did not stop cleanly"
    )
    return f"scheduler: not running ({last}); the saved state is shown"


def _ago(t: float) -> str:
    return format_wait(time.time() - t)


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    status = get_status(ns.queue)
    if ns.json:
        print(json.dumps(status, indent=2))
        return 0
    print(f"{status['queue']}{'  (queue paused)' if status['paused'] else ''}")
    print(_scheduler_line(status.get("scheduler") or {}))
    for problem in status.get("problems") or []:
        print(f"problem: {problem}")
    for g in status["gpus"]:
        used = format_mib(g["mem_used_mib"])
        total = format_mib(g["mem_total_mib"])
        util = "n/a" if g["util"] is None else f"{g['util']}%"
        print(f"  GPU {g['index']} {g['name']}: {used}/{total}, util {util}")
    rows = []
    for j in status["jobs"]:
        gpus = ",".join(map(str, j["gpus"])) if j["gpus"] else "-"
        mem = format_mib(j["mem_mib"]) if j["mem_mib"] else "-"
        note = j["reason"]
        if note and j.get("reason_at"):
            note += f" ({_ago(j['reason_at'])} ago)"
        if j["diagnosis"]:
            note = f"{j['diagnosis']['kind']}: {j['diagnosis']['line']}"
        elif j["state"] in ("running", "suspended") and j["started_at"]:
            note = format_duration(time.time() - j["started_at"])
        note = "; ".join([note, *j["warnings"]]) if j["warnings"] else note
        rows.append((j["name"], j["state"], gpus, mem, str(j["attempt"]), note))
    width = max([len(r[0]) for r in rows] + [4])
    gw = max([len(r[2]) for r in rows] + [3])
    print(f"  {'name':<{width}}  {'state':<9}  {'gpu':<{gw}}  {'mem':>6}  try  note")
    for name, state, gpus, mem, attempt, note in rows:
        row = f"{name:<{width}}  {state:<9}  {gpus:<{gw}}  {mem:>6}  {attempt:>3}  {note}"
        print(f"  {row}".rstrip())
    return 0
