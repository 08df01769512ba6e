"""``gtui quarantine QUEUE.toml [--clear GPU,... | --clear all]``: the GPUs taken out of
placement after a hardware fault, and giving them back.

A job that fails with the diagnosis ``gpu_fault`` (an uncorrectable ECC error, an Xid, a GPU
fallen off the bus) quarantines the GPU it names, or its own, and so does the health watch when
a GPU's own health reads a fault: no new job starts there until a person clears it, here or in
the dashboard (or ``health_recheck`` finds it clean again). Listing works with or without a
scheduler; clearing goes to the running scheduler, else to the saved state.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.control.client import perform
from gtui.core.control.protocol import ClearQuarantine, Status
from gtui.core.errors import GtuiError


def _gpus(text: str) -> list[int] | None:
    if text.strip().lower() == "all":
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise GtuiError(f"--clear {text}: give GPU indices (0,2) or all") from None


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    if ns.clear is not None:
        gpus = _gpus(ns.clear)
        reply, live = asyncio.run(
            perform(paths, ClearQuarantine(None if gpus is None else tuple(gpus)))
        )
        cleared = reply.cleared
        if not cleared:
            print("no such GPU is quarantined")
            return 0
        where = "" if live else " (no scheduler runs: it applies when one starts)"
        print(f"GPU {','.join(map(str, cleared))} back in placement{where}")
        return 0
    status = asyncio.run(perform(paths, Status()))[0].status
    quarantined = status.get("quarantined") or {}
    if not quarantined:
        print(f"no GPU of {paths.queue.name} is quarantined")
        return 0
    for gpu, why in sorted(quarantined.items(), key=lambda kv: int(kv[0])):
        since = why.get("since")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(since)) if since else "?"
        print(f"GPU {gpu}: since {when}, after {why.get('job', '?')}: {why.get('why', '')}")
    print(f"(give one back: gtui quarantine {paths.queue.name} --clear GPU)")
    return 0
