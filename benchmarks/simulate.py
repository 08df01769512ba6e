"""Placement quality: a discrete-event simulation over the real policy, most-available vs best-fit.

No processes: jobs have durations, time jumps from event to event (a job ends, another user's
memory changes). At every event the simulator does what the engine does: it reads the GPUs
through the real fake backend (``@FILE`` spec, rewritten as other users come and go, our
running jobs placed on it by the backend), builds the policy's inputs as the engine does
(candidates in queue order, allocations with the memory observed per GPU) and calls
``gtui.core.sched.policy.place``; the jobs it starts end ``duration`` later.

Figures per run: makespan (the last job's end), GPU-hours used by our jobs (integral over time
of the number of GPUs holding at least one of our jobs: what the queue takes from a shared
server), GPU-hours left whole (GPUs with nothing on them at all: what another user could
still take entirely), and the mean wait of a job before it starts.

Workloads, both in pack mode:
* the sample sweep (sample_queues/sweep.toml as written: 6 jobs x 12G on 4 x 24G with
  max_parallel 4, then a CPU summary after them), durations 7.5-10 min;
* a mixed workload on 8 x 80G: 1-, 2- and 4-GPU jobs (60 / 25 / 15 %) with 6-75G per GPU (a
  few with no ``mem``), 5-120 min each, while other users come and go (10-70G on one GPU for
  30 min to 6 h), in 10 seeded variants.

The same workloads also run through the real scheduler (:func:`simulate_engine`): an
``Engine`` on a queue file, with the in-memory executor (``gtui.core.exec.memory``) in place of
processes and the real clock compressed, to show that the executor interface is all the
scheduler needs and that the event simulation above is what the scheduler does.

    python -m benchmarks.simulate
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import Row, Section, median
from gtui.core.gpus.fake import FakeBackend
from gtui.core.gpus.snapshot import JobUsage
from gtui.core.model import Mode, Placement, Settings
from gtui.core.queue.queuefile import load_queue
from gtui.core.sched.policy import Allocation, Candidate, place

GIB = 1024
REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class SimJob:
    name: str
    gpus: int
    mem_mib: int | None
    duration_s: float
    priority: int = 0
    after: tuple[str, ...] = ()


@dataclass
class Result:
    makespan_s: float
    ours_gpu_h: float
    whole_free_gpu_h: float
    mean_wait_s: float
    unfinished: int = 0
    passes: int = 0
    starts_per_gpu: dict[int, int] = field(default_factory=dict)


def simulate(
    jobs: Sequence[SimJob],
    gpu_spec: str,
    settings: Settings,
    others: Sequence[tuple[float, str]] = (),
    horizon_s: float = 30 * 24 * 3600,
) -> Result:
    """Run ``jobs`` to the end on fake GPUs ``gpu_spec`` (``others``: (time, spec) changes of
    other users' memory, the spec as ``--fake-gpus`` takes it; the first applies from 0)."""
    changes = sorted(others) if others else [(0.0, gpu_spec)]
    with tempfile.TemporaryDirectory() as tmp:
        spec_file = Path(tmp) / "gpus.spec"
        spec_file.write_text(changes[0][1])
        backend = FakeBackend(f"@{spec_file}")
        return _run(jobs, settings, backend, spec_file, changes, horizon_s)


def _run(
    jobs: Sequence[SimJob],
    settings: Settings,
    backend: FakeBackend,
    spec_file: Path,
    changes: Sequence[tuple[float, str]],
    horizon_s: float,
) -> Result:
    order = {j.name: i for i, j in enumerate(jobs)}
    by_name = {j.name: j for j in jobs}
    state = {j.name: "queued" for j in jobs}
    running: dict[str, tuple[float, tuple[int, ...], int]] = {}  # name -> (end, gpus, pid)
    started_at: dict[str, float] = {}
    starts_per_gpu: dict[int, int] = {}
    t = 0.0
    next_change = 1
    last_end = 0.0
    ours_gpu_s = whole_free_s = 0.0
    passes = 0
    pid = 10_000_000
    while True:
        usage = [
            JobUsage(pid=p, gpus=g, mem_mib=by_name[n].mem_mib) for n, (_e, g, p) in running.items()
        ]
        snap = backend.read(usage)
        seen: dict[int, dict[int, int]] = {}
        for gpu in snap.gpus:
            for proc in gpu.processes:
                seen.setdefault(proc.pid, {})[gpu.index] = proc.mem_mib or 0
        allocations = [
            Allocation(n, g, by_name[n].mem_mib, seen.get(p, {}))
            for n, (_e, g, p) in running.items()
            if g
        ]
        candidates = [
            Candidate(j.name, j.gpus, j.mem_mib, j.priority, order[j.name], j.after, 0.0)
            for j in jobs
            if state[j.name] == "queued"
        ]
        decision = place(
            snap,
            candidates,
            allocations,
            settings,
            dep_states=state,
            running_count=len(running),
            now=t,
        )
        passes += 1
        for s in decision.starts:
            pid += 1
            job = by_name[s.name]
            running[s.name] = (t + job.duration_s, s.gpus, pid)
            state[s.name] = "running"
            started_at[s.name] = t
            for g in s.gpus:
                starts_per_gpu[g] = starts_per_gpu.get(g, 0) + 1
        # Jobs whose `after` failed never run here (nothing fails); waiting ones wait on.
        next_end = min((e for e, _g, _p in running.values()), default=math.inf)
        next_t = min(next_end, changes[next_change][0] if next_change < len(changes) else math.inf)
        if next_t == math.inf or next_t > horizon_s:
            break
        # Integrate what the GPUs held over [t, next_t).
        snap = backend.read(
            [
                JobUsage(pid=p, gpus=g, mem_mib=by_name[n].mem_mib)
                for n, (_e, g, p) in running.items()
            ]
        )
        ours = {g for _e, gs, _p in running.values() for g in gs}
        whole = sum(1 for g in snap.gpus if g.index not in ours and (g.mem_used_mib or 0) == 0)
        ours_gpu_s += len(ours) * (next_t - t)
        whole_free_s += whole * (next_t - t)
        t = next_t
        for name in [n for n, (e, _g, _p) in running.items() if e <= t]:
            del running[name]
            state[name] = "done"
            last_end = t
        while next_change < len(changes) and changes[next_change][0] <= t:
            spec_file.write_text(changes[next_change][1])
            next_change += 1
        if not running and all(s != "queued" for s in state.values()):
            break
    waits = [started_at[n] for n in started_at]
    return Result(
        makespan_s=last_end,
        ours_gpu_h=ours_gpu_s / 3600,
        whole_free_gpu_h=whole_free_s / 3600,
        mean_wait_s=sum(waits) / len(waits) if waits else 0.0,
        unfinished=sum(1 for s in state.values() if s != "done"),
        passes=passes,
        starts_per_gpu=starts_per_gpu,
    )


# -- the same, through the real scheduler ---------------------------------------------------


def simulate_engine(
    jobs: Sequence[SimJob],
    gpu_spec: str,
    settings: Settings,
    others: Sequence[tuple[float, str]] = (),
    *,
    real_s_per_sim_s: float = 1e-4,
    timeout_s: float = 600.0,
) -> Result:
    """:func:`simulate` through the real scheduler: an ``Engine`` reading a real queue file,
    its planner, the real fake-GPU backend (an ``@FILE`` spec rewritten as other users come
    and go) and the in-memory executor (``gtui.core.exec.memory``), whose jobs are timers of
    ``duration * real_s_per_sim_s`` real seconds. Nothing here touches a process: that the
    engine runs a whole queue this way is what shows the executor interface is enough. Time is
    the real clock, compressed, so the figures carry the engine's own latency (a few ms per
    start, i.e. ``ms / real_s_per_sim_s`` simulated seconds)."""
    return asyncio.run(_run_engine(jobs, gpu_spec, settings, others, real_s_per_sim_s, timeout_s))


def _queue_text(jobs: Sequence[SimJob], settings: Settings, poll_s: float, scale: float) -> str:
    lines = [
        "[settings]",
        f'mode = "{settings.mode.value}"',
        f'placement = "{settings.placement.value}"',
        f"max_parallel = {settings.max_parallel}",
        f"reserve = {settings.reserve}",
        f'poll = "{poll_s:.6f}s"',
        # The scheduler's clocks are real: every duration it keeps is compressed too.
        f'starve_after = "{settings.starve_after_s * scale:.6f}s"',
        "",
    ]
    for j in jobs:
        lines += ["[[jobs]]", f'name = "{j.name}"', 'cmd = "true"', f"gpus = {j.gpus}"]
        if j.mem_mib is not None:
            lines.append(f'mem = "{j.mem_mib}M"')
        if j.priority:
            lines.append(f"priority = {j.priority}")
        if j.after:
            lines.append("after = [" + ", ".join(f'"{a}"' for a in j.after) + "]")
        lines.append("")
    return "\n".join(lines)


async def _run_engine(
    jobs: Sequence[SimJob],
    gpu_spec: str,
    settings: Settings,
    others: Sequence[tuple[float, str]],
    scale: float,
    timeout_s: float,
) -> Result:
    from gtui.core.api import Event, JobChanged
    from gtui.core.exec.base import LaunchRequest
    from gtui.core.exec.memory import MemoryExecutor, Script
    from gtui.core.model import JobState
    from gtui.core.sched.build import build_engine

    by_name = {j.name: j for j in jobs}
    changes = sorted(others) if others else [(0.0, gpu_spec)]
    loop = asyncio.get_running_loop()

    def program(req: LaunchRequest) -> Script:
        return Script(by_name[req.name].duration_s * scale)

    with tempfile.TemporaryDirectory(prefix="gtui-sim-") as tmp:
        root = Path(tmp)
        spec_file = root / "gpus.spec"
        spec_file.write_text(changes[0][1])
        # A poll every 2 simulated minutes (at least 5 real ms): other users' memory is seen
        # as the real scheduler would see it between job ends.
        poll_s = max(0.005, 120 * scale)
        queue = root / "q.toml"
        queue.write_text(_queue_text(jobs, settings, poll_s, scale))
        executor = MemoryExecutor(program)
        engine = build_engine(queue, fake_gpus=f"@{spec_file}", executor=executor, control=False)
        started: dict[str, float] = {}
        starts_per_gpu: dict[int, int] = {}
        running: dict[str, tuple[int, ...]] = {}
        last_end = 0.0
        ours_s = 0.0
        mark = [0.0]  # when the set of GPUs holding our jobs last changed (loop time)
        t0 = loop.time()

        def on_event(event: Event) -> None:
            nonlocal last_end, ours_s
            if not isinstance(event, JobChanged):
                return
            rec = event.job.record
            now = loop.time()
            ours_s += len({g for gs in running.values() for g in gs}) * (now - mark[0])
            mark[0] = now
            if rec.state == JobState.RUNNING and rec.name not in running:
                running[rec.name] = tuple(rec.gpus)
                started.setdefault(rec.name, now - t0)
                for g in rec.gpus:
                    starts_per_gpu[g] = starts_per_gpu.get(g, 0) + 1
            elif rec.state != JobState.RUNNING and rec.name in running:
                del running[rec.name]
                last_end = max(last_end, now - t0)

        engine.subscribe(on_event, {JobChanged})

        async def other_users() -> None:
            for when, spec in changes[1:]:
                await asyncio.sleep(max(0.0, t0 + when * scale - loop.time()))
                spec_file.write_text(spec)

        users = asyncio.create_task(other_users())
        try:
            await asyncio.wait_for(engine.run(exit_when_idle=True), timeout_s)
        finally:
            users.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await users
            await engine.shutdown()
        states = {v.spec.name: v.record.state for v in engine.jobs()}
    waits = [s / scale for s in started.values()]
    return Result(
        makespan_s=last_end / scale,
        ours_gpu_h=ours_s / scale / 3600,
        whole_free_gpu_h=math.nan,  # not followed here (it needs every reading of the GPUs)
        mean_wait_s=sum(waits) / len(waits) if waits else 0.0,
        unfinished=sum(1 for s in states.values() if s != JobState.DONE),
        passes=0,
        starts_per_gpu=starts_per_gpu,
    )


# -- workloads ------------------------------------------------------------------------------


def sample_sweep() -> tuple[list[SimJob], str, Settings]:
    """sample_queues/sweep.toml as written, in pack mode; durations 7.5-10 min."""
    qf = load_queue(REPO / "sample_queues" / "sweep.toml")
    jobs = []
    for i, spec in enumerate(qf.jobs):
        minutes = 0.5 if spec.gpus == 0 else 7.5 + 0.5 * i
        jobs.append(
            SimJob(spec.name, spec.gpus, spec.mem_mib, minutes * 60, spec.priority, spec.after)
        )
    settings = dataclasses.replace(qf.settings, mode=Mode.PACK)
    return jobs, qf.settings.fake_gpus or "4x24G", settings


def mixed(
    seed: int, n_jobs: int = 150, gpus: int = 8
) -> tuple[list[SimJob], list[tuple[float, str]]]:
    """1-, 2- and 4-GPU jobs of varied memory and length; other users come and go."""
    rng = random.Random(seed)
    jobs = []
    for i in range(n_jobs):
        kind = rng.random()
        if kind < 0.60:
            n, mem = 1, rng.choice([6, 10, 12, 16, 20, 24, 32, 40, 60, 75, None])
        elif kind < 0.85:
            n, mem = 2, rng.choice([20, 30, 40, 60, 70])
        else:
            n, mem = 4, rng.choice([30, 40, 60, 75])
        minutes = min(120.0, max(5.0, rng.lognormvariate(math.log(25), 0.7)))
        jobs.append(SimJob(f"m{i:03d}", n, None if mem is None else mem * GIB, minutes * 60))
    # Other users: each change sets one GPU's foreign memory; they come and go for 48 h.
    used = [0] * gpus
    changes: list[tuple[float, str]] = [(0.0, _spec(used))]
    events: list[tuple[float, int, int]] = []
    t = 0.0
    while t < 48 * 3600:
        t += rng.expovariate(1 / 1800)  # someone arrives every 30 min on average
        g = rng.randrange(gpus)
        mem = rng.choice([10, 20, 30, 40, 50, 70])
        stay = rng.uniform(0.5, 6) * 3600
        events.append((t, g, mem))
        events.append((t + stay, g, -mem))
    for when, g, delta in sorted(events):
        used[g] = max(0, min(80, used[g] + delta))
        changes.append((when, _spec(used)))
    return jobs, changes


def _spec(used: Sequence[int]) -> str:
    return ",".join(f"80G:{u}G" if u else "80G" for u in used)


# -- the section ----------------------------------------------------------------------------


def compare(
    jobs: Sequence[SimJob], spec: str, settings: Settings, others: Sequence[tuple[float, str]] = ()
) -> dict[str, Result]:
    return {
        p.value: simulate(jobs, spec, dataclasses.replace(settings, placement=p), others)
        for p in (Placement.MOST_AVAILABLE, Placement.BEST_FIT)
    }


def run(quick: bool) -> Section:
    seeds = range(4) if quick else range(10)
    jobs, spec, settings = sample_sweep()
    sweep = compare(jobs, spec, settings)
    mixed_runs = []
    for seed in seeds:
        m_jobs, others = mixed(seed)
        pack = Settings(mode=Mode.PACK, poll_s=2.0)
        mixed_runs.append(compare(m_jobs, f"{8}x80G", pack, others))
    ma, bf = Placement.MOST_AVAILABLE.value, Placement.BEST_FIT.value

    def ratio(key: str) -> float:
        return median([getattr(r[bf], key) / max(1e-9, getattr(r[ma], key)) for r in mixed_runs])

    def mm(key: str, p: str) -> float:
        return median([getattr(r[p], key) for r in mixed_runs])

    wins = sum(1 for r in mixed_runs if r[bf].makespan_s < r[ma].makespan_s - 1)
    losses = sum(1 for r in mixed_runs if r[bf].makespan_s > r[ma].makespan_s + 1)
    section = Section(
        title="Placement quality: most-available-first vs best-fit (pack mode)",
        method=(
            "A discrete-event simulation (benchmarks/simulate.py) over the real policy "
            "(`gtui.core.sched.policy.place`) and the real fake-GPU backend (an `@FILE` spec "
            "rewritten "
            "as other users come and go): no processes, jobs have durations, and at every job "
            "end or change of other users' memory the simulator builds the policy's inputs as "
            "the engine does and starts what the policy starts. GPU-hours used = the integral "
            "of the number of GPUs holding at least one of our jobs (what the queue takes from "
            "the server); whole GPU-hours left = GPUs with nothing on them at all. Sample sweep: "
            "sample_queues/sweep.toml as written (4 x 24G, max_parallel 4) in pack mode, jobs "
            "of 7.5-10 min. Mixed: 150 jobs on 8 x 80G, 1/2/4 GPUs (60/25/15 %), 6-75G per GPU "
            "(some with no `mem`), 5-120 min, other users arriving every 30 min on average "
            f"with 10-70G on one GPU for 0.5-6 h; {len(seeds)} seeds, medians; deterministic. "
            "The same workloads then run through the real scheduler (`Engine` on a queue "
            "file, the in-memory executor `gtui.core.exec.memory`, no process): jobs are "
            "timers of duration x 1e-3 (sweep) or x 5e-5 (mixed) real seconds, and poll and "
            "starve_after are compressed alike; its makespan beside the simulation's shows "
            "that the executor interface is all the scheduler needs."
        ),
    )
    # The same workloads through the real scheduler on the in-memory executor.
    engine_seeds = range(1) if quick else range(3)
    via_engine = {
        "sweep": (simulate_engine(jobs, spec, settings, real_s_per_sim_s=1e-3), sweep[bf]),
    }
    for seed in engine_seeds:
        m_jobs, others = mixed(seed)
        pack = dataclasses.replace(
            Settings(mode=Mode.PACK, poll_s=2.0), placement=Placement.BEST_FIT
        )
        via_engine[f"mixed seed {seed}"] = (
            simulate_engine(m_jobs, "8x80G", pack, others, real_s_per_sim_s=5e-5),
            mixed_runs[seed][bf],
        )
    spans = [e.makespan_s / max(1e-9, s.makespan_s) for e, s in via_engine.values()]
    unfinished = sum(e.unfinished for e, _s in via_engine.values())
    section.rows = [
        Row(
            f"the same workloads through the real scheduler on the in-memory executor "
            f"(sweep + {len(engine_seeds)} mixed seed(s), best-fit)",
            "every job runs; makespan as the event simulation's",
            f"makespan x{min(spans):.3f}-x{max(spans):.3f} the event simulation's; "
            f"{unfinished} job(s) unfinished",
            "Engine + MemoryExecutor + fake GPUs, real clock compressed (the engine's ms per "
            "start show as simulated seconds)",
            unfinished == 0,
        ),
        Row(
            "sample sweep (pack): makespan / GPU-hours used, best-fit vs most-available",
            "the better one is the default",
            f"{sweep[bf].makespan_s / 60:.1f} min / {sweep[bf].ours_gpu_h:.2f} GPU-h",
            f"most-available {sweep[ma].makespan_s / 60:.1f} min / "
            f"{sweep[ma].ours_gpu_h:.2f} GPU-h",
            None,
        ),
        Row(
            f"mixed workload, {len(seeds)} seeds (pack): makespan / GPU-hours used, best-fit "
            "vs most-available",
            "the better one is the default",
            f"best-fit x{ratio('makespan_s'):.3f} makespan / x{ratio('ours_gpu_h'):.3f} "
            f"GPU-h (median of per-seed ratios)",
            f"most-available: median {mm('makespan_s', ma) / 3600:.2f} h / "
            f"{mm('ours_gpu_h', ma):.1f} GPU-h; best-fit shorter in {wins}, longer in "
            f"{losses} of {len(seeds)}",
            None,
        ),
    ]
    figures: dict[str, Any] = {}
    for p in (ma, bf):
        r = sweep[p]
        figures[f"sweep, {p}"] = (
            f"makespan {r.makespan_s / 60:.1f} min, GPU-h used {r.ours_gpu_h:.2f}, whole "
            f"GPU-h left {r.whole_free_gpu_h:.2f}, mean wait {r.mean_wait_s / 60:.1f} min"
        )
    for i, r in enumerate(mixed_runs):
        for p in (ma, bf):
            x = r[p]
            figures[f"mixed seed {i}, {p}"] = (
                f"makespan {x.makespan_s / 3600:.2f} h, GPU-h used {x.ours_gpu_h:.1f}, whole "
                f"GPU-h left {x.whole_free_gpu_h:.1f}, mean wait {x.mean_wait_s / 60:.0f} min"
                + (f", {x.unfinished} unfinished" if x.unfinished else "")
            )
    figures["mixed, best-fit / most-available, median"] = (
        f"makespan x{ratio('makespan_s'):.3f}, GPU-h used x{ratio('ours_gpu_h'):.3f}, whole "
        f"GPU-h left x{ratio('whole_free_gpu_h'):.3f}, mean wait x{ratio('mean_wait_s'):.3f}"
    )
    for label, (e, sim) in via_engine.items():
        figures[f"through the engine, {label}"] = (
            f"makespan {e.makespan_s / 3600:.2f} h (event simulation {sim.makespan_s / 3600:.2f} "
            f"h), GPU-h used {e.ours_gpu_h:.2f} ({sim.ours_gpu_h:.2f}), mean wait "
            f"{e.mean_wait_s / 60:.0f} min ({sim.mean_wait_s / 60:.0f}), "
            f"{e.unfinished} unfinished"
        )
    section.figures = figures
    return section


if __name__ == "__main__":
    s = run(quick=False)
    for row in s.rows:
        print(row)
    for k, v in s.figures.items():
        print(f"{k}: {v}")
