"""Properties of the placement policy over random GPUs, jobs and settings (hypothesis).

The checks below re-derive the placement rules of docs/scheduling.md (eligibility, reserve, order) independently (a small, slow oracle)
and replay each decision's starts in order against them. ``HYPOTHESIS_PROFILE=soak`` runs many
more examples than CI does.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gtui.core.gpus.snapshot import GpuInfo, GpuSnapshot, HostInfo
from gtui.core.model import Mode, Placement, Settings
from gtui.core.sched.hostfit import HostHolder
from gtui.core.sched.policy import Allocation, Candidate, Decision, PassState, place, walk

G = 1024

settings.register_profile(
    "policy-ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "soak", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
PROFILE = settings.get_profile(
    "soak" if os.environ.get("HYPOTHESIS_PROFILE") == "soak" else "policy-ci"
)


@dataclass(frozen=True)
class World:
    snapshot: GpuSnapshot
    candidates: tuple[Candidate, ...]
    allocations: tuple[Allocation, ...]
    settings: Settings
    dep_states: dict[str, str]
    running_count: int
    now: float
    paused: bool

    def decide(
        self, host: HostInfo | None = None, host_claims: tuple[HostHolder, ...] = ()
    ) -> Decision:
        """The policy's decision on this world, on ``host`` (None: not read) with neighbours'
        ``host_claims`` of its cores and memory."""
        return place(
            self.snapshot,
            self.candidates,
            self.allocations,
            self.settings,
            dep_states=self.dep_states,
            running_count=self.running_count,
            now=self.now,
            queue_paused=self.paused,
            host=host,
            host_claims=host_claims,
        )


# Hypothesis favours the first element of a list and the ends of a range: lists below put the
# common case first and repeat what should come often.
MEMS = st.one_of(
    st.sampled_from([12 * G, 5 * G, 20 * G, None, 35 * G, 1 * G, 40 * G, 70 * G, 90 * G]),
    st.integers(1, 80 * G),
)


def sometimes(one_in: int) -> st.SearchStrategy[bool]:
    """True about once in ``one_in`` draws."""
    return st.sampled_from([False] * (one_in - 1) + [True])


@st.composite
def worlds(draw: st.DrawFn) -> World:
    n_gpus = draw(st.sampled_from([4, 2, 1, 3, 6, 0, 8]))
    others = []
    totals = []
    for _ in range(n_gpus):
        total = draw(st.sampled_from([16, 24, 40, 80])) * G
        totals.append(total)
        others.append(draw(st.sampled_from([0, 0, 0, 1, 2, 16, 30, 60])) * G * total // (80 * G))
    # Our running jobs (allocations), not necessarily following the mode's rules.
    allocations = []
    observed_on = [0] * n_gpus
    for a in range(draw(st.integers(0, 4)) if n_gpus else 0):
        k = draw(st.integers(1, min(2, n_gpus)))
        gpus = tuple(sorted(draw(st.sets(st.integers(0, n_gpus - 1), min_size=k, max_size=k))))
        mem = draw(MEMS)
        observed = {}
        for i in gpus:
            seen = draw(st.sampled_from([0, 0, 1, 4, 12, 30])) * G
            if seen:
                observed[i] = seen
                observed_on[i] += seen
        allocations.append(Allocation(f"run{a}", gpus, mem, observed))
    infos = []
    for i in range(n_gpus):
        lost = draw(sometimes(10))
        unknown = draw(sometimes(15))
        util = draw(st.sampled_from([0, 0, 0, 5, 50, None]))
        infos.append(
            GpuInfo(
                index=i,
                name="A800",
                uuid=f"GPU-{i}",
                mem_total_mib=None if unknown else totals[i],
                # consistent: used = other users + what our jobs were seen to use
                mem_used_mib=None if unknown else others[i] + observed_on[i],
                util=util,
                temperature=40,
                lost=lost,
            )
        )
    names = [f"j{i}" for i in range(draw(st.sampled_from([8, 3, 14, 1, 0, 20])))]
    dep_states = {
        d: draw(st.sampled_from(["done", "done", "running", "failed", "queued"]))
        for d in ("prep", "fetch")
    }
    for n in names[:3]:
        dep_states[n] = "queued"
    now = 10_000.0
    orders = draw(st.permutations(range(len(names))))
    candidates = []
    for name, order in zip(names, orders, strict=True):
        candidates.append(
            Candidate(
                name=name,
                gpus=draw(st.sampled_from([1, 1, 1, 2, 0, 3])),
                mem_mib=draw(MEMS),
                priority=draw(st.sampled_from([0, 0, 1, 2])),
                order=order,
                after=draw(st.sampled_from([(), (), (), ("prep",), ("fetch", "j0"), ("j1",)])),
                waiting_since=now - draw(st.sampled_from([0, 100, 700, 5000])),
                held=draw(sometimes(8)),
            )
        )
    pool_choice = draw(st.sampled_from(["all", "some"]))
    pool: str | tuple[int, ...] = (
        "all"
        if pool_choice == "all" or not n_gpus
        else tuple(sorted(draw(st.sets(st.integers(0, n_gpus), min_size=1))))
    )
    exclude = tuple(sorted(draw(st.sets(st.integers(0, max(0, n_gpus - 1)), max_size=1))))
    s = Settings(
        gpus=pool,  # type: ignore[arg-type]
        exclude=exclude if n_gpus and draw(st.booleans()) else (),
        reserve=draw(st.sampled_from([0, 0, 1, 2, 3])),
        reserve_rule=draw(st.sampled_from(["strict", "seed"])),
        mode=draw(st.sampled_from([Mode.PACK, Mode.SHARED, Mode.PACK, Mode.EXCLUSIVE])),
        placement=draw(st.sampled_from(list(Placement))),
        max_parallel=draw(st.sampled_from([0, 0, 0, 4, 1, 2])),
        starve_after_s=draw(st.sampled_from([600.0, 600.0, 60.0, float("inf")])),
        multi_gpu_first=draw(st.booleans()),
    )
    return World(
        snapshot=GpuSnapshot(gpus=tuple(infos), taken_at=now, source="fake"),
        candidates=tuple(candidates),
        allocations=tuple(allocations),
        settings=s,
        dep_states=dep_states,
        running_count=len(allocations) + draw(st.integers(0, 2)),
        now=now,
        paused=draw(sometimes(10)),
    )


# ------------------------------------------------------------ the oracle (which GPU may take a job)
@dataclass
class OGpu:
    index: int
    total: int
    used: int
    util: int | None
    others: int  # used minus what our jobs were seen to use
    declared: int  # sum of what our jobs on it declared (None = the whole GPU)
    pending: int  # sum over our jobs of max(0, declared - observed)
    jobs: int
    whole: bool

    @property
    def available(self) -> int:
        return self.total - self.used - self.pending

    @property
    def idle(self) -> bool:
        return (self.util or 0) == 0 and self.used * 100 < 3 * self.total


def oracle_pool(w: World) -> dict[int, OGpu]:
    s = w.settings
    pool = {}
    for info in w.snapshot.gpus:
        if s.gpus != "all" and info.index not in s.gpus:
            continue
        if info.index in s.exclude or info.lost:
            continue
        if info.mem_total_mib is None or info.mem_used_mib is None:
            continue
        pool[info.index] = OGpu(
            info.index,
            info.mem_total_mib,
            info.mem_used_mib,
            info.util,
            info.mem_used_mib,
            0,
            0,
            0,
            False,
        )
    for a in w.allocations:
        for i in a.gpus:
            if i not in pool:
                continue
            g = pool[i]
            declared = g.total if a.mem_mib is None else a.mem_mib
            seen = a.observed_mib.get(i, 0)
            g.others -= seen
            g.declared += declared
            g.pending += max(0, declared - seen)
            g.jobs += 1
            g.whole = g.whole or a.mem_mib is None
    return pool


def eligible(g: OGpu, mem: int | None, mode: Mode) -> bool:
    if mem is None:
        return g.jobs == 0 and g.idle
    if mode == Mode.EXCLUSIVE:
        return g.jobs == 0 and g.idle and g.available >= mem
    if mode == Mode.SHARED:
        return g.jobs == 0 and g.available >= mem
    return not g.whole and g.available >= mem


def allows(n: int, k: int, rule: str) -> int:
    """The reserve rule written out again: strict keeps k free; the bash script's rule
    (``reserve_rule = "seed"``) takes one when n == k."""
    if rule == "seed":
        if n < k:
            return 0
        return 1 if n == k and n > 0 else n - k
    return n - k if n > k else 0


def fits_now(pool: dict[int, OGpu], c: Candidate, s: Settings) -> bool:
    elig = [g for g in pool.values() if eligible(g, c.mem_mib, s.mode)]
    free = sum(1 for g in elig if g.jobs == 0)
    return len(elig) - free + min(free, allows(free, s.reserve, s.reserve_rule)) >= c.gpus


# --------------------------------------------------------------------------------- properties
@PROFILE
@given(worlds())
def test_every_decision_obeys_the_rules(w: World) -> None:
    """One generated world, every invariant of one decision (cheaper than a world per check)."""
    d = w.decide()
    check_starts_replayed_in_order(w, d)
    check_limits_held_paused_and_reasons(w, d)
    check_starving_job_not_overtaken(w, d)


def check_starts_replayed_in_order(w: World, d: Decision) -> None:
    """Each start, replayed in order on an independent model: eligible GPUs in the pool, the
    reserve kept, no two of our jobs on a GPU outside pack mode, never more memory promised than
    the GPU has beside other users, a job's ``after`` done, never a held job."""
    s = w.settings
    pool = oracle_pool(w)
    by_name = {c.name: c for c in w.candidates}
    for start in d.starts:
        c = by_name[start.name]
        assert not c.held
        assert all(w.dep_states.get(a) == "done" for a in c.after)
        assert len(start.gpus) == c.gpus == len(set(start.gpus))
        if not c.gpus:
            continue
        assert set(start.gpus) <= set(pool), "a GPU outside the pool"
        elig = {g.index for g in pool.values() if eligible(g, c.mem_mib, s.mode)}
        assert set(start.gpus) <= elig, (start, s.mode)
        free = sum(1 for i in elig if pool[i].jobs == 0)
        taken_free = sum(1 for i in start.gpus if pool[i].jobs == 0)
        assert taken_free <= allows(free, s.reserve, s.reserve_rule), "reserve violated"
        for i in start.gpus:
            g = pool[i]
            if s.mode != Mode.PACK or c.mem_mib is None:
                assert g.jobs == 0, "two of our jobs on one GPU outside pack mode"
            assert not g.whole
            declared = g.total if c.mem_mib is None else c.mem_mib
            g.declared += declared
            g.pending += declared
            g.jobs += 1
            g.whole = g.whole or c.mem_mib is None
            if c.mem_mib is not None:
                assert g.declared <= g.total - g.others, "more memory promised than the GPU has"


def check_limits_held_paused_and_reasons(w: World, d: Decision) -> None:
    names = {c.name for c in w.candidates}
    started = [s.name for s in d.starts]
    assert len(started) == len(set(started))
    assert set(started) | set(d.reasons) == names
    assert not set(started) & set(d.reasons)
    assert all(isinstance(r, str) and r for r in d.reasons.values())
    held = {c.name for c in w.candidates if c.held}
    assert not held & set(started)
    assert all(d.reasons[n] == "held by you" for n in held)
    if w.paused:
        assert d.starts == ()
    limit = w.settings.max_parallel
    if limit:
        assert len(d.starts) <= max(0, limit - w.running_count)
    pool = oracle_pool(w)
    assert set(d.available_mib) == set(pool)
    assert set(d.reserved) <= set(pool)


@PROFILE
@given(worlds())
def test_backfill_leaves_no_waiting_job_that_could_start(w: World) -> None:
    """Resources only shrink in a pass: a job that waits for GPUs fits no better at the end.

    So, with no limit, no pause and no starvation guard, nothing that waits could start on what
    is left (the fast path that reuses a failed shape's verdict must never be wrong).
    """
    w = replace(
        w,
        paused=False,
        settings=replace(w.settings, max_parallel=0, starve_after_s=float("inf")),
    )
    d = w.decide()
    pool = oracle_pool(w)
    by_name = {c.name: c for c in w.candidates}
    for start in d.starts:
        for i in start.gpus:
            g = pool[i]
            mem = by_name[start.name].mem_mib
            g.pending += g.total if mem is None else mem
            g.jobs += 1
            g.whole = g.whole or mem is None
    for name in d.reasons:
        c = by_name[name]
        if c.held or any(w.dep_states.get(a) != "done" for a in c.after):
            continue
        assert c.gpus > 0
        assert not fits_now(pool, c, w.settings), (name, d.reasons[name])


@PROFILE
@given(worlds(), st.randoms(use_true_random=False))
def test_same_input_same_decision_and_the_shape_cache_changes_nothing(
    w: World, rnd: random.Random
) -> None:
    first = w.decide()
    assert w.decide() == first
    shuffled = list(w.candidates)
    rnd.shuffle(shuffled)
    assert replace(w, candidates=tuple(shuffled)).decide() == first
    state = PassState(w.snapshot, w.allocations, w.settings, w.now, shape_cache=False)
    slow = walk(state, w.candidates, w.dep_states, w.running_count, w.paused)
    assert slow == first


def check_starving_job_not_overtaken(w: World, d: Decision) -> None:
    """No job ranked after the starving one took a GPU the starving one could use."""
    if d.starving is None:
        return
    by_name = {c.name: c for c in w.candidates}
    starving = by_name[d.starving]
    assert d.starving in d.reasons and "starving" in d.reasons[d.starving]
    assert w.now - starving.waiting_since > w.settings.starve_after_s
    pool = oracle_pool(w)
    could_use = {g.index for g in pool.values() if eligible(g, starving.mem_mib, w.settings.mode)}
    key = (
        (lambda c: (-c.gpus, -c.priority, c.order))
        if w.settings.multi_gpu_first
        else (lambda c: (-c.priority, c.order))
    )
    for start in d.starts:
        c = by_name[start.name]
        if key(c) > key(starving):
            assert not set(start.gpus) & could_use, (start, d.reasons[d.starving])
