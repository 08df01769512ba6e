"""``gtui status QUEUE.toml [--json]``: as the running scheduler sees it, else from the store."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from gtui.cli import GlobalOptions
from gtui.core.api import JobView
from gtui.core.errors import GtuiError
from gtui.core.model import JobRecord, JobSpec
from gtui.core.paths import queue_paths
from gtui.core.queuefile import load_queue
from gtui.core.status import status_dict
from gtui.core.units import format_duration, format_mib


def status_from_store(queue: Path) -> dict[str, Any]:
    """What the last scheduler left: the queue file's jobs with their stored records."""
    from gtui.core.store import open_store_readonly

    paths = queue_paths(queue)
    qf = load_queue(paths.queue)
    store = open_store_readonly(paths.db)
    records: dict[str, JobRecord] = store.load() if store else {}
    paused = bool(store and store.get_meta("paused") == "1")
    gpus = json.loads(store.get_meta("gpus") or "[]") if store else []
    if store:
        store.close()
    views = []
    for i, spec in enumerate(qf.jobs):
        rec = records.get(spec.name) or JobRecord(name=spec.name, mem_mib=spec.mem_mib)
        views.append(JobView(spec=spec, record=rec, order=i))
    for name, rec in records.items():
        if rec.active and name not in {s.name for s in qf.jobs}:
            views.append(JobView(spec=JobSpec(name=name, cmd=""), record=rec, order=len(views)))
    return status_dict(paths.queue, paused, gpus, views)


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


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    status = get_status(ns.queue)
    if ns.json:
        print(json.dumps(status, indent=2))
        return 0
    print(f"{status['queue']}{'  (queue paused)' if status['paused'] else ''}")
    for g in status["gpus"]:
        used = format_mib(g["mem_used_mib"])
        total = format_mib(g["mem_total_mib"])
        util = "n/a" if g["util"] is None else f"{g['util']}%"
        print(f"  GPU {g['index']} {g['name']}: {used}/{total}, util {util}")
    width = max([len(j["name"]) for j in status["jobs"]] + [4])
    print(f"  {'name':<{width}}  {'state':<9}  {'gpu':<5}  {'mem':>6}  try  note")
    for j in status["jobs"]:
        gpus = ",".join(map(str, j["gpus"])) if j["gpus"] else "-"
        mem = format_mib(j["mem_mib"]) if j["mem_mib"] else "-"
        note = j["reason"]
        if j["diagnosis"]:
            note = f"{j['diagnosis']['kind']}: {j['diagnosis']['line']}"
        elif j["state"] in ("running", "suspended") and j["started_at"]:
            import time

            note = format_duration(time.time() - j["started_at"])
        row = f"{j['name']:<{width}}  {j['state']:<9}  {gpus:<5}  {mem:>6}  {j['attempt']:>3}"
        print(f"  {row}  {note}")
    return 0
