"""What every benchmark shares: result rows, statistics, the machine, stamped commands.

A benchmark module has ``run(quick: bool) -> Section``. A section holds the rows of the summary
table (what, target, measured, baseline, met?), every raw figure it took, and a paragraph on how
it measured them, so docs/benchmarks.md can say all of it.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Row:
    """One line of the summary table."""

    what: str
    target: str
    measured: str
    baseline: str = ""
    met: bool | None = None  # None: a figure without a target (for comparison only)
    # For a missed target: by how much, and where the time (or memory) goes, in a few words.
    why: str = ""


def missed_by(measured: float, bound: float, *, higher_is_better: bool = False) -> str:
    """How far a figure is from its bound, in words: "over by 48 %" / "short by 39 %"."""
    if bound <= 0 or measured <= 0:
        return ""
    if higher_is_better:
        return f"short by {max(0.0, 1 - measured / bound) * 100:.0f} %"
    return f"over by {max(0.0, measured / bound - 1) * 100:.0f} %"


@dataclass
class Section:
    """One benchmark's result."""

    title: str
    method: str
    rows: list[Row] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pct(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (nearest rank, so p99 of 500 values is the 5th largest)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(q * len(ordered) + 0.999999)))
    return ordered[rank - 1]


def spread(values: Sequence[float]) -> str:
    """``median (min-max)`` of repeated runs, to show the noise."""
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def machine() -> dict[str, str]:
    """What the figures were taken on: they mean little without it."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        mem_kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        )
        mem = f"{mem_kb / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        mem = "unknown"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "usable cores": str(len(os.sched_getaffinity(0))),
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "load average at start": load,
    }


def stamp_cmd(stamps: Path, body: str = "") -> str:
    """A job that writes the clock (ns) as its first and last act: ``s <ns>`` / ``e <ns>``."""
    middle = f"{body}; " if body else ""
    return f'echo "s $(date +%s%N)" >> {stamps}; {middle}echo "e $(date +%s%N)" >> {stamps}'


def read_stamps(stamps: Path) -> tuple[list[int], list[int]]:
    """The start and end stamps, in file order."""
    starts: list[int] = []
    ends: list[int] = []
    for line in stamps.read_text().splitlines():
        kind, _, value = line.partition(" ")
        (starts if kind == "s" else ends).append(int(value))
    return starts, ends


def toml_str(text: str) -> str:
    """A TOML basic string."""
    out = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + out.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + '"'


@contextmanager
def timer() -> Iterator[Callable[[], float]]:
    """``with timer() as elapsed: ...; elapsed()`` in seconds."""
    t0 = time.perf_counter()
    done: list[float] = []

    def elapsed() -> float:
        return (done[0] if done else time.perf_counter()) - t0

    try:
        yield elapsed
    finally:
        done.append(time.perf_counter())


def fmt_ms(value: float) -> str:
    return f"{value:.1f} ms" if value >= 10 else f"{value:.2f} ms"
