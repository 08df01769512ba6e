"""``gtui report QUEUE.toml [--json]``: what a queue's jobs cost and what they waited for,
from the saved state and the attempts history: no scheduler needs to run, none is
asked. The figures and what they mean: gtui.core.state.report; the energy's:
gtui.core.state.energyreport."""

from __future__ import annotations

import argparse
import json
import sys
import time

from gtui.commands.options import GlobalOptions, queue_file
from gtui.core.errors import QueueFileError
from gtui.core.model import JobSpec, Settings
from gtui.core.queue.queuefile import load_queue
from gtui.core.state.energyreport import EnergyReport, energy_json, energy_lines, energy_report
from gtui.core.state.history import all_attempts
from gtui.core.state.report import Report, build, over_asked, to_json
from gtui.core.state.store import StoreError, open_store_readonly
from gtui.core.trackers import links_line
from gtui.core.units import format_mib

CHART_WIDTH = 60


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    paths = queue_file(ns.queue)
    specs: dict[str, JobSpec] = {}
    pool: tuple[int, ...] = ()
    settings = Settings()
    try:
        qf = load_queue(paths.queue)
        settings = qf.settings
        specs = {j.name: j for j in qf.jobs}
        if qf.settings.gpus != "all":  # a listed pool: its GPUs none of ours took count too
            pool = tuple(g for g in qf.settings.gpus if g not in qf.settings.exclude)
    except QueueFileError as e:  # the report stands on the saved state; say what is missing
        print(
            f"gtui: {e}\n(the report leaves out what only the file says: mem asked, after)",
            file=sys.stderr,
        )
    store = open_store_readonly(paths.db)
    records = {}
    if store is not None:
        try:
            with store:
                records = store.load()
        except StoreError as e:
            print(f"gtui: cannot read the saved state of {paths.queue.name}: {e}", file=sys.stderr)
            return 1
    history = all_attempts(paths.db)
    report = build(str(paths.queue), records, history, specs, time.time(), CHART_WIDTH, pool)
    energy = energy_report(history, settings.co2_g_per_kwh, settings.price_per_kwh)
    if ns.json:
        print(json.dumps(with_energy(to_json(report), energy), indent=2))
        return 0
    if not report.jobs or report.start is None:
        print(f"nothing to report for {paths.queue.name}: no job of it has run yet")
        return 0
    print(render(report, paths.queue.name))
    lines = energy_lines(energy)
    if lines:
        print("\n" + "\n".join(lines))
    return 0


def with_energy(doc: dict[str, object], energy: EnergyReport) -> dict[str, object]:
    """The report's document with its energy: each job's kWh beside its GPU-hours, and the
    ``energy`` block (the queue's kWh, CO2 and cost, each job's attempts)."""
    by_name = {j.name: j for j in energy.jobs}
    jobs = doc.get("jobs")
    if isinstance(jobs, list):
        for job in jobs:
            measured = by_name.get(job["name"])
            kwh = measured.kwh if measured is not None else None
            job["energy_kwh"] = None if kwh is None else round(kwh, 6)
    doc["energy"] = energy_json(energy)
    return doc


def hours(h: float) -> str:
    return f"{h:.3f}" if h < 0.1 else f"{h:.2f}" if h < 100 else f"{h:.0f}"


def span(seconds: float | None) -> str:
    """``3 h 05 min``, ``12 min``, ``40 s``: a wait or a run, for people."""
    if seconds is None:
        return "?"
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    m = s // 60
    return f"{m} min" if m < 60 else f"{m // 60} h {m % 60:02d} min"


def render(r: Report, name: str) -> str:
    """The text report: per job, the totals, failures, memory, and the GPUs' timeline."""
    assert r.start is not None
    day = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.start))
    out = [
        f"gtui report · {name} · {day} → {time.strftime('%H:%M', time.localtime(r.end))}"
        f" ({span(r.end - r.start)})",
        "",
    ]
    w = max(8, min(32, max(len(j.name) for j in r.jobs)))
    out.append(
        f"{'job':<{w}}  {'state':<8} {'try':>3} {'gpus':>4} {'GPU-h':>6} {'asked':>6} "
        f"{'peak':>6} {'waited':>10} {'ran':>10}  failures"
    )
    for j in r.jobs:
        fails = ", ".join(f"{k} {n}" for k, n in j.failures.items())
        out.append(
            f"{j.name[:w]:<{w}}  {j.state:<8} {j.attempts:>3} {j.gpus:>4} "
            f"{hours(j.gpu_hours):>6} {_mem(j.mem_asked_mib):>6} {_mem(j.peak_mib):>6} "
            f"{span(j.wait_s) if j.wait_s is not None else '-':>10} {span(j.runtime_s):>10}"
            f"  {fails}"
        )
    waited = sum(j.wait_s or 0.0 for j in r.jobs)
    failed = sum(len(v) for v in r.failures.values())
    out.append(
        f"{'total':<{w}}  {len(r.jobs):>3} jobs {'':>4} {hours(r.gpu_hours):>6} {'':>6} {'':>6} "
        f"{span(waited):>10} {'':>10}  {failed} failed attempt(s)"
    )
    if r.failures:
        out += ["", "failures by diagnosis"]
        for kind, jobs in sorted(r.failures.items(), key=lambda kv: -len(kv[1])):
            names = sorted(set(jobs))
            shown = ", ".join(names[:5]) + (f" (+{len(names) - 5})" if len(names) > 5 else "")
            out.append(f"  {kind:<16} {len(jobs):>4}  {shown}")
    ratio = over_asked(r.jobs)
    with_peak = sum(1 for j in r.jobs if j.mem_asked_mib and j.peak_mib)
    out.append("")
    if ratio is not None:
        asked = sum(j.asked_gib_h for j in r.jobs)
        peak = sum(j.peak_gib_h for j in r.jobs)
        out.append(
            f"memory: jobs ask {ratio:.1f}x the peak they used (median of {with_peak} job(s) "
            f"with a recorded peak); {asked:.1f} GiB-hours asked, {peak:.1f} used at peak"
        )
    else:
        out.append("memory: no job has both a declared mem and a recorded peak yet")
    out.append(
        f"GPUs idle while our jobs waited (the cost of over-asking): "
        f"{hours(r.idle_waiting_h)} GPU-hours of {hours(sum(g.busy_h for g in r.gpus))} used"
    )
    lost = r.lost_h
    if lost:
        shown = ", ".join(f"{hours(h)} {cause}" for cause, h in sorted(lost.items()))
        out.append(
            f"GPU-hours stopped through no fault of the jobs: {shown} "
            "(lost unless they resumed from a checkpoint)"
        )
    out += _links_lines(r)
    if r.gpus and any(g.timeline for g in r.gpus):
        left = time.strftime("%H:%M", time.localtime(r.start))
        right = time.strftime("%H:%M", time.localtime(r.end))
        out.append(f"        {left}{right:>{CHART_WIDTH - len(left)}}")
        for g in r.gpus:
            out.append(f"  GPU {g.index:<2}{g.timeline}  idle {hours(g.idle_waiting_h)} h")
        out.append("        █ a job of ours  ░ none of ours, one waited  · none, none waiting")
    return "\n".join(out)


def _mem(mib: int | None) -> str:
    return "-" if mib is None else format_mib(mib)


def _links_lines(r: Report) -> list[str]:
    """Each job's tracker run links, by attempt: where its curves are."""
    rows = [(j.name, n, t, u) for j in r.jobs for n, t, u in j.links]
    if not rows:
        return []
    out = ["", "runs in trackers"]
    for name, n, tracker, url in rows:
        out.append(f"  {name} #{n}  {links_line([(tracker, url)])}")
    return out
