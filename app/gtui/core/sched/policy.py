"""The placement policy: one pure function, used by the engine, the tests, the simulator and the UI.

``place``: snapshot + waiting jobs + our allocations + settings in; which jobs start on which
GPUs, and a reason a person can act on for every job that waits, out. No I/O, no clock, no
randomness. ``walk`` below applies the rules, in this order:

1. Rank the waiting jobs: priority (higher first), then queue order. With
   ``multi_gpu_first``, the GPUs a job needs come first (more first).
2. A paused queue starts nothing: each job waits "queue paused" ("held by you" if held).
3. Walk the jobs in rank order. A held job waits "held by you"; a job whose ``after`` jobs
   are not all done waits for them.
4. Once ``max_parallel`` jobs of ours run (0: no limit; CPU jobs count), nothing more starts:
   each later job waits "max_parallel N reached", or why it can never start (rule 6).
   Then (rule 11) a job whose group is at its own cap waits.
5. A job that needs no GPU starts.
6. A job this pool can never run (more GPUs than the pool or its widest node, ``mem`` above
   what enough GPUs hold, more GPUs than the reserve ever leaves) waits, saying so.
7. Otherwise the job starts if enough GPUs are eligible for it now, within the reserve and
   leaving the starving job's GPUs alone (rule 8); it takes them in placement order.
   Else it waits, and its reason names each GPU that is not eligible and why. A job that
   cannot start does not block later ones (backfill).
8. The first job that waits for GPUs (rule 7) starves once it has waited longer than
   ``starve_after_s``: no later job may take a GPU it could use, now or (pack mode) once our
   jobs on it end.
9. In pack mode with a reserve, a start on a GPU free of our jobs can make room for a job
   that failed before it (the reserve does not limit GPUs that hold our jobs): then the
   jobs still waiting are walked again, protecting the same starving job, so nothing that
   could start waits for the next poll.
10. Host cores and memory (``cpus``, ``ram``; hostfit.py): a job that asks some and that
   rule 5 or 7 would start starts only if the host has them free now; else it waits, naming
   the resource and who holds it ("needs 8 cores: 6 free (train-a 16, bob's eval 8)"), or
   why the host can never run it. A job that asks neither is not counted. Such a wait does
   not starve (rule 8 keeps GPUs).
11. A job whose group (``[groups.NAME]``) has ``max_parallel`` jobs of ours running waits
    "group NAME: N of N running" (or why it can never start, rule 6), checked right after
    rule 4; each start in the pass counts. Jobs outside the group go on. A queue with such a
    cap is walked by ``walk`` alone (the column walk knows no groups). A group's
    ``priority`` adds to its jobs' own in rule 1.

The terms (applied in policy_state.py):

- Pool: ``gpus`` ("all" or a list) minus ``exclude`` and the quarantine, minus lost GPUs and
  GPUs whose memory the driver does not report.
- ``available = total - used - sum over our jobs on it of max(0, declared - observed)``; a job of
  ours with no ``mem`` declares the whole GPU. Neighbours' claims (gpus/claims) count the same
  way; a GPU with one is not idle; a wait they cause names user and job.
- *Idle*: utilization 0 % (unknown counts as 0 %, so the memory test alone decides) and used
  memory under 3 % of total.
- Eligible: exclusive: no job of ours, idle, and (with ``mem``) ``available >= mem``.
  shared: no job of ours and ``available >= mem``. pack: ``available >= mem`` even beside jobs
  of ours, never beside a job of ours that has no ``mem``. A job with no ``mem`` needs its
  GPUs to itself in every mode: no job of ours and idle.
- Reserve: of the n eligible GPUs free of our jobs, ``reserve_allows(n, k, rule)`` may be
  taken (``strict``: n - k; ``seed``, the bash script's table for imported queues, also lets
  one be taken when n == k); each start changes n for the next job.
- Placement order: most available memory first (ties: lower index), or the least that still
  fits with ``Placement.BEST_FIT``; ``Placement.AUTO`` is best fit in pack mode.

Speed: ``walk`` asks every job in turn. From ``FAST_FROM`` waiting jobs ``place`` uses
``policy_fast.walk_columns`` instead, which gives the same answer
(tests/core/sched/test_policy_fast.py holds it to ``walk``) while looking only at the first
job of each request shape since the GPUs last changed: one pass over 100k waiting jobs on
8 GPUs within about 50 ms. A pass with a read host and a job that asks host cores or memory
takes ``walk`` whatever its length (rule 10 is the readable walk's alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gtui.core.gpus.claims import NeighbourClaim
from gtui.core.gpus.snapshot import GpuSnapshot, HostInfo
from gtui.core.gpus.snapshot import pool_totals as snapshot_pool_totals
from gtui.core.model import Settings
from gtui.core.sched.hostfit import HostHolder
from gtui.core.sched.policy_fast import walk_columns
from gtui.core.sched.policy_reasons import Reasons
from gtui.core.sched.policy_state import (
    IDLE_USED_PERCENT,
    PassState,
    chosen,
    excluded,
    format_wait,
    gpu_names,
    pool_of,
    rank,
    reserve_allows,
)
from gtui.core.sched.policy_types import (
    HELD_REASON,
    PAUSED_REASON,
    Allocation,
    Candidate,
    Decision,
    Start,
)

__all__ = [
    "FAST_FROM",
    "HELD_REASON",
    "IDLE_USED_PERCENT",
    "PAUSED_REASON",
    "Allocation",
    "Candidate",
    "Decision",
    "PassState",
    "Reasons",
    "Start",
    "chosen",
    "excluded",
    "format_wait",
    "gpu_names",
    "place",
    "pool_totals",
    "reserve_allows",
    "walk",
]

# Waiting jobs from which ``place`` takes the column walk. ``walk`` costs a few microseconds a
# job, 1.5-4x the column walk from 1,000 jobs on (A/B on benchmarks/placement.py's queues), so
# it decides the everyday queues of tens to hundreds of jobs, where that is well under 1 ms.
FAST_FROM = 256


def place(
    snapshot: GpuSnapshot,
    candidates: Sequence[Candidate],
    allocations: Sequence[Allocation],
    settings: Settings,
    *,
    dep_states: Mapping[str, str],
    running_count: int,
    now: float,
    queue_paused: bool = False,
    claims: Sequence[NeighbourClaim] = (),
    host: HostInfo | None = None,
    host_claims: Sequence[HostHolder] = (),
    group_running: Mapping[str, int] | None = None,
) -> Decision:
    """One placement pass: which candidates start on which GPUs, and why each other one waits.
    ``claims``: neighbours' live claims on our GPUs; ``host``: the host's cores and memory
    (None: not read, not counted), ``host_claims``: neighbours' claims of them;
    ``group_running``: our running jobs in each group (rule 11)."""
    state = PassState(
        snapshot,
        allocations,
        settings,
        now,
        claims=claims,
        host=host,
        host_claims=host_claims,
        group_running=group_running,
    )
    fast = len(candidates) >= FAST_FROM and not state.groups.limits  # 11: walk alone
    if fast and host is not None and any(c.asks_host for c in candidates):
        fast = False  # rule 10 is the readable walk's
    walker = walk_columns if fast else walk
    return walker(state, candidates, dep_states, running_count, queue_paused)


def pool_totals(settings: Settings, snapshot: GpuSnapshot) -> list[int | None] | None:
    """Total memory of each GPU in the pool, for the queue file's pool checks (None: unknown):
    on a cluster by this module's rule of numbers and node names, else the snapshot's own."""
    if not any(g.node is not None for g in snapshot.gpus):
        return snapshot_pool_totals(settings, snapshot)
    pool, _ = pool_of(snapshot, settings)
    return [total for _, total, _ in pool]


def walk(
    state: PassState,
    candidates: Sequence[Candidate],
    dep_states: Mapping[str, str],
    running_count: int,
    queue_paused: bool,
) -> Decision:
    """The rules of the module docstring, one job at a time (rules 1, 2 and 9 here, the others
    in ``_sweep``)."""
    ranked = rank(candidates, state.settings)  # 1
    if queue_paused:  # 2
        paused = {c.name: HELD_REASON if c.held else PAUSED_REASON for c in ranked}
        return state.decision([], paused, None)
    state.dep_states = dep_states
    texts: list[str | None] = [None] * len(ranked)  # by rank position; None: it started
    waiting = list(range(len(ranked)))
    starts: list[Start] = []
    first = True
    while True:
        new, probe, again = _sweep(
            state, ranked, waiting, texts, running_count + len(starts), first
        )
        starts += new
        if not again:
            return state.decision(starts, Reasons(ranked, texts, nones=len(starts)), probe)
        first = False  # 9: walk the jobs still waiting again
        started = {s.name for s in new}
        waiting = [i for i in waiting if ranked[i].name not in started]


def _sweep(
    state: PassState,
    ranked: list[Candidate],
    waiting: list[int],
    texts: list[str | None],
    running: int,
    first: bool,
) -> tuple[list[Start], int | None, bool]:
    """Rules 3-8 and 10 over the jobs at ``waiting`` (rank positions, in order): writes each one's
    reason into ``texts`` and returns (starts, the least ``mem`` among the jobs that wait for
    GPUs, walk again?). Only the first sweep picks the starving job; a later one protects the
    same job again once it reaches it."""
    limit = max(0, state.settings.max_parallel)
    full_text = f"max_parallel {limit} reached"
    full = bool(limit) and running >= limit
    cut = False  # a job came after the limit was reached: no walking again
    target = None if first else state.starving
    state.begin_sweep()
    first_blocked = first
    failed = made_room = False
    probe: int | None = None
    starts: list[Start] = []
    for i in waiting:
        c = ranked[i]
        if c.held:  # 3
            texts[i] = HELD_REASON
            continue
        unmet = state.after_reason(c.after) if c.after else None
        if unmet:
            texts[i] = unmet
            continue
        n, m = c.gpus, c.mem_mib
        if full:  # 4
            cut = True
            texts[i] = (state.permanent_reason(n, m) if n > 0 else None) or full_text
            continue
        host = state.host if c.cpus or c.ram_mib else None
        if host is not None:  # 10: what can never fit first, then what is short now
            short = host.never(c.cpus, c.ram_mib)
            if short is None and (n <= 0 or state.permanent_reason(n, m) is None):
                short = host.short(c.cpus, c.ram_mib)
            if short is not None:
                texts[i] = short
                continue
        capped = state.groups.full(c.group) if c.group is not None else None  # 11
        if capped:
            texts[i] = (state.permanent_reason(n, m) if n > 0 else None) or capped
            continue
        if n <= 0:  # 5
            if host is not None:
                host.take(c.name, c.cpus, c.ram_mib)
            starts.append(Start(c.name, ()))
            texts[i] = None
            running += 1
            full = bool(limit) and running >= limit
            state.groups.started(c.group)
            continue
        never = state.permanent_reason(n, m)  # 6
        if never is not None:
            texts[i] = never
            continue
        gpus, room = state.start(n, m)  # 7
        if gpus is not None:
            if host is not None:
                host.take(c.name, c.cpus, c.ram_mib)
            starts.append(Start(c.name, gpus))
            texts[i] = None
            running += 1
            full = bool(limit) and running >= limit
            state.groups.started(c.group)
            made_room = made_room or (room and failed)  # 9
            continue
        failed = True
        if m is not None and (probe is None or m < probe):
            probe = m
        reason = state.reason_for(n, m, bool(state.protected))
        if first_blocked or c.name == target:  # 8
            first_blocked = False
            waited = state.now - c.waiting_since
            if waited > state.settings.starve_after_s or c.name == target:
                reason += state.starve(c, waited)
                state.changed()  # later reasons now name the starving job
        texts[i] = reason
    return starts, probe, made_room and not cut
