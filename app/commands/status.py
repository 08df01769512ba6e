"""``gtui status QUEUE.toml [--json]``: as the running scheduler sees it, else from the store."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from gtui.cli import GlobalOptions
from gtui.core.api import JobView
from gtui.core.errors import GtuiError
from gtui.core.model import JobRecord, JobSpec
from gtui.core.paths import queue_paths
from gtui.core.policy import format_wait
from gtui.core.queuefile import load_queue
from gtui.core.status import settled, status_dict
from gtui.core.units import format_duration, format_mib


def status_from_store(queue: Path) -> dict[str, Any]:
    """What the last scheduler left: the queue file's jobs with their stored records, each as
    it really stands (a job recorded as running whose process ended is shown ended)."""
    from gtui.core.lock import QueueLock
    from gtui.core.store import open_store_readonly

    paths = queue_paths(queue)
    qf = load_queue(paths.queue)
    store = open_store_readonly(paths.db)
    records: dict[str, JobRecord] = store.load() if store else {}
    meta = {
        k: (store.get_meta(k) if store else None)
        for k in ("paused", "gpus", "scheduler_pid", "scheduler_since", "scheduler_stopped")
    }
    if store:
        store.close()
    holder = QueueLock(paths).holder()
    scheduler: dict[str, Any] = {
        "running": bool(holder),
        "pid": holder or _number(meta["scheduler_pid"], int),
        "since": _number(meta["scheduler_since"], float),
        "stopped": None if holder else _number(meta["scheduler_stopped"], float),
    }
    views = []
    for i, spec in enumerate(qf.jobs):
        rec = records.get(spec.name) or JobRecord(name=spec.name, mem_mib=spec.mem_mib)
        views.append(JobView(spec=spec, record=rec if holder else settled(rec), order=i))
    in_file = {s.name for s in qf.jobs}
    for name, rec in records.items():
        if rec.active and name not in in_file:
            shown = rec if holder else settled(rec)
            views.append(JobView(spec=JobSpec(name=name, cmd=""), record=shown, order=len(views)))
    gpus = json.loads(meta["gpus"] or "[]")
    return status_dict(paths.queue, meta["paused"] == "1", gpus, views, scheduler)


def _number(text: str | None, kind: type[int] | type[float]) -> Any:
    try:
        return kind(text) if text else None
    except ValueError:
        return None


def get_status(queue: str) -> dict[str, Any]:
    paths = queue_paths(queue)
    if not paths.queue.exists():
        raise GtuiError(f"{queue}: no such queue file")
    from gtui.core.control import request

    reply = request(paths.queue, "status")
    if reply and reply.get("ok") and isinstance(reply.get("status"), dict):
        result: dict[str, Any] = reply["status"]
        return result
    return status_from_store(paths.queue)


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
