"""Neighbours' claims of host cores and memory (the ``host`` list of a claims file, see
gtui.core.gpus.claims): which count, and for how much.

The same trust as a GPU claim: one counts only while its process lives (pid and start time)
and belongs to the claim's user; one asking more than the host has is ignored with a note. Its
memory counts as ours does: ``max(0, ram - used)``, where ``used`` is the resident memory of
its process tree now.
"""

from __future__ import annotations

from collections.abc import Sequence

import psutil

from gtui.core.gpus.claims import HOST_KEY, START_TOLERANCE_S, Claim, process_state, user_name
from gtui.core.gpus.snapshot import HostHolder, HostInfo
from gtui.core.procstat import boot_time
from gtui.core.units import format_mib


def judge_host(claims: Sequence[Claim], host: HostInfo) -> tuple[list[HostHolder], list[str]]:
    """The host claims among ``claims`` that count (as placement takes them), and a note on
    each one ignored."""
    out: list[HostHolder] = []
    notes: list[str] = []
    mine = [c for c in claims if c.gpu == HOST_KEY]
    boot = boot_time() if mine else None
    for c in mine:
        state, started, owner = process_state(c.pid, boot)
        if state == "gone" or (started is not None and abs(started - c.start) > START_TOLERANCE_S):
            continue  # ended: counts for nothing
        what = f"{c.user}'s {c.job} claims {c.cpus} cores and {format_mib(c.mem_mib)} RAM"
        if owner is not None and owner != c.uid:
            notes.append(f"{what}: ignored, its process {c.pid} belongs to {user_name(owner)}")
            continue
        if c.cpus > host.cores or c.mem_mib > host.ram_total_mib:
            notes.append(f"{what}: ignored, more than the host has")
            continue
        out.append(HostHolder(f"{c.user}'s {c.job}", c.cpus, c.mem_mib, _tree_rss_mib(c.pid)))
    return out, notes


def _tree_rss_mib(pid: int) -> int:
    """The resident memory of ``pid`` and its descendants now (0 where it cannot be read)."""
    try:
        root = psutil.Process(pid)
        total = 0
        for p in [root, *root.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                continue
    except psutil.Error:
        return 0
    return total // (1024 * 1024)
