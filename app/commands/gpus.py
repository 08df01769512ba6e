"""``gtui gpus [--json]``: the GPUs, their memory, utilization and processes (gflow's ginfo)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gtui.commands.options import GlobalOptions
from gtui.core.gpus.backend import open_backend
from gtui.core.gpus.snapshot import GpuInfo, GpuSnapshot
from gtui.core.units import format_mib

_HEADERS = ("GPU", "NAME", "MEMORY", "UTIL", "TEMP", "PROCESSES")
MAX_PROCESSES_SHOWN = 6


def _memory(g: GpuInfo) -> str:
    if g.mem_total_mib is None:
        return "n/a"
    used = format_mib(g.mem_used_mib)
    pct = (
        f" ({100 * g.mem_used_mib / g.mem_total_mib:.0f}%)"
        if g.mem_used_mib is not None and g.mem_total_mib
        else ""
    )
    return f"{used} / {format_mib(g.mem_total_mib)}{pct}"


def _processes(g: GpuInfo) -> str:
    if g.lost:
        return f"LOST: {g.error}" if g.error else "LOST"
    if not g.processes:
        return "-"
    shown = [f"{p.pid} ({format_mib(p.mem_mib)})" for p in g.processes[:MAX_PROCESSES_SHOWN]]
    more = len(g.processes) - MAX_PROCESSES_SHOWN
    return ", ".join(shown) + (f", +{more} more" if more > 0 else "")


def format_table(snapshot: GpuSnapshot) -> list[str]:
    """The GPUs as aligned text lines (also usable by ``gtui status``)."""
    rows = [
        (
            str(g.index),
            g.name,
            _memory(g),
            "n/a" if g.util is None else f"{g.util}%",
            "n/a" if g.temperature is None else f"{g.temperature}°C",
            _processes(g),
        )
        for g in snapshot.gpus
    ]
    widths = [max(len(r[i]) for r in [_HEADERS, *rows]) for i in range(len(_HEADERS) - 1)]
    lines = []
    for row in [_HEADERS, *rows]:
        cells = [row[i].ljust(widths[i]) if i else row[i].rjust(widths[i]) for i in range(5)]
        lines.append("  ".join([*cells, row[5]]).rstrip())
    notes = [f"  GPU {g.index}: {g.error}" for g in snapshot.gpus if g.error and not g.lost]
    return lines + notes


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    """Read the GPUs once and print them; no GPU is not an error (exit 0)."""
    backend = open_backend(opts.fake_gpus, Path.cwd())
    try:
        snapshot = backend.read()
    finally:
        backend.close()
    if ns.json:
        print(json.dumps([g.to_json() for g in snapshot.gpus], indent=2))
        if snapshot.error:
            print(f"gtui: {snapshot.error}", file=sys.stderr)
        return 0
    if snapshot.source == "fake":
        print(f"SIMULATED GPUs (--fake-gpus {opts.fake_gpus})")
    elif snapshot.driver:
        print(f"NVIDIA driver {snapshot.driver}")
    if snapshot.error:
        print(snapshot.error, file=sys.stderr if snapshot.gpus else sys.stdout)
    if snapshot.gpus:
        print("\n".join(format_table(snapshot)))
    return 0
