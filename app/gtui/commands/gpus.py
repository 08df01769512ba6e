"""``gtui gpus [--json]``: the GPUs, their memory, utilization and processes (gflow's ginfo), who
holds each GPU's memory (user, command, running time, stale or not), and the claims
every user's gtui schedulers publish on them: what each running job was promised and
has not allocated yet, and whether placement counts it.

A GPU is read once here, so how long it has idled is not known from this reading alone: where
a gtui scheduler of any user polls it and says on the claims board since when it has read 0 %
(gtui.core.gpus.claims, ``published_idle``), a GPU at 0 % now is taken as idle since the oldest
such moment, and its holders are judged stale on it."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from gtui.commands.options import GlobalOptions
from gtui.core.errors import GtuiError
from gtui.core.gpus.backend import open_backend
from gtui.core.gpus.claims import ClaimBoard, Judged, gpu_keys, judge, published_idle
from gtui.core.gpus.health import HARDWARE
from gtui.core.gpus.health import judge as judge_health
from gtui.core.gpus.holders import HolderReader, holder_notes, process_json, stale_reasons
from gtui.core.gpus.host import FAKE_HOST_ENV, read_host
from gtui.core.gpus.snapshot import GpuBackend, GpuInfo, GpuProcess, GpuSnapshot
from gtui.core.units import format_duration, format_mib

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
    """The GPUs as aligned text lines (also usable by ``gtui status``). A POWER column (draw /
    limit) where any GPU reports its power."""
    power = any(g.power_w is not None for g in snapshot.gpus)
    headers = (*_HEADERS[:5], "POWER", _HEADERS[5]) if power else _HEADERS
    rows = [
        (
            g.label,  # node2:3 on a Ray cluster
            g.name,
            _memory(g),
            "n/a" if g.util is None else f"{g.util}%",
            "n/a" if g.temperature is None else f"{g.temperature}°C",
            *((_power(g),) if power else ()),
            _processes(g),
        )
        for g in snapshot.gpus
    ]
    last = len(headers) - 1
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(last)]
    lines = []
    for row in [headers, *rows]:
        cells = [row[i].ljust(widths[i]) if i else row[i].rjust(widths[i]) for i in range(last)]
        lines.append("  ".join([*cells, row[last]]).rstrip())
    notes = [f"  GPU {g.index}: {g.error}" for g in snapshot.gpus if g.error and not g.lost]
    return lines + notes + health_lines(snapshot)


def _power(g: GpuInfo) -> str:
    """``212 W / 400 W``, ``212 W``, or ``n/a``."""
    if g.power_w is None:
        return "n/a"
    limit = f" / {g.power_limit_w:.0f} W" if g.power_limit_w else ""
    return f"{g.power_w:.0f} W{limit}"


def health_lines(snapshot: GpuSnapshot) -> list[str]:
    """What each GPU's health reads, where it says something: a fault plainly, notes after."""
    out = []
    for g in snapshot.gpus:
        verdict = judge_health(g.health)
        if verdict.fault:
            out.append(f"  GPU {g.label}: {verdict.fault}: {HARDWARE}")
        out.extend(f"  GPU {g.label}: {note}" for note in verdict.notes)
    return out


STALE_WORDS = "stale: zombie, or idle at 0 % for 15 min, 5 min when its parent is gone"


def _stale_cell(g: GpuInfo, p: GpuProcess, now: float) -> str:
    """``idle at 0 % for 3 h``, ``-``, or ``- (parent gone)``: a parent gone on a working GPU
    is worth knowing, not a reason to call it stale."""
    stale = ", ".join(stale_reasons(g, p, now))
    notes = holder_notes(g, p, now)
    return stale or ("- (" + ", ".join(notes) + ")" if notes else "-")


def format_holders(snapshot: GpuSnapshot, now: float) -> list[str]:
    """Who holds each GPU, one line per process (none: no lines). A gtui job says which."""
    headers = ("GPU", "PID", "USER", "MEMORY", "RUNNING", "COMMAND", "STALE")
    rows = []
    for g in snapshot.gpus:
        for p in sorted(g.processes, key=lambda p: -(p.mem_mib or 0)):
            command = p.command or "?"
            if p.job:
                command = f"{command} (gtui job {p.job})"
            rows.append(
                (
                    g.label,
                    str(p.pid),
                    p.user or "?",
                    format_mib(p.mem_mib),
                    "?" if p.started is None else format_duration(now - p.started),
                    command,
                    _stale_cell(g, p, now),
                )
            )
    if not rows:
        return []
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers) - 1)]
    lines = ["", f"Holders: the processes on each GPU ({STALE_WORDS})"]
    for row in [headers, *rows]:
        cells = [row[i].ljust(widths[i]) for i in range(len(headers) - 1)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return lines


def read_claims(
    snapshot: GpuSnapshot, fake_file: Path | None
) -> tuple[list[Judged], list[str], dict[int, float]]:
    """Every user's claims on these GPUs, judged as a scheduler would; those whose process has
    ended are left out. The notes on what the board ignored. And, per GPU index, the oldest
    moment since which a live scheduler says the GPU has read 0 %."""
    keys = gpu_keys(snapshot, fake_file)
    if not keys:
        return [], [], {}
    read = ClaimBoard().read()
    now = time.time()
    judged = judge(read.claims, snapshot, keys, now=now)
    live = [j for j in judged if j.status != "ended"]
    live.sort(key=lambda j: (j.gpu, j.since, j.claim.user, j.claim.job))
    said = published_idle(read.idle, now)
    idle = {index: said[key] for index, key in keys.items() if key in said}
    return live, read.notes + [j.note for j in live if j.note], idle


def with_published_idle(snapshot: GpuSnapshot, idle: dict[int, float], now: float) -> GpuSnapshot:
    """``snapshot`` with each GPU at 0 % now idle since what a scheduler said, where that is
    earlier than what this reading knows (a GPU that works now is not idle, whatever was
    said)."""
    gpus = []
    for g in snapshot.gpus:
        said = idle.get(g.index)
        if said is not None and g.util == 0 and not g.lost and said < (g.idle_since or now):
            g = dataclasses.replace(g, idle_since=said)
        gpus.append(g)
    return dataclasses.replace(snapshot, gpus=tuple(gpus))


def format_claims(judged: list[Judged], notes: list[str], directory: Path) -> list[str]:
    """The claims as aligned text lines under the GPU table (none: no lines)."""
    if not judged and not notes:
        return []
    headers = ("GPU", "USER", "JOB", "DECLARED", "ALLOCATED", "SINCE", "COUNTS")
    rows = []
    for j in judged:
        c = j.claim
        counts = (
            format_mib(max(0, c.mem_mib - j.observed_mib))
            if j.status == "counted"
            else "nothing (ignored)"
        )
        rows.append(
            (
                str(j.gpu),
                c.user,
                c.job,
                format_mib(c.mem_mib),
                format_mib(j.observed_mib),
                time.strftime("%H:%M:%S", time.localtime(j.since)),
                counts,
            )
        )
    lines = [
        "",
        f"Claims ({directory}): memory gtui schedulers declared for running jobs; COUNTS is "
        "what placement holds back (declared - allocated)",
    ]
    if rows:
        widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers) - 1)]
        for row in [headers, *rows]:
            cells = [row[i].ljust(widths[i]) for i in range(len(headers) - 1)]
            lines.append("  ".join([*cells, row[-1]]).rstrip())
    lines += [f"  note: {n}" for n in notes]
    return lines


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    """Read the GPUs once and print them; no GPU is not an error (exit 0)."""
    if opts.backend == "ray":  # every node's GPUs, at $RAY_ADDRESS or "auto"
        from gtui.core.exec.ray import open_cluster

        address = os.environ.get("RAY_ADDRESS") or "auto"
        backend: GpuBackend = open_cluster(address, one_read=True)[1]
    else:
        backend = open_backend(opts.fake_gpus, Path.cwd())
    try:
        raw = backend.read()
    finally:
        backend.close()
    snapshot = HolderReader().describe(raw)
    now = time.time()
    judged: list[Judged] = []
    notes: list[str] = []
    idle: dict[int, float] = {}
    if opts.backend != "ray":  # claims are per machine: not read for a cluster
        judged, notes, idle = read_claims(snapshot, getattr(backend, "file", None))
        snapshot = with_published_idle(snapshot, idle, now)
    if ns.json:
        gpus = [g.to_json() for g in snapshot.gpus]
        for g, r, doc in zip(snapshot.gpus, raw.gpus, gpus, strict=True):
            doc["processes"] = [process_json(g, p, now) for p in g.processes]
            if g.idle_since is not None and (r.idle_since is not None or g.index in idle):
                doc["idle_since"] = g.idle_since  # known beyond this one reading
        for doc in gpus:  # a GPU with claims on it lists them (the shape is otherwise as before)
            mine = [j.to_json() for j in judged if j.gpu == doc["index"]]
            if mine:
                doc["claims"] = mine
        print(json.dumps(gpus, indent=2))
        for note in notes:
            print(f"gtui: claims: {note}", file=sys.stderr)
        if snapshot.error:
            print(f"gtui: {snapshot.error}", file=sys.stderr)
        return 0
    if snapshot.source == "fake":
        where = "Ray nodes" if opts.backend == "ray" else f"--fake-gpus {opts.fake_gpus}"
        print(f"SIMULATED GPUs ({where})")
    elif snapshot.driver:
        print(f"NVIDIA driver {snapshot.driver}")
    if snapshot.error:
        print(snapshot.error, file=sys.stderr if snapshot.gpus else sys.stdout)
    if snapshot.gpus:
        print("\n".join(format_table(snapshot) + format_holders(snapshot, now)))
        claims = format_claims(judged, notes, ClaimBoard().directory)
        if claims:
            print("\n".join(claims))
    if opts.backend != "ray":
        print(host_line())
    return 0


def host_line() -> str:
    """``Host: 16 cores, RAM 40G of 64G used``: this machine (or ``GTUI_FAKE_HOST``'s), what
    jobs' ``cpus`` and ``ram`` are counted against."""
    fake = os.environ.get(FAKE_HOST_ENV)
    try:
        host = read_host(fake)
    except (GtuiError, OSError) as e:
        return f"Host: not read ({e})"
    what = f" (simulated, {FAKE_HOST_ENV})" if host.source == "fake" else ""
    used, total = format_mib(host.ram_used_mib), format_mib(host.ram_total_mib)
    return f"Host{what}: {host.cores} cores, RAM {used} of {total} used"
