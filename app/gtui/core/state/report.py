"""``gtui report``'s figures, from the saved job records and the attempts history
alone: no scheduler, no GPU, no process is needed. Pure: records, attempts and specs in.

What each figure means, as the report prints it:

- **GPU-hours** of a job: each attempt's GPUs times its run time (a running attempt counts up to
  now). An attempt that carries its own ``gpu_hours`` (the history's field, where recorded) is
  taken as it is.
- **memory asked vs peak**: what the job declares per GPU, against the highest GPU memory its
  attempts were seen using (``peak_mib`` of the history; absent where never recorded); in
  total, GiB-hours: asked x GPUs x time against peak x GPUs x time, over the attempts with a
  recorded peak.
- **waits**: how long the job waited to start: its first attempt from when it was queued, each
  retry from the end of the attempt before; a job still waiting counts up to now. (A job that
  ran more than once has no first wait: its record keeps only its latest queueing time.)
- **failures by diagnosis**: every attempt that failed, by the kind its diagnosis gave.
- **GPU idle while jobs waited**: for each GPU our jobs ran on, the time no job of ours held it
  while at least one of our jobs waited with its dependencies met. A job that waited for memory
  (others' or the reserve) while a GPU sat empty of ours shows here: the cost of over-asking.
  Other users' use of the GPU in that time is not recorded, so it is an upper bound.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gtui.core.model import LOST_CAUSES, JobRecord, JobSpec, JobState
from gtui.core.state.history import Attempt

Interval = tuple[float, float]


@dataclass
class JobReport:
    """One job's line of the report."""

    name: str
    state: str
    attempts: int
    gpus: int
    gpu_hours: float
    mem_asked_mib: int | None
    peak_mib: int | None
    wait_s: float | None
    runtime_s: float
    failures: dict[str, int] = field(default_factory=dict)
    # Memory held over time, over the attempts whose peak was recorded: what the job asked
    # (mem x GPUs x hours) against the peak it used (peak x GPUs x hours), in GiB-hours.
    asked_gib_h: float = 0.0
    peak_gib_h: float = 0.0
    # GPU-hours of attempts stopped through no fault of the job's (preempted, a reboot):
    # cause -> hours, spent and lost unless the job saved and resumed.
    lost_h: dict[str, float] = field(default_factory=dict)
    # Its attempts' experiment-tracker run links: (attempt, tracker, url), oldest first.
    links: list[tuple[int, str, str]] = field(default_factory=list)


@dataclass
class GpuReport:
    """One GPU's use by our jobs over the report's span."""

    index: int
    busy_h: float  # held by a job of ours
    idle_waiting_h: float  # held by none of ours while one of ours waited
    timeline: str = ""  # the plain-text chart's row


@dataclass
class Report:
    """Everything ``gtui report`` says; :func:`to_json` is its ``--json``."""

    queue: str
    start: float | None
    end: float
    jobs: list[JobReport]
    gpus: list[GpuReport]
    failures: dict[str, list[str]]  # diagnosis kind -> the jobs (one entry per failed attempt)

    @property
    def gpu_hours(self) -> float:
        return sum(j.gpu_hours for j in self.jobs)

    @property
    def lost_h(self) -> dict[str, float]:
        """GPU-hours lost to preemptions and reboots, by cause."""
        out: dict[str, float] = {}
        for j in self.jobs:
            for cause, h in j.lost_h.items():
                out[cause] = out.get(cause, 0.0) + h
        return out

    @property
    def idle_waiting_h(self) -> float:
        return sum(g.idle_waiting_h for g in self.gpus)


def _merge(intervals: Iterable[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _minus(base: list[Interval], cut: list[Interval]) -> list[Interval]:
    """``base`` with ``cut`` taken out (both merged and sorted)."""
    out: list[Interval] = []
    for a, b in base:
        start = a
        for c, d in cut:
            if d <= start or c >= b:
                continue
            if c > start:
                out.append((start, c))
            start = max(start, d)
        if start < b:
            out.append((start, b))
    return out


def _length(intervals: Iterable[Interval]) -> float:
    return sum(b - a for a, b in intervals)


def _overlaps(intervals: list[Interval], a: float, b: float) -> float:
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in intervals)


def build(
    queue: str,
    records: Mapping[str, JobRecord],
    attempts: Sequence[Attempt],
    specs: Mapping[str, JobSpec],
    now: float,
    chart_width: int = 60,
    pool: Iterable[int] = (),
) -> Report:
    """The report of a queue from its records (every job the store knows), its attempts history,
    and the queue file's specs where it could be read (for ``after`` and ``mem``). ``pool``: GPUs
    to report on besides those our jobs ran on (the file's ``gpus`` list), so that a GPU none of
    our jobs could take shows its idle time too."""
    by_job: dict[str, list[Attempt]] = {}
    for a in attempts:
        by_job.setdefault(a.name, []).append(a)
    for runs in by_job.values():
        runs.sort(key=lambda a: a.attempt)
    names = list(dict.fromkeys([*specs, *records, *by_job]))  # queue order first

    def ended(name: str) -> float | None:
        """When the job's last run ended done (its dependants may start from then)."""
        rec = records.get(name)
        if rec is not None and rec.state == JobState.DONE and rec.ended_at is not None:
            return rec.ended_at
        done = [a.ended_at for a in by_job.get(name, []) if a.state == "done" and a.ended_at]
        return max(done) if done else None

    busy: dict[int, list[Interval]] = {}
    waiting: list[Interval] = []
    failures: dict[str, list[str]] = {}
    jobs: list[JobReport] = []
    for name in names:
        rec = records.get(name)
        spec = specs.get(name)
        runs = list(by_job.get(name, []))
        # The running attempt is not in the history yet.
        if rec is not None and rec.active and rec.started_at is not None:
            runs.append(
                Attempt(
                    name,
                    rec.attempt,
                    rec.state.value,
                    rec.started_at,
                    None,
                    None,
                    None,
                    None,
                    None,
                    rec.peak_mib,
                    tuple(rec.gpus),
                    rec.log,
                    links=tuple(rec.links),
                )
            )
        gpu_h = 0.0
        runtime = 0.0
        wait: float | None = None
        fails: dict[str, int] = {}
        asked_gib_h = peak_gib_h = 0.0
        mem_asked = spec.mem_mib if spec else (rec.mem_mib if rec else None)
        prev_end: float | None = None
        lost: dict[str, float] = {}
        for a in runs:
            if a.started_at is None:
                continue
            end = a.ended_at if a.ended_at is not None else now
            dur = max(0.0, end - a.started_at)
            runtime += dur
            given = getattr(a, "gpu_hours", None)  # the history's own figure, where recorded
            held_h = float(given) if isinstance(given, int | float) else dur * len(a.gpus) / 3600
            gpu_h += held_h
            if a.state in LOST_CAUSES:
                lost[a.state] = lost.get(a.state, 0.0) + held_h
            if mem_asked and a.peak_mib is not None and a.gpus:
                hours_held = dur * len(a.gpus) / 3600
                asked_gib_h += mem_asked / 1024 * hours_held
                peak_gib_h += a.peak_mib / 1024 * hours_held
            for g in a.gpus:
                busy.setdefault(g, []).append((a.started_at, end))
            queued_from = prev_end
            if a is runs[0] and rec is not None and rec.attempt == a.attempt:
                queued_from = rec.queued_since  # a first (and only) attempt: queued since then
            if queued_from is not None and queued_from <= a.started_at:
                deps = [ended(d) for d in (spec.after if spec else ())]
                ready = max([queued_from, *(d for d in deps if d is not None)])
                wait = (wait or 0.0) + (a.started_at - queued_from)
                waiting.append((min(ready, a.started_at), a.started_at))
            if a.diag_kind and a.state in ("failed", "queued"):
                fails[a.diag_kind] = fails.get(a.diag_kind, 0) + 1
                failures.setdefault(a.diag_kind, []).append(name)
            prev_end = a.ended_at
        if rec is not None and rec.state == JobState.QUEUED:
            since = rec.queued_since
            wait = (wait or 0.0) + max(0.0, now - since)
            deps = [ended(d) for d in (spec.after if spec else ())]
            if all(d is not None for d in deps):
                waiting.append((max([since, *(d for d in deps if d is not None)]), now))
        peaks = [a.peak_mib for a in runs if a.peak_mib is not None]
        jobs.append(
            JobReport(
                name=name,
                state=rec.state.value if rec else (runs[-1].state if runs else "not run"),
                attempts=len(runs),
                gpus=spec.gpus if spec else (len(runs[-1].gpus) if runs else 0),
                gpu_hours=gpu_h,
                mem_asked_mib=mem_asked,
                peak_mib=max(peaks) if peaks else None,
                wait_s=wait,
                runtime_s=runtime,
                failures=fails,
                asked_gib_h=asked_gib_h,
                peak_gib_h=peak_gib_h,
                lost_h=lost,
                links=[(a.attempt, t, u) for a in runs for t, u in a.links],
            )
        )

    starts = [i[0] for ivs in busy.values() for i in ivs] + [w[0] for w in waiting]
    start = min(starts) if starts else None
    end = max(
        [now if any(r.active or r.waiting for r in records.values()) else 0.0]
        + [i[1] for ivs in busy.values() for i in ivs]
        + [w[1] for w in waiting]
    )
    waiting_m = _merge(waiting)
    gpus: list[GpuReport] = []
    for g in sorted({*busy, *pool}):
        held = _merge(busy.get(g, []))
        idle = _minus(waiting_m, held)
        gpus.append(GpuReport(g, _length(held) / 3600, _length(idle) / 3600))
        if start is not None and end > start:
            gpus[-1].timeline = _timeline(held, idle, start, end, chart_width)
    return Report(queue, start, end, jobs, gpus, failures)


def _timeline(held: list[Interval], idle: list[Interval], start: float, end: float, w: int) -> str:
    """One character per slice of the span: ``█`` held by ours, ``░`` idle while ours waited,
    ``·`` neither (whichever covers most of the slice)."""
    step = (end - start) / w
    out = []
    for i in range(w):
        a, b = start + i * step, start + (i + 1) * step
        h, d = _overlaps(held, a, b), _overlaps(idle, a, b)
        out.append("█" if h >= d and h > step / 4 else "░" if d > step / 4 else "·")
    return "".join(out)


def over_asked(jobs: Iterable[JobReport]) -> float | None:
    """The median of asked / peak over the jobs with both (2.0: they ask twice what they use)."""
    ratios = [j.mem_asked_mib / j.peak_mib for j in jobs if j.mem_asked_mib and j.peak_mib]
    return statistics.median(ratios) if ratios else None


def to_json(r: Report) -> dict[str, object]:
    """``gtui report --json``: hours and seconds as numbers, sizes in MiB."""
    return {
        "queue": r.queue,
        "start": r.start,
        "end": r.end,
        "total": {
            "jobs": len(r.jobs),
            "gpu_hours": round(r.gpu_hours, 4),
            "idle_gpu_hours_while_waiting": round(r.idle_waiting_h, 4),
            "wait_s": round(sum(j.wait_s or 0.0 for j in r.jobs), 1),
            "failed_attempts": sum(len(v) for v in r.failures.values()),
            "mem_asked_over_peak_median": over_asked(r.jobs),
            "mem_asked_gib_hours": round(sum(j.asked_gib_h for j in r.jobs), 3),
            "mem_peak_gib_hours": round(sum(j.peak_gib_h for j in r.jobs), 3),
            "lost_gpu_hours": {k: round(v, 4) for k, v in sorted(r.lost_h.items())},
        },
        "jobs": [
            {
                "name": j.name,
                "state": j.state,
                "attempts": j.attempts,
                "gpus": j.gpus,
                "gpu_hours": round(j.gpu_hours, 4),
                "runtime_s": round(j.runtime_s, 1),
                "wait_s": None if j.wait_s is None else round(j.wait_s, 1),
                "mem_asked_mib": j.mem_asked_mib,
                "peak_mib": j.peak_mib,
                "failures": j.failures,
                "mem_asked_gib_hours": round(j.asked_gib_h, 3),
                "mem_peak_gib_hours": round(j.peak_gib_h, 3),
                "lost_gpu_hours": {k: round(v, 4) for k, v in sorted(j.lost_h.items())},
                "links": [{"attempt": n, "tracker": t, "url": u} for n, t, u in j.links],
            }
            for j in r.jobs
        ],
        "failures": {k: {"count": len(v), "jobs": sorted(set(v))} for k, v in r.failures.items()},
        "gpus": [
            {
                "index": g.index,
                "busy_hours": round(g.busy_h, 4),
                "idle_hours_while_waiting": round(g.idle_waiting_h, 4),
            }
            for g in r.gpus
        ],
    }
