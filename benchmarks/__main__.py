"""``python -m benchmarks [--quick] [--out FILE] [--only NAME,...]``: run the suite, print the
table, write docs/benchmarks.md (the machine, the method and every figure).

A target that is missed is a figure, not an error: the exit status is 0 unless a benchmark
crashed (then 1, with the error in the table), so CI can run ``--quick`` to check the suite
still works without asserting timings on a shared machine.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path

from benchmarks.common import Row, Section, machine

REPO = Path(__file__).resolve().parent.parent
SUITE = [
    "end_to_start",
    "throughput",
    "peers",  # gtui beside task-spooler, a bash loop, xargs -P and plain asyncio
    "extreme",
    "placement",
    "validate",
    "scale",  # 10,000 and 100,000 waiting jobs through the real command line
    "dashboard",
    "ui_latency",  # the dashboard in a real terminal (tmux); the dashboard engineer's
    "daily_use",  # filter typing and the detail view, 10,000 jobs
    "simulate",
    "forecast",  # progress from a log's tail, estimates at 100,000 jobs
    "usage",  # host memory walk and GPU holders' names, per poll
    "log_lines",  # a log's endless last line to a terminal: linear in its length
    "floor",  # per-job cost, throughput and submissions beside tsp and the fork+exec floor
]
FULL_ONLY = {"ui_latency"}  # keeps --quick under two minutes on 2 cores
NOTES = Path(__file__).with_name("OPTIMIZATIONS.md")
# The page the docs link to for every figure (docs/benchmarks.md), rewritten by a full run.
DEFAULT_OUT = REPO / "docs" / "benchmarks.md"


def run_one(name: str, quick: bool) -> Section:
    t0 = time.perf_counter()
    try:
        section: Section = importlib.import_module(f"benchmarks.{name}").run(quick)
    except Exception as e:
        section = Section(title=name, method="", error=f"{type(e).__name__}: {e}")
        section.figures["traceback"] = traceback.format_exc()
        section.rows = [Row(name, "", f"crashed: {type(e).__name__}: {e}", "", False)]
    section.seconds = time.perf_counter() - t0
    return section


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(sections: list[Section]) -> str:
    lines = [
        "| what | target | measured | baseline / comparison (same run) | met |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in sections:
        for r in s.rows:
            met = {True: "yes", False: "**no**", None: "-"}[r.met]
            if r.met is False and r.why:
                met += f": {r.why}"
            lines.append(
                f"| {_cell(r.what)} | {_cell(r.target)} | {_cell(r.measured)} | "
                f"{_cell(r.baseline)} | {met} |"
            )
    return "\n".join(lines)


def report(
    sections: list[Section], quick: bool, started: str, total_s: float, host: dict[str, str]
) -> str:
    out = [
        "# gtui benchmarks",
        "",
        f"Written by `python -m benchmarks{' --quick' if quick else ''}` on {started} "
        f"({total_s:.0f} s). Re-run it to refresh this file; `--quick` is the CI's smoke run "
        "(smaller counts, the same methods).",
        "",
        "## Machine",
        "",
        "| | |",
        "| --- | --- |",
        *(f"| {k} | {_cell(v)} |" for k, v in host.items()),
        "",
        "Timings on a shared 2-core machine are noisy: other engineers' tests ran at the same "
        "time. Each figure that depends on the machine's speed stands beside a baseline taken "
        "in the same run (plain asyncio subprocesses, a bare interpreter), and is a median "
        "over repeats, with the spread of the repeats in the figures below.",
        "",
        "## Summary",
        "",
        table(sections),
        "",
        "## Method and figures",
    ]
    for s in sections:
        out += ["", f"### {s.title}", "", s.method or "", ""]
        if s.error:
            out += [f"**Crashed**: `{s.error}`", "", "```", s.figures.get("traceback", ""), "```"]
            continue
        out += ["| figure | value |", "| --- | --- |"]
        out += [f"| {_cell(k)} | {_cell(v)} |" for k, v in s.figures.items()]
        out += ["", f"_{s.seconds:.1f} s_"]
    if NOTES.exists():
        out += ["", NOTES.read_text().strip()]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="smaller counts (CI; under 2 minutes)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write")
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(SUITE)}")
    ns = ap.parse_args(argv)
    names = [n.strip() for n in ns.only.split(",") if n.strip()] or [
        n for n in SUITE if not (ns.quick and n in FULL_ONLY)
    ]
    unknown = [n for n in names if n not in SUITE]
    if unknown:
        ap.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(SUITE)}")
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    host = machine()  # before the run: the load average others left
    t0 = time.perf_counter()
    sections = []
    for name in names:
        print(f"== {name}", flush=True)
        section = run_one(name, ns.quick)
        sections.append(section)
        for r in section.rows:
            print(f"   {r.what}: {r.measured}  [target {r.target or '-'}]", flush=True)
    total = time.perf_counter() - t0
    print()
    print(table(sections))
    ns.out.write_text(report(sections, ns.quick, started, total, host))
    print(f"\nwrote {ns.out} ({total:.0f} s)")
    return 1 if any(s.error for s in sections) else 0


if __name__ == "__main__":
    sys.exit(main())
