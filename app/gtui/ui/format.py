"""How jobs, GPUs and the header read on screen: pure functions from engine values to Rich text.

Kept apart from the widgets so they can be tested on values built by hand, and so the rules that
give colour a meaning live in one place. Colour always doubles something written: the state word
beside its glyph, the numbers beside a bar, so the screen still reads with NO_COLOR.

Size: every text the dashboard shows, as pure functions in one place; split per widget they
would repeat the units, the colours and the truncation rules.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text

from gtui.core.api import JobView
from gtui.core.gpus.health import HARDWARE, judge
from gtui.core.gpus.snapshot import NODE_GPU_STRIDE, GpuInfo, gpu_label
from gtui.core.model import JobState, Settings
from gtui.core.sched.reasonkey import reason_key
from gtui.core.sched.requeue import requeue_note, shown_state
from gtui.core.state.history import gpu_hours
from gtui.core.units import format_duration, format_mib

# Thresholds that colours stand for (percent). The help screen prints the same numbers.
MEM_WARN, MEM_CRIT = 70, 90  # used memory of a GPU
UTIL_WARN, UTIL_CRIT = 50, 90  # GPU utilization
TEMP_WARN, TEMP_CRIT = 75, 85  # degrees C

OTHERS_CHAR, OURS_CHAR, FREE_CHAR = "▓", "█", "░"
UTIL_CHAR, UTIL_FREE_CHAR = "█", "░"

STATE_GLYPH: dict[JobState, str] = {
    JobState.RUNNING: "▶",
    JobState.SUSPENDED: "■",  # stopped (SIGSTOP); a held job, which never started, is ‖
    JobState.QUEUED: "·",
    JobState.HELD: "‖",
    JobState.DONE: "✓",
    JobState.FAILED: "✗",
    JobState.KILLED: "✕",
    JobState.BLOCKED: "⊘",
    JobState.UNKNOWN: "?",
}
STATE_STYLE: dict[JobState, str] = {
    JobState.RUNNING: "bold green",
    JobState.SUSPENDED: "yellow",
    JobState.QUEUED: "",
    JobState.HELD: "yellow",
    JobState.DONE: "green",
    JobState.FAILED: "bold red",
    JobState.KILLED: "magenta",
    JobState.BLOCKED: "red",
    JobState.UNKNOWN: "bold yellow",
}
# Order of the header's counts: what needs eyes first.
COUNT_ORDER = (
    JobState.RUNNING,
    JobState.SUSPENDED,
    JobState.QUEUED,
    JobState.HELD,
    JobState.UNKNOWN,
    JobState.FAILED,
    JobState.KILLED,
    JobState.BLOCKED,
    JobState.DONE,
)
SHORT_STATE = {
    JobState.RUNNING: "run",
    JobState.SUSPENDED: "susp",
    JobState.QUEUED: "queued",
    JobState.HELD: "held",
    JobState.FAILED: "fail",
    JobState.KILLED: "kill",
    JobState.BLOCKED: "blk",
    JobState.UNKNOWN: "unkn",
    JobState.DONE: "done",
}


def level_style(value: float | None, warn: float, crit: float) -> str:
    """Green below ``warn``, yellow from it, red from ``crit``; dim when unknown."""
    if value is None:
        return "dim"
    if value >= crit:
        return "bold red"
    if value >= warn:
        return "yellow"
    return "green"


def display_path(path: Path, cwd: Path | None = None) -> str:
    """A queue path as a person would type it: relative to cwd if under it, else with ``~``."""
    cwd = cwd or Path.cwd()
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        pass
    home = os.path.expanduser("~")
    s = str(path)
    if home not in ("", "/") and s.startswith(home + os.sep):
        return "~" + s[len(home) :]
    return s


_NAME_NOISE = re.compile(r"[- ](?:SXM\d*|PCIE|PCIe|NVL|HBM\d*e?|\d+GB?)\b")


def short_gpu_name(name: str, compact: bool = False) -> str:
    """``NVIDIA A800-SXM4-80GB`` -> ``A800-SXM4-80GB`` (``A800`` compact): the panel shows the
    memory anyway, and the vendor adds nothing on one server."""
    for prefix in ("NVIDIA ", "Tesla ", "GeForce ", "Quadro "):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    if compact:
        name = _NAME_NOISE.sub("", name).strip() or name
    return name


def gib(mib: int | None) -> str:
    if mib is None:
        return "n/a"
    g = mib / 1024
    return f"{g:.0f}" if g >= 10 or g == 0 else f"{g:.1f}"


# ---------------------------------------------------------------------------------------------
# Jobs


@dataclass(frozen=True)
class JobCells:
    """The queue table's cells for one job, already styled."""

    glyph: Text
    name: Text
    state: Text
    gpu: Text
    mem: Text
    tries: Text
    time: Text
    note: Text


def mem_request(view: JobView) -> str:
    """What the job asks for: ``12G``, ``70Gx2``, ``whole`` (its GPUs to itself), ``cpu``."""
    spec, rec = view.spec, view.record
    if spec.gpus == 0:
        return "cpu"
    mem = rec.mem_mib if rec.mem_mib is not None else spec.mem_mib
    each = format_mib(mem) if mem is not None else "whole"
    return each if spec.gpus == 1 else f"{each}x{spec.gpus}"


def gpus_label(gpus: Iterable[int], node: str | None = None) -> str:
    """GPUs as people name them: ``0,1``, ``0:1`` for MIG instance 1 of GPU 0, and on a
    cluster the node once, then each GPU as its node numbers it: ``node2:0,1`` for
    pool GPUs 1000000 and 1000001."""
    prefix = f"{node}:" if node else ""
    return prefix + ",".join(gpu_label(g % NODE_GPU_STRIDE) for g in gpus)


def gpu_cell(view: JobView) -> str:
    """The GPUs it holds (or held last), ``cpu`` for a CPU job, ``-`` while it waits."""
    spec, rec = view.spec, view.record
    if spec.gpus == 0:
        return f"{rec.node}:cpu" if rec.node and (rec.active or rec.final) else "cpu"
    if rec.gpus and (rec.active or rec.final):
        return gpus_label(rec.gpus, rec.node)
    return "-"


def tries_cell(view: JobView) -> str:
    """Attempts so far, out of the allowed ones when it may retry: ``1``, ``2/4``, ``3/∞``."""
    retries = view.spec.retries
    a = view.record.attempt
    if retries == 0:
        return str(a)
    if retries < 0:
        return f"{a}/∞"
    # A manual retry starts a fresh budget at first_attempt.
    first = max(1, getattr(view.record, "first_attempt", 1))
    return f"{a}/{first + retries}"


def elapsed_s(view: JobView, now: float) -> float | None:
    rec = view.record
    if rec.started_at is None:
        return None
    if rec.active:
        return max(0.0, now - rec.started_at)
    if rec.final and rec.ended_at is not None:
        return max(0.0, rec.ended_at - rec.started_at)
    return None


KIND_LABEL = {
    "cuda_oom": "CUDA OOM",
    "cuda_error": "CUDA error",
    "no_cuda_device": "no CUDA device",
    "invalid_device_ordinal": "invalid device ordinal",
    "nccl": "NCCL error",
    "host_oom": "host OOM",
    "wandb_login": "wandb login",
    "no_space": "no space left",
    "killed_by_user": "killed by you",
    "launch": "could not start",
    "not_started": "start put off",
}


_NAME_SEPS = "-_.=/:+"


def cut_middle(name: str, width: int) -> str:
    """``train-vit-…-lr0.01-seed3``: a long name cut in the middle, never at the end, so sweep
    members (which differ at their ends) stay distinct. The cut snaps to a separator when one
    is at most 3 characters away, so what is kept reads as whole words."""
    if len(name) <= width:
        return name
    if width < 3:
        return name[:width]
    budget = width - 1  # the ellipsis takes one cell
    head = budget // 2
    for i in range(head, max(0, head - 3), -1):
        if name[i - 1] in _NAME_SEPS:
            head = i
            break
    tail = budget - head
    return f"{name[:head]}…{name[len(name) - tail :]}"


_WORD_SEPS = "-_/"  # not "." (lr0.01) nor "=" (seed=1 reads as one word)


def sweep_start(names: Iterable[str]) -> int:
    """Where the names of a matrix entry's jobs start to differ, snapped back to the start of
    that word: ``lr0.1-bs32`` and ``lr0.01-bs32`` of ``sweep-lr…`` both start at 6. What
    comes before is the part they share, the part a cut may drop."""
    names = list(names)
    if len(names) < 2:
        return 0
    first, last = min(names), max(names)  # the prefix they share is every name's
    n = next((i for i, (a, b) in enumerate(zip(first, last, strict=False)) if a != b), len(first))
    common = first[:n]
    return max((common.rfind(c) + 1 for c in _WORD_SEPS), default=0)


def cut_name(name: str, width: int, keep_from: int = 0) -> str:
    """``name`` in ``width`` cells. A sweep member (``keep_from``: where its parameters start,
    :func:`sweep_start`) loses the end of the prefix its siblings share, never its
    parameters: ``swe…lr0.01-bs32``. Any other name is cut in the middle (:func:`cut_middle`)."""
    if len(name) <= width:
        return name
    tail = name[keep_from:] if 0 < keep_from < len(name) else ""
    if not tail or width < 3:
        return cut_middle(name, width)
    if len(tail) + 1 > width:  # the parameters alone are too long: their start differs
        return "…" + tail[: width - 2] + "…"
    return name[: width - 1 - len(tail)] + "…" + tail


def kind_label(kind: str) -> str:
    """A diagnosis kind as people say it: ``cuda_oom`` -> ``CUDA OOM``."""
    return KIND_LABEL.get(kind, kind.replace("_", " "))


def note_cell(view: JobView) -> Text:
    """The waiting reason, the diagnosis or a warning: what a person would act on."""
    rec = view.record
    st = rec.state
    stopped = requeue_note(rec)
    if stopped is not None:
        # stopped through no fault of its own: what stopped it (by whom, when), no "retry"
        return Text(stopped + (f"; {rec.reason}" if rec.reason else ""), style="yellow")
    if st == JobState.QUEUED and rec.attempt and rec.diagnosis is not None:
        why = kind_label(rec.diagnosis.kind)
        return Text(
            f"retry after {why}" + (f"; {rec.reason}" if rec.reason else ""), style="yellow"
        )
    if st == JobState.RUNNING and rec.warnings:
        return Text("⚠ " + rec.warnings[-1], style="yellow")
    if st in (JobState.QUEUED, JobState.HELD, JobState.BLOCKED):
        text = (
            reason_key(rec.reason)
            or {
                JobState.QUEUED: "waiting",
                JobState.HELD: "held by you",
                JobState.BLOCKED: "a job it runs after did not succeed",
            }[st]
        )
        style = "red" if st == JobState.BLOCKED else ("dim" if st == JobState.QUEUED else "yellow")
        return Text(text, style=style)
    if st == JobState.SUSPENDED:
        return Text(rec.reason or "suspended by you", style="yellow")
    if st in (JobState.FAILED, JobState.KILLED):
        if rec.diagnosis is not None:
            kind = kind_label(rec.diagnosis.kind)
            return Text(kind, style="red" if st == JobState.FAILED else "magenta")
        if rec.signal:
            return Text(f"signal {rec.signal}", style="red")
        if rec.exit_code is not None:
            return Text(f"exit {rec.exit_code}", style="red")
        return Text("killed" if st == JobState.KILLED else "failed", style="red")
    if st == JobState.DONE:
        # What it used (GPU-hours, host memory) is in the job's details: a done job's note
        # only says what needs the user, as a reason the engine gave it does.
        return Text(rec.reason, style="dim")
    if st == JobState.RUNNING and not rec.reason:
        used = used_note(view)
        return Text(used, style="dim") if used else Text("")
    return Text(rec.reason)


def used_note(view: JobView, now: float | None = None) -> str:
    """``peak 9.5G of 12G · host 3G · 0.42 GPU-h``: what a running job really used,
    where it says more than its request: the peak when it differs from the
    request, host memory and GPU-hours once the job has held GPUs for 0.01 GPU-h (36 s)."""
    rec = view.record
    parts = []
    if rec.peak_mib and rec.peak_mib != rec.mem_mib:
        asked = format_mib(rec.mem_mib) if rec.mem_mib is not None else "whole GPU"
        parts.append(f"peak {format_mib(rec.peak_mib)} of {asked}")
    end = rec.ended_at or ((now or time.time()) if rec.active else None)
    hours = gpu_hours(len(rec.gpus), rec.started_at, end)
    if hours is not None and hours >= 0.01:
        if rec.host_peak_mib:
            parts.append(f"host {format_mib(rec.host_peak_mib)}")
        parts.append(f"{hours:.2f} GPU-h")
    return " · ".join(parts)


def job_cells(view: JobView, now: float) -> JobCells:
    st = view.record.state
    style = STATE_STYLE[st]
    return JobCells(
        glyph=Text(STATE_GLYPH[st], style=style),
        name=Text(view.spec.name, style="bold" if view.record.active else ""),  # cut by the table
        state=Text(shown_state(view.record), style=style),  # "preempted" for a queued one
        gpu=Text(gpu_cell(view)),
        mem=Text(mem_request(view)),
        tries=Text(tries_cell(view)),
        time=Text(format_duration(elapsed_s(view, now))),
        note=note_cell(view),
    )


# ---------------------------------------------------------------------------------------------
# GPUs


@dataclass(frozen=True)
class GpuMarks:
    """What the queue's settings and the reserve rule say about one GPU."""

    excluded: bool = False
    in_pool: bool = True
    reserved: bool = False
    quarantined: bool = False  # a hardware fault: out until cleared


def memory_bar(total: int, others: int, ours: int, width: int) -> Text:
    """Three parts: other users (▓), ours (█), free (░). A part that exists gets at least a cell."""
    width = max(3, width)
    if total <= 0:
        return Text(FREE_CHAR * width, style="dim")
    others = max(0, others)
    ours = max(0, ours)

    def cells(amount: int) -> int:
        if amount <= 0:
            return 0
        return max(1, round(amount / total * width))

    n_others = cells(others)
    n_ours = cells(ours)
    while n_others + n_ours > width:
        if n_others >= n_ours and n_others > 1:
            n_others -= 1
        elif n_ours > 1:
            n_ours -= 1
        else:
            break
    n_free = max(0, width - n_others - n_ours)
    bar = Text()
    bar.append(OTHERS_CHAR * n_others, style="magenta")
    bar.append(OURS_CHAR * n_ours, style="cyan")
    bar.append(FREE_CHAR * n_free, style="grey42")
    return bar


def util_bar(util: int | None, width: int) -> Text:
    if util is None:
        return Text(UTIL_FREE_CHAR * width, style="dim")
    n = round(max(0, min(100, util)) / 100 * width)
    bar = Text()
    bar.append(UTIL_CHAR * n, style=level_style(util, UTIL_WARN, UTIL_CRIT))
    bar.append(UTIL_FREE_CHAR * (width - n), style="grey42")
    return bar


def _fit(text: str, width: int) -> str:
    if width <= 0:
        return ""
    if len(text) <= width:
        return text.ljust(width)
    return text[: max(0, width - 1)] + "…"


def jobs_tail(names: Iterable[str], width: int) -> str:
    """Job names that fit in ``width``; the rest counted as ``+N``."""
    names = list(names)
    if not names or width <= 0:
        return ""
    for k in range(len(names), 0, -1):
        rest = len(names) - k
        s = " ".join(names[:k]) + (f" +{rest}" if rest else "")
        if len(s) <= width:
            return s
    suffix = f" +{len(names) - 1}" if len(names) > 1 else ""
    return _fit(names[0], max(1, width - len(suffix))).rstrip() + suffix


POWER_WARN, POWER_CRIT = 95, 100  # percent of the power limit: at it, the GPU is power-capped


def power_text(gpu: GpuInfo) -> str:
    """`` 212W``: the GPU's power draw, five wide; "" where the GPU does not report it."""
    return "" if gpu.power_w is None else f"{gpu.power_w:.0f}W".rjust(5)


def power_pct(gpu: GpuInfo) -> float | None:
    """The power draw as a share of the limit (None: either is n/a)."""
    if gpu.power_w is None or not gpu.power_limit_w:
        return None
    return gpu.power_w / gpu.power_limit_w * 100


def gpu_line(
    gpu: GpuInfo,
    *,
    ours_names: tuple[str, ...] = (),
    ours_mib: int = 0,
    marks: GpuMarks = GpuMarks(),
    width: int = 120,
) -> Text:
    """One row of the GPU panel, laid out for ``width`` columns (wide: words beside the bar)."""
    wide = width >= 110
    name_w = 14 if wide else 10
    line = Text(no_wrap=True, overflow="ellipsis")
    # On a cluster the bars sit under their node's name, numbered as on the node.
    label = gpu.label if gpu.node is None else gpu_label(gpu.index % NODE_GPU_STRIDE)
    line.append(f"{label:>2} ", style="bold")
    line.append(_fit(short_gpu_name(gpu.name, compact=not wide), name_w) + " ")
    if gpu.lost:
        line.append("LOST", style="bold red reverse")
        line.append(f" {gpu.error or 'the GPU stopped answering'}; retrying", style="red")
        return line

    total = gpu.mem_total_mib
    used = gpu.mem_used_mib
    used_pct = (used / total * 100) if (used is not None and total) else None
    ours = min(ours_mib, used or 0)
    others = (used - ours) if used is not None else 0

    power = power_text(gpu)
    fixed = (2 + 1 + name_w + 1) + 1 + 8 + (2 + 20 if wide else 1) + (16 if wide else 10) + 6 + 1
    fixed += 1 + len(power) if power else 0  # the power draw, where the GPU reports it
    tail_min = 16 if wide else 12
    bar_w = max(8, min(32 if wide else 20, width - fixed - tail_min))
    if total:
        line.append_text(memory_bar(total, others, ours, bar_w))
    else:
        line.append("n/a".ljust(bar_w), style="dim")
    mem_text = f"{gib(used)}/{gib(total)}G" if (total and used is not None) else "n/a"
    line.append(" " + mem_text.rjust(8), style=level_style(used_pct, MEM_WARN, MEM_CRIT))
    if wide:
        detail = ""
        if others > 0:
            detail += f"others {format_mib(others)} "
        if ours > 0:
            detail += f"ours {format_mib(ours)}"
        line.append("  " + _fit(detail.strip(), 20))
    else:
        line.append(" ")
    util_w = 10 if wide else 5
    line.append("util " if wide else "")
    line.append_text(util_bar(gpu.util, util_w))
    util_text = "n/a" if gpu.util is None else f"{gpu.util}%"
    line.append(" " + util_text.rjust(4), style=level_style(gpu.util, UTIL_WARN, UTIL_CRIT))
    temp = "n/a" if gpu.temperature is None else f"{gpu.temperature}°C"
    line.append(" " + temp.rjust(5), style=level_style(gpu.temperature, TEMP_WARN, TEMP_CRIT))
    if power:
        line.append(" " + power, style=level_style(power_pct(gpu), POWER_WARN, POWER_CRIT))

    used_so_far = line.cell_len
    room = max(0, width - used_so_far - 2)
    tail = Text()
    if marks.quarantined:
        tail.append("QUARANTINED ", style="bold reverse red")
    elif marks.excluded:
        tail.append("excluded ", style="bold")
    elif not marks.in_pool:
        tail.append("not in pool ", style="bold")
    elif marks.reserved:
        tail.append("reserved ", style="bold yellow")
    names_room = room - tail.cell_len
    if ours_names and names_room > 2:
        tail.append(jobs_tail(ours_names, names_room), style="cyan")
    if tail.cell_len:
        line.append("  ")
        line.append_text(tail)
    if marks.excluded or not marks.in_pool:
        line.stylize("dim")
    fault = judge(gpu.health).fault
    if fault:
        line.append(f"  {fault}: {HARDWARE}", style="bold red")
    if gpu.error:
        line.append(f"  ({gpu.error})", style="yellow")
    return line


# ---------------------------------------------------------------------------------------------
# Header


def count_states(views: Iterable[JobView]) -> dict[JobState, int]:
    counts: dict[JobState, int] = {}
    for v in views:
        counts[v.record.state] = counts.get(v.record.state, 0) + 1
    return counts


def counts_text(counts: Mapping[JobState, int], short: bool = False) -> Text:
    out = Text()
    for st in COUNT_ORDER:
        n = counts.get(st, 0)
        if not n:
            continue
        if out:
            out.append(" ")
        word = SHORT_STATE[st] if short else st.value
        out.append(f"{n} {word}", style=STATE_STYLE[st] or "bold")
    if not out:
        out.append("no jobs", style="dim")
    return out


def header_text(
    *,
    host: str,
    queue: str,
    settings: Settings,
    paused: bool,
    fake: bool,
    counts: Mapping[JobState, int],
    width: int,
) -> Text:
    """The top line; shortened step by step until it fits ``width``."""
    queue_name = Path(queue).name

    def build(level: int) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(" gtui", style="bold")
        if level < 4:
            t.append(f" · {host}")
        t.append(f" · {queue if level < 1 else queue_name}")
        t.append(f" · {settings.mode.value}")
        if settings.reserve:
            t.append(f" · {'reserve' if level < 2 else 'res'} {settings.reserve}")
        t.append(" · ")
        label = "dispatch " if level < 3 else ""
        if paused:
            t.append(f"{label}PAUSED", style="bold black on yellow")
        else:
            t.append(f"{label}ON", style="bold green")
        if fake:
            t.append(" · ")
            t.append("SIMULATED GPUs" if level < 3 else "SIM", style="bold reverse")
        right = counts_text(counts, short=level >= 2)
        gap = width - t.cell_len - right.cell_len - 1
        if gap >= 2:
            t.append(" " * gap)
            t.append_text(right)
            t.append(" ")
        else:
            t.append("  ")
            t.append_text(right)
        return t

    for level in range(5):
        t = build(level)
        if t.cell_len <= width:
            return t
    t = build(4)
    t.truncate(width, overflow="ellipsis")
    return t
