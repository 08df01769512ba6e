"""What the fleet dashboard shows, as plain rows and text, computed from the hosts' states:
no textual here, so the layout's content is checked without a terminal."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from gtui.fleet.remote import HostState

BAR = 10


def bar(used: int, total: int, width: int = BAR) -> str:
    """A memory bar: ``#`` for each tenth used."""
    filled = round(width * used / total) if total else 0
    return "#" * filled + "." * (width - filled)


def gpu_rows(states: Sequence[HostState], now: float | None = None) -> list[tuple[str, ...]]:
    """One row a GPU, grouped by host; an unreachable host is one row that says so."""
    rows: list[tuple[str, ...]] = []
    for s in states:
        if not s.answered:
            rows.append((s.host.short, "-", s.status_line(now)[:60], "", ""))
            continue
        if not s.gpus:
            rows.append((s.host.short, "-", "no GPU seen", "", ""))
        for i, g in enumerate(s.gpus):
            used, total = int(g.get("mem_used_mib") or 0), int(g.get("mem_total_mib") or 0)
            rows.append(
                (
                    s.host.short if i == 0 else "",
                    str(g.get("index", i)),
                    f"{bar(used, total)} {used // 1024}/{total // 1024}G",
                    f"{g.get('util') or 0}%",
                    str(g.get("name") or ""),
                )
            )
    return rows


def job_rows(states: Sequence[HostState]) -> list[tuple[HostState, dict[str, Any]]]:
    """Every job of every host (an unreachable host's as last seen), host by host."""
    return [(s, j) for s in states for j in s.jobs]


def job_cells(state: HostState, job: dict[str, Any]) -> tuple[str, ...]:
    gpus = ",".join(str(g) for g in job.get("gpus") or []) or "-"
    name = str(job.get("name", "?"))
    stale = "" if state.answered else " (stale)"
    return (state.host.short, name, f"{job.get('state', '?')}{stale}", gpus)


def detail_text(state: HostState, job: dict[str, Any]) -> str:
    """The selected job: its fields, then its diagnosis when it has one."""
    lines = [f"host   {state.host.short}", f"queue  {state.host.queue}"]
    for key in ("name", "state", "attempt", "gpus", "exit_code", "signal", "reason", "log", "cmd"):
        value = job.get(key)
        if value not in (None, "", []):
            lines.append(f"{key:<6} {value}")
    d = job.get("diagnosis") or {}
    if d:
        lines.append(f"why    {d.get('kind', '')}: {d.get('line') or ''}".rstrip())
        if d.get("hint"):
            lines.append(f"hint   {d['hint']}")
    return "\n".join(lines)


def header_text(states: Sequence[HostState], now: float | None = None) -> str:
    """One line a host: its name and how it stands."""
    now = time.time() if now is None else now
    return "\n".join(f"{s.host.short:<12} {s.status_line(now)}  ({s.host.queue})" for s in states)
