"""What the job detail view says about one job: pure functions from engine values to Rich text.

Everything ``gtui status --json`` knows about a job is here (state, GPUs and node, memory,
attempt, exit status, times, log, waiting reason and since when, diagnosis, warnings, estimates,
what it used, its tracker run links; tests/ui/test_ui_detail_gpus.py checks each key), and what
the table has no room for: the command after its placeholders, the working directory, the
environment gtui sets (by the engine's own rule, gtui.core.sched.jobenv), every attempt (from
the attempts history, gtui.core.state.history), the jobs it runs after and the jobs that wait
on it. Values wrap; nothing is cut.
"""

from __future__ import annotations

import os
import signal as _signal
import time
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gtui.core.api import JobView
from gtui.core.gpus.snapshot import NODE_GPU_STRIDE, GpuInfo
from gtui.core.model import CAUSES, JobRecord, JobSpec, JobState, Settings
from gtui.core.queue.placeholders import substitute
from gtui.core.queue.queuefile import isolated
from gtui.core.sched.eta import Estimate
from gtui.core.sched.jobenv import job_env, on_node
from gtui.core.sched.requeue import shown_state
from gtui.core.state.history import Attempt, attempt_of, gpu_hours
from gtui.core.state.usage import mem_advice
from gtui.core.units import format_duration, format_mib
from gtui.ui.attempt_notes import attempt_energy_text, attempt_runs_text, energy_note
from gtui.ui.forecast import detail_lines
from gtui.ui.format import STATE_GLYPH, STATE_STYLE, display_path, gpus_label, kind_label


def signal_name(num: int) -> str:
    try:
        return _signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def when(t: float | None, ref: float | None = None) -> str:
    """A moment as local time; the date too unless it is the day of ``ref``."""
    if t is None:
        return "-"
    lt = time.localtime(t)
    if ref is not None and time.localtime(ref)[:3] == lt[:3]:
        return time.strftime("%H:%M:%S", lt)
    return time.strftime("%Y-%m-%d %H:%M:%S", lt)


def how_it_ended(exit_code: int | None, sig: int | None) -> str:
    if sig:
        return f"killed by {signal_name(sig)}"
    if exit_code is not None:
        return f"exit {exit_code}"
    return "exit status unknown"


def gtui_env(
    spec: JobSpec,
    rec: JobRecord,
    settings: Settings,
    queue_path: Path,
    gpus: Sequence[GpuInfo] = (),
) -> dict[str, str]:
    """The environment gtui gives the job's current (or last) attempt on top of the user's:
    gtui.core.sched.jobenv's, the rule the engine starts it by, its GPUs looked up in ``gpus``
    (a GPU read: a node's own numbers, a MIG instance's UUID). For a job that has not started,
    what it will get, its GPUs not known yet."""
    env = job_env(spec, rec, settings, queue_path, rec.gpus, gpus)
    env["GTUI_ATTEMPT"] = str(rec.attempt or 1)
    if not rec.attempt:
        del env["GTUI_TOKEN"]
        if spec.gpus and "CUDA_VISIBLE_DEVICES" in env:
            env["CUDA_VISIBLE_DEVICES"] = "<its GPUs>"
    return env


def node_of(gpus: Sequence[int], rec: JobRecord, infos: Sequence[GpuInfo] = ()) -> str | None:
    """The cluster node ``gpus`` are on: as the GPU read says, else the record's own node when
    they lie in its node's block of the pool (an attempt on another node, not read now: None)."""
    node = on_node(gpus, infos)[0]
    same_block = bool(gpus and rec.gpus) and (
        gpus[0] // NODE_GPU_STRIDE == rec.gpus[0] // NODE_GPU_STRIDE
    )
    return node if node is not None or not same_block else rec.node


def command_of(spec: JobSpec, rec: JobRecord, gpus: Sequence[GpuInfo] = ()) -> str:
    """The command as the current (or last) attempt ran it (its GPUs as its node numbers them,
    as the engine fills them in); before its start, with the placeholders known then filled
    (GPUs and port come with the start)."""
    return substitute(
        spec.cmd,
        gpus=on_node(rec.gpus, gpus)[1] if rec.attempt else (),
        name=spec.name,
        attempt=rec.attempt or 1,
        port=rec.port,
        matrix=spec.matrix,
    )


def every_attempt(rec: JobRecord, history: Sequence[Attempt]) -> list[Attempt]:
    """The recorded attempts, and the record's own (running, or ended without a history row:
    an older gtui, a launch that failed), in order."""
    by_number = {a.attempt: a for a in history if a.name == rec.name}
    if rec.attempt and (rec.active or rec.attempt not in by_number):
        by_number[rec.attempt] = attempt_of(rec)
    return [by_number[k] for k in sorted(by_number)]


def _state_text(state: JobState, rec: JobRecord | None = None) -> Text:
    """The state's glyph and word; a queued ``rec`` stopped through no fault of its own shows
    why ("preempted", "interrupted", "requeued")."""
    word = shown_state(rec) if rec is not None else state.value
    return Text(f"{STATE_GLYPH[state]} {word}", style=STATE_STYLE[state])


def _jobs_text(names: Iterable[str], views: dict[str, JobView]) -> Text:
    t = Text()
    for i, name in enumerate(names):
        if i:
            t.append(", ")
        t.append(name, style="bold")
        v = views.get(name)
        t.append(" (")
        if v is None:
            t.append("not in the queue", style="dim")
        else:
            t.append_text(_state_text(v.record.state))
        t.append(")")
    return t


def _retries(spec: JobSpec, rec: JobRecord) -> str:
    if spec.retries < 0:
        return "retries until it succeeds"
    if spec.retries == 0:
        return "no retries"
    used = max(0, rec.attempt - rec.first_attempt) if rec.attempt else 0
    left = max(0, spec.retries - used)
    return f"retries {spec.retries} ({left} left)"


def usage_text(
    gpus: tuple[int, ...],
    peaks: tuple[int, ...] | list[int],
    host_peak_mib: int | None,
    hours: float | None,
    node: str | None = None,
) -> str:
    """`` · peaks GPU0 12G, GPU1 9.5G · host 3.1G · 0.42 GPU-h``: what an attempt really used;
    "" where nothing was measured. On a cluster node: ``peaks node2:0 12G, ...``."""
    out = ""
    if len(gpus) > 1 and len(peaks) == len(gpus) and any(peaks):
        pairs = zip(gpus, peaks, strict=True)
        names = [gpus_label((g,), node) if node else f"GPU{gpus_label((g,))}" for g in gpus]
        out += " · peaks " + ", ".join(
            f"{n} {format_mib(m)}" for n, (_, m) in zip(names, pairs, strict=True)
        )
    if host_peak_mib:
        out += f" · host {format_mib(host_peak_mib)}"
    if hours and hours >= 0.005:  # shorter reads as 0.00
        out += f" · {hours:.2f} GPU-h"
    return out


def _attempt_text(a: Attempt, now: float, node: str | None) -> Text:
    t = Text()
    t.append(when(a.started_at))
    if a.state in (JobState.RUNNING.value, JobState.SUSPENDED.value):
        t.append(f"  {a.state} for {format_duration(now - (a.started_at or now))}", "bold green")
    else:
        t.append(f" → {when(a.ended_at, a.started_at)}")
        if a.started_at is not None and a.ended_at is not None:
            t.append(f" ({format_duration(a.ended_at - a.started_at)})")
        t.append("  ")
        ok = a.exit_code == 0 and not a.signal
        if a.state in CAUSES:  # stopped through no fault of its own: no failure, no retry spent
            t.append(how_it_ended(a.exit_code, a.signal), style="yellow")
            t.append(f" · {a.state}, queued again", style="bold yellow")
            if a.diag_line:
                t.append(": " + a.diag_line.strip())
            a = replace(a, diag_kind=None)
        else:
            t.append(how_it_ended(a.exit_code, a.signal), style="green" if ok else "bold red")
        if a.state == JobState.QUEUED.value:
            t.append(" · retried", style="yellow")
    if a.peak_mib:
        t.append(f" · peak {format_mib(a.peak_mib)}")
    t.append(" · " + ("GPU " + gpus_label(a.gpus, node) if a.gpus else "CPU"))
    if a.log:
        t.append(" · " + Path(a.log).name, style="dim")
    t.append(usage_text(a.gpus, a.peak_gpu_mib, a.host_peak_mib, a.gpu_hours, node))
    t.append_text(attempt_energy_text(a))
    if a.diag_kind:
        t.append("\n")
        t.append(kind_label(a.diag_kind), style="bold red")
        if a.diag_line:
            t.append(": " + a.diag_line.strip())
    t.append_text(attempt_runs_text(a))
    return t


LABEL_WIDTH = 12  # "waited on by": the labels of every section but the environment line up


def _grid(label_width: int = LABEL_WIDTH) -> Table:
    grid = Table.grid(padding=(0, 1), expand=True)
    grid.add_column(style="bold", no_wrap=True, min_width=label_width)
    grid.add_column(ratio=1, overflow="fold")
    return grid


def _row(grid: Table, label: str, value: str | Text, style: str = "") -> None:
    grid.add_row(label, value if isinstance(value, Text) else Text(value, style=style))


def _heading(title: str, note: str = "") -> Text:
    t = Text("\n" + title, style="bold underline")
    if note:
        t.append("  " + note, style="dim")
    return t


def detail_renderable(
    view: JobView,
    *,
    jobs: Sequence[JobView],
    history: Sequence[Attempt],
    settings: Settings,
    queue_path: Path,
    now: float,
    estimate: Estimate | None = None,
    backfill: str = "",
    gpus: Sequence[GpuInfo] = (),
) -> RenderableType:
    """The detail view's text for ``view``: what happened (state, diagnosis, waiting reason),
    every attempt, what it runs (command, cwd, GPUs and node, memory, dependencies), the
    environment. ``gpus``: the latest GPU read, where the job's GPUs are looked up (their node,
    a MIG instance's UUID), as the engine does when it starts the job. Sections of labelled
    values; every value wraps, nothing is cut."""
    spec, rec = view.spec, view.record
    views = {v.spec.name: v for v in jobs}
    parts: list[RenderableType] = []

    # What happened, and why: first, as everywhere on the dashboard.
    grid = _grid()
    state = _state_text(rec.state, rec)
    state.append(f"  attempt {rec.attempt}" if rec.attempt else "  not started yet")
    if rec.preempted_by and rec.preempted_at:
        state.append(f" · preempted by {rec.preempted_by} at {when(rec.preempted_at)}")
        state.append(f" ({rec.preemptions} so far)", style="dim")
    if rec.preempt_for:
        state.append(f" · stopping: making room for {rec.preempt_for}", style="bold yellow")
    state.append(f" · {_retries(spec, rec)}", style="dim")
    _row(grid, "state", state)
    if rec.started_at is not None:
        ran = Text(f"started {when(rec.started_at)}")
        if rec.active:
            ran.append(f", running for {format_duration(now - rec.started_at)}")
        elif rec.ended_at is not None and rec.ended_at >= rec.started_at:
            ran.append(f", ended {when(rec.ended_at, rec.started_at)}")
            ran.append(f" (took {format_duration(rec.ended_at - rec.started_at)})")
        if rec.attempt and not rec.active and (rec.exit_code is not None or rec.signal):
            ok = rec.exit_code == 0 and not rec.signal
            ran.append(" · ")
            ran.append(how_it_ended(rec.exit_code, rec.signal), "green" if ok else "bold red")
        _row(grid, "ran", ran)
    elif rec.ended_at is not None:  # ended without running: blocked, killed while waiting
        _row(grid, "ended", when(rec.ended_at))
    d = rec.diagnosis
    if d is not None:
        diag = Text(kind_label(d.kind), style="bold red")
        if d.line:
            diag.append(": " + d.line.strip(), style="bold")
        _row(grid, "diagnosis", diag)
        if d.hint:
            _row(grid, "hint", d.hint)
    for w in rec.warnings:
        _row(grid, "warning", Text("⚠ " + w, style="yellow"))
    if rec.reason and (rec.waiting or rec.state == JobState.BLOCKED or rec.active):
        why = Text(rec.reason)
        if rec.reason_at is not None:
            why.append(f"  (said at {when(rec.reason_at, now)})", style="dim")
        label = "note" if rec.active else "blocked" if rec.state == JobState.BLOCKED else "waiting"
        _row(grid, label, why)
    if rec.waiting:
        _row(grid, "queued", f"since {when(rec.queued_since, now)}", "dim")
    live = rec.active or rec.waiting  # an estimate made before the job ended is old
    for label, text in detail_lines(estimate if live else None, now):  # estimates
        _row(grid, label, text)
    if backfill:  # it went ahead of a multi-GPU job waiting before it (the table's note)
        _row(grid, "ran ahead", backfill, "cyan")
    parts.append(grid)

    # Every attempt, as it ended.
    tries = every_attempt(rec, history)
    if tries:
        parts.append(_heading("attempts", energy_note(tries)))
        grid = _grid()
        for a in tries:
            _row(grid, f"#{a.attempt}", _attempt_text(a, now, node_of(a.gpus, rec, gpus)))
        parts.append(grid)

    # What it runs, where, with what; whom it waits for, who waits for it.
    parts.append(_heading("job"))
    grid = _grid()
    started = bool(rec.attempt)
    command = command_of(spec, rec, gpus)
    _row(grid, "command", Text(command, style="bold"))
    if spec.cmd != command:
        if started:
            _row(grid, "in file", Text(spec.cmd, style="dim"))
        else:
            _row(grid, "", "its GPUs and port are filled in when it starts", "dim")
    cwd = (queue_path.parent / os.path.expanduser(spec.cwd)).resolve()
    _row(grid, "cwd", str(cwd))  # absolute: where the job runs, whoever reads it
    node = node_of(rec.gpus, rec, gpus) if started else None
    asked = Text("asked " + ("none (a CPU job)" if spec.gpus == 0 else f"{spec.gpus}"))
    if spec.gpus:
        if rec.gpus and started:
            given = gpus_label(rec.gpus, node)  # as the table's gpu column: node2:3, 0:1
            asked.append(f" · {'given' if rec.active else 'last given'} GPU {given}")
        elif not started:
            asked.append(" · none given yet", style="dim")
        if not isolated(spec, settings):
            asked.append(" · unisolated (isolate = false): it sees every GPU", style="yellow")
    _row(grid, "gpus", asked)
    if started and rec.node:  # on a cluster: where it runs, or ran last
        _row(grid, "node", Text(rec.node).append("" if rec.active else "  (its last run)", "dim"))
    if spec.gpus:
        mem = Text("asked " + (f"{format_mib(spec.mem_mib)} per GPU" if spec.mem_mib else "whole"))
        if spec.mem_auto:
            mem = Text("auto (its runs' peak + 20 %; whole GPU until one is recorded)")
        if rec.mem_mib != spec.mem_mib:
            now_asks = f"{format_mib(rec.mem_mib)} per GPU" if rec.mem_mib else "whole GPUs"
            mem.append(f" · now asks {now_asks}", style="yellow")
            source = "from its runs' peak" if spec.mem_auto else "grown after a CUDA OOM"
            mem.append(f" ({source})", style="dim")
        if rec.peak_mib:
            mem.append(f" · peak {format_mib(rec.peak_mib)}")
        ran_for = gpu_hours(
            len(rec.gpus), rec.started_at, rec.ended_at or (time.time() if rec.active else None)
        )
        mem.append(usage_text(rec.gpus, rec.peak_gpu_mib, rec.host_peak_mib, ran_for, node))
        advice = mem_advice(spec, history)  # what its recorded runs say of its mem
        if advice is not None:
            mem.append("\n⚠ " + advice.text(), style="yellow")
        _row(grid, "memory", mem)
    extra = [f"priority {spec.priority}"]
    if spec.timeout_s is not None:
        extra.append(f"timeout {format_duration(spec.timeout_s)}")
    if spec.matrix:
        extra.append("matrix " + ", ".join(f"{k}={v}" for k, v in spec.matrix.items()))
    _row(grid, "options", " · ".join(extra))
    if rec.pid is not None:
        port = f" · port {rec.port}" if rec.port is not None else ""
        _row(grid, "pid" if rec.active else "last pid", f"{rec.pid}{port}")
    if rec.log:
        _row(grid, "log", display_path(Path(rec.log)))
    else:
        _row(grid, "log", "none yet", "dim")
    _row(grid, "after", _jobs_text(spec.after, views) if spec.after else Text("nothing", "dim"))
    waiters = [v.spec.name for v in jobs if spec.name in v.spec.after]
    _row(grid, "waited on by", _jobs_text(waiters, views) if waiters else Text("nobody", "dim"))
    parts.append(grid)

    # The environment gtui sets (on top of the user's own).
    title = "environment" if started else "environment when it starts"
    parts.append(_heading(title, "set by gtui on top of yours"))
    grid = _grid(0)
    for k, v in gtui_env(spec, rec, settings, queue_path, gpus).items():
        if k == "GTUI_QUEUE":
            v = display_path(Path(v))
        elif k == "CUDA_VISIBLE_DEVICES" and not v:
            _row(grid, k, Text('""  (empty: it sees no GPU)', style="dim"))
            continue
        _row(grid, k, v)
    parts.append(grid)
    return Group(*parts)


def detail_title(view: JobView) -> Text:
    """The one-line header of the detail view."""
    rec = view.record
    t = Text(" gtui · job ", style="bold")
    t.append(view.spec.name, style="bold")
    t.append("  ")
    t.append_text(_state_text(rec.state, rec))
    if rec.attempt:
        t.append(f" · attempt {rec.attempt}")
    return t
