"""The placement policy, rule by rule (the numbered rules of sched/policy.py, and the bash
script's examples and reserve table it was written from).

Snapshots are built by hand, so every number in an assertion can be checked on paper.
Sizes in the helpers are GiB; the policy works in MiB.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from gtui.core.gpus.snapshot import GpuInfo, GpuSnapshot
from gtui.core.model import JobState, Placement, Settings
from gtui.core.sched.policy import (
    Allocation,
    Candidate,
    Decision,
    Start,
    format_wait,
    place,
    reserve_allows,
)

G = 1024


def gpu(
    index: int,
    total: float | None = 80,
    used: float | None = 0,
    util: int | None = 0,
    *,
    lost: bool = False,
) -> GpuInfo:
    return GpuInfo(
        index=index,
        name="A800",
        uuid=f"GPU-{index}",
        mem_total_mib=None if total is None else int(total * G),
        mem_used_mib=None if used is None else int(used * G),
        util=util,
        temperature=40,
        lost=lost,
    )


def snap(*gpus: GpuInfo, error: str | None = None) -> GpuSnapshot:
    return GpuSnapshot(gpus=tuple(gpus), taken_at=0.0, source="fake", error=error)


def job(name: str, gpus: int = 1, mem: float | None = 12, **kw: Any) -> Candidate:
    return Candidate(name=name, gpus=gpus, mem_mib=None if mem is None else int(mem * G), **kw)


def ours(
    name: str, gpus: Sequence[int], mem: float | None = 12, observed: float | None = None
) -> Allocation:
    """A running job of ours; ``observed`` GiB seen on each of its GPUs (default: none yet)."""
    seen = {} if observed is None else {i: int(observed * G) for i in gpus}
    return Allocation(
        name=name,
        gpus=tuple(gpus),
        mem_mib=None if mem is None else int(mem * G),
        observed_mib=seen,
    )


def decide(
    devices: GpuSnapshot | Sequence[GpuInfo],
    jobs: Sequence[Candidate],
    allocs: Sequence[Allocation] = (),
    /,
    *,
    deps: Mapping[str, str] | None = None,
    running: int | None = None,
    now: float = 0.0,
    paused: bool = False,
    **settings: Any,
) -> Decision:
    snapshot = devices if isinstance(devices, GpuSnapshot) else snap(*devices)
    return place(
        snapshot,
        jobs,
        allocs,
        Settings(**settings),
        dep_states=deps or {},
        running_count=len(allocs) if running is None else running,
        now=now,
        queue_paused=paused,
    )


def started(d: Decision) -> dict[str, tuple[int, ...]]:
    return {s.name: s.gpus for s in d.starts}


# ------------------------------------------------------------------------------- the pool
def test_pool_is_the_listed_gpus_minus_excluded() -> None:
    gpus = [gpu(i) for i in range(4)]
    d = decide(gpus, [job(f"j{i}") for i in range(4)], gpus=(0, 2, 3), exclude=(3,))
    assert sorted(started(d).values()) == [(0,), (2,)]
    assert set(d.available_mib) == {0, 2}
    assert d.reasons["j2"] == "needs 1 GPU with 12G: none eligible (GPU0,2 ours)"


def test_lost_gpus_and_gpus_with_unknown_memory_are_never_used() -> None:
    gpus = [gpu(0), gpu(1, lost=True), gpu(2, total=None, used=None), gpu(3)]
    d = decide(gpus, [job("big", gpus=3), job("a"), job("b"), job("c")])
    assert d.reasons["big"] == "needs 3 GPUs, pool has 2 (GPU1 lost, GPU2 memory unknown)"
    assert sorted(started(d).values()) == [(0,), (3,)]
    assert "GPU0,3 ours" in d.reasons["c"]


def test_a_listed_gpu_that_does_not_exist_is_named() -> None:
    d = decide([gpu(0)], [job("pair", gpus=2)], gpus=(0, 5))
    assert d.reasons["pair"] == "needs 2 GPUs, pool has 1 (GPU5 not found)"


def test_without_gpus_cpu_jobs_still_run_and_gpu_jobs_say_why() -> None:
    nothing = GpuSnapshot(gpus=(), taken_at=0.0, source="none", error="NVML: library not found")
    d = decide(nothing, [job("train"), job("prep", gpus=0, mem=None)])
    assert started(d) == {"prep": ()}
    assert d.reasons == {"train": "needs 1 GPU, pool has 0 (NVML: library not found)"}
    assert d.available_mib == {}


# ------------------------------------------------------------------------- available memory
def test_available_subtracts_what_our_jobs_declared_but_have_not_allocated_yet() -> None:
    # 10G other users + 5G seen of our 20G job: 15G used; 15G more stays promised to it.
    d = decide([gpu(0, used=15)], [], [ours("a", [0], mem=20, observed=5)])
    assert d.available_mib == {0: 50 * G}


def test_a_job_using_more_than_it_declared_promises_nothing_more() -> None:
    d = decide([gpu(0, used=24)], [], [ours("a", [0], mem=10, observed=14)])
    assert d.available_mib == {0: 56 * G}


def test_a_job_of_ours_without_mem_holds_the_whole_gpu() -> None:
    d = decide([gpu(0, used=3), gpu(1)], [job("x", mem=1)], [ours("a", [0], mem=None)], mode="pack")
    assert d.available_mib[0] == 0
    assert started(d) == {"x": (1,)}


def test_available_after_the_pass_counts_the_jobs_it_starts() -> None:
    d = decide([gpu(0, used=16)], [job("a"), job("b")], mode="pack")
    assert d.available_mib == {0: (80 - 16 - 24) * G}


def test_allocations_on_gpus_outside_the_pool_are_ignored() -> None:
    d = decide([gpu(0), gpu(1)], [job("a")], [ours("x", [1])], exclude=(1,))
    assert started(d) == {"a": (0,)}


# ------------------------------------------------------------------------------------ modes
def test_the_seeds_extreme_mode_example() -> None:
    """The bash script's example: an 80G A800 with 16G used by another user, jobs of 12G each.

    Pack (EXTREME_MODE) fits five (5 x 12 = 60G <= 64G); shared takes the GPU once (others may
    be on it, but then it holds a job of ours); exclusive none (the GPU is not idle).
    """
    gpus = [gpu(0, used=16, util=35)]
    jobs = [job(f"j{i}", order=i) for i in range(6)]
    pack = decide(gpus, jobs, mode="pack")
    assert list(started(pack)) == ["j0", "j1", "j2", "j3", "j4"]
    assert pack.reasons == {"j5": "needs 1 GPU with 12G: none eligible (GPU0 4G < 12G)"}
    shared = decide(gpus, jobs, mode="shared")
    assert started(shared) == {"j0": (0,)}
    assert shared.reasons["j1"] == "needs 1 GPU with 12G: none eligible (GPU0 ours)"
    exclusive = decide(gpus, jobs, mode="exclusive")
    assert exclusive.starts == ()
    assert exclusive.reasons["j0"] == (
        "needs 1 GPU idle (exclusive) with 12G: none eligible (GPU0 util 35% mem 20% used)"
    )


@pytest.mark.parametrize(
    ("used_mib", "util", "idle"),
    [
        (0, 0, True),
        (3071, 0, True),  # 2.999 % of 100G
        (3072, 0, False),  # exactly 3 %
        (0, 1, False),
        (0, None, True),  # utilization n/a: memory alone decides
    ],
)
def test_exclusive_needs_util_zero_and_under_3_percent_used(
    used_mib: int, util: int | None, idle: bool
) -> None:
    info = GpuInfo(0, "A800", "GPU-0", 100 * G, used_mib, util, 40)
    d = decide([info], [job("a")], mode="exclusive")
    assert (d.starts == (Start("a", (0,)),)) is idle


def test_exclusive_never_puts_two_of_our_jobs_on_a_gpu() -> None:
    d = decide(
        [gpu(0), gpu(1, util=15)],
        [job("a", mem=None)],
        [ours("x", [0], observed=0)],
        mode="exclusive",
    )
    assert (
        d.reasons["a"] == "needs 1 GPU idle (exclusive): none eligible (GPU0 ours, GPU1 util 15%)"
    )


def test_exclusive_still_checks_the_memory_asked() -> None:
    d = decide([gpu(0, total=24)], [job("a", mem=30)], [], mode="exclusive", gpus=(0,))
    assert d.reasons["a"] == "needs 1 GPU with 30G: the largest GPU has 24G"
    d = decide([gpu(0, total=24, used=0.5)], [job("a", mem=24)], mode="exclusive")
    assert d.reasons["a"] == (
        "needs 1 GPU idle (exclusive) with 24G: none eligible (GPU0 23.5G < 24G)"
    )


def test_shared_allows_other_users_but_not_a_second_job_of_ours() -> None:
    gpus = [gpu(0, used=40, util=90), gpu(1, used=5)]
    d = decide(gpus, [job("a", mem=30), job("b", mem=30), job("c", mem=30)], mode="shared")
    assert started(d) == {"a": (1,), "b": (0,)}
    assert d.reasons["c"] == "needs 1 GPU with 30G: none eligible (GPU0,1 ours)"


def test_shared_a_job_without_mem_needs_an_idle_gpu() -> None:
    gpus = [gpu(0, used=10), gpu(1, util=20)]
    d = decide(gpus, [job("whole", mem=None)], mode="shared")
    assert d.reasons["whole"] == (
        "needs 1 GPU idle (no mem set): none eligible (GPU0 mem 12% used, GPU1 util 20%)"
    )
    d = decide([*gpus, gpu(2)], [job("whole", mem=None)], mode="shared")
    assert started(d) == {"whole": (2,)}


def test_pack_joins_our_jobs_while_memory_lasts() -> None:
    d = decide(
        [gpu(0, used=30)],
        [job("b", mem=30), job("c", mem=30)],
        [ours("a", [0], mem=40, observed=10)],
        mode="pack",
    )
    # 80 - 30 used - 30 still promised to a = 20G: neither fits.
    assert d.starts == ()
    assert d.reasons["b"] == "needs 1 GPU with 30G: none eligible (GPU0 20G < 30G)"
    d = decide(
        [gpu(0, used=30)],
        [job("b", mem=20), job("c", mem=1)],
        [ours("a", [0], mem=40, observed=10)],
        mode="pack",
    )
    assert started(d) == {"b": (0,)}
    assert d.reasons["c"] == "needs 1 GPU with 1G: none eligible (GPU0 0M < 1G)"


def test_pack_never_shares_with_a_job_that_gave_no_mem() -> None:
    d = decide(
        [gpu(0, used=1)], [job("small", mem=0.5)], [ours("whole", [0], mem=None)], mode="pack"
    )
    assert d.reasons["small"] == "needs 1 GPU with 512M: none eligible (GPU0 ours (whole GPU))"
    d = decide(
        [gpu(0, used=1)],
        [job("whole", mem=None)],
        [ours("small", [0], mem=1, observed=1)],
        mode="pack",
    )
    assert d.reasons["whole"] == "needs 1 GPU idle (no mem set): none eligible (GPU0 ours)"


def test_pack_never_shares_a_whole_gpu_even_when_memory_reads_disagree() -> None:
    # Used memory read before our job's 60G showed up in its process list: the formula alone
    # would leave 59G "available".
    d = decide(
        [gpu(0, used=1)],
        [job("small", mem=1)],
        [ours("whole", [0], mem=None, observed=60)],
        mode="pack",
    )
    assert d.starts == ()
    assert d.reasons["small"] == "needs 1 GPU with 1G: none eligible (GPU0 ours (whole GPU))"


def test_pack_a_job_without_mem_started_in_the_pass_closes_its_gpu() -> None:
    d = decide([gpu(0)], [job("whole", mem=None), job("small", mem=1)], mode="pack")
    assert started(d) == {"whole": (0,)}
    assert d.reasons["small"] == "needs 1 GPU with 1G: none eligible (GPU0 ours (whole GPU))"


# -------------------------------------------------------------------------------- placement
def test_most_available_memory_first_ties_to_the_lower_index() -> None:
    gpus = [gpu(0, used=40), gpu(1, used=20), gpu(2, used=20), gpu(3, used=60)]
    d = decide(gpus, [job("a"), job("pair", gpus=2)])
    assert started(d) == {"a": (1,), "pair": (0, 2)}


def test_seed_13_1_example() -> None:
    """GPU0 40G, GPU1 45G, GPU2 35G available: the job goes to GPU1."""
    gpus = [gpu(0, used=40), gpu(1, used=35), gpu(2, used=45)]
    assert started(decide(gpus, [job("a", mem=30)])) == {"a": (1,)}


def test_best_fit_takes_the_least_available_that_fits() -> None:
    gpus = [gpu(0, used=40), gpu(1, used=20), gpu(2, used=45), gpu(3, used=60)]
    d = decide(gpus, [job("a", mem=30)], placement=Placement.BEST_FIT)
    assert started(d) == {"a": (2,)}  # 35G left: the tightest fit; GPU3 (20G) is too small


def test_best_fit_in_pack_mode_fills_one_gpu_before_the_next() -> None:
    d = decide(
        [gpu(0), gpu(1)],
        [job(f"j{i}", mem=20, order=i) for i in range(5)],
        mode="pack",
        placement="best_fit",
    )
    assert [s.gpus for s in d.starts] == [(0,), (0,), (0,), (0,), (1,)]
    most = decide(
        [gpu(0), gpu(1)],
        [job(f"j{i}", mem=20, order=i) for i in range(5)],
        mode="pack",
        placement="most_available",
    )
    assert [s.gpus for s in most.starts] == [(0,), (1,), (0,), (1,), (0,)]
    # The default (auto) is best fit in pack mode (docs/benchmarks.md, placement quality) ...
    auto = decide([gpu(0), gpu(1)], [job(f"j{i}", mem=20, order=i) for i in range(5)], mode="pack")
    assert [s.gpus for s in auto.starts] == [s.gpus for s in d.starts]
    # ... and most available memory first otherwise (the bash script's order).
    shared = decide([gpu(0, used=40), gpu(1, used=20)], [job("a", mem=20)])
    assert started(shared) == {"a": (1,)}


# ----------------------------------------------------------------------------------- reserve
def reserve_row_gpus(satisfy: int, held_by_us: int) -> tuple[list[GpuInfo], list[Allocation]]:
    """``satisfy`` 80G GPUs with enough memory for 35G, the first ``held_by_us`` running a 12G job
    of ours, then two GPUs other users filled (5G left: they never count)."""
    gpus = [gpu(i, used=12 if i < held_by_us else 0) for i in range(satisfy)]
    gpus += [gpu(satisfy, used=75, util=50), gpu(satisfy + 1, used=75, util=50)]
    allocs = [ours(f"ours{i}", [i], mem=12, observed=12) for i in range(held_by_us)]
    return gpus, allocs


@pytest.mark.parametrize(
    ("satisfy", "held_by_us", "n", "may_take"),
    [(8, 0, 8, 6), (5, 1, 4, 2), (4, 1, 3, 1), (3, 1, 2, 1), (2, 1, 1, 0)],
)
def test_reserve_rule_seed_follows_the_table_of_seed_5_2(
    satisfy: int, held_by_us: int, n: int, may_take: int
) -> None:
    """The bash script's reserve table, with RESERVED_GPUS=2.

    Its columns are: GPUs with enough free memory (满足显存的GPU), of them held by this script
    (本脚本占用), eligible = the first minus the second (可用数, our n: eligible GPUs holding no
    job of ours), and how many GPUs a job may be given (结果). Each row is one allocation:
    - 8 with memory, 0 ours, n=8: 6 may be taken (2 left);
    - 5 with memory, 1 ours, n=4: 2 may be taken (2 left);
    - 4 with memory, 1 ours, n=3: 1 may be taken (2 left);
    - 3 with memory, 1 ours, n=2: 1 may be taken (special case: n equals the reserve);
    - 2 with memory, 1 ours, n=1: none, the job waits (n below the reserve).
    So a job needing ``may_take`` GPUs starts and one needing one more does not. Shared mode, so
    the GPU held by us is not eligible itself; two GPUs with too little memory sit in the pool
    too and never count. This is ``reserve_rule = "seed"``, which `gtui import` writes.
    """
    assert reserve_allows(n, 2, "seed") == may_take
    check_reserve_row(satisfy, held_by_us, n, may_take, "seed")


@pytest.mark.parametrize(
    ("satisfy", "held_by_us", "n", "may_take"),
    [(8, 0, 8, 6), (5, 1, 4, 2), (4, 1, 3, 1), (3, 1, 2, 0), (2, 1, 1, 0)],
)
def test_reserve_strict_keeps_reserve_gpus_free_in_every_row(
    satisfy: int, held_by_us: int, n: int, may_take: int
) -> None:
    """The strict rule: `reserve = 2` keeps 2 eligible GPUs free of our jobs, the script's
    special row (n equals the reserve) included: there the job waits."""
    assert reserve_allows(n, 2) == may_take == reserve_allows(n, 2, "strict")
    check_reserve_row(satisfy, held_by_us, n, may_take, "strict")


def check_reserve_row(satisfy: int, held_by_us: int, n: int, may_take: int, rule: str) -> None:
    """A job needing ``may_take`` GPUs starts on the free ones; one needing one more waits, and
    its reason says how many the reserve keeps."""
    gpus, allocs = reserve_row_gpus(satisfy, held_by_us)
    free = list(range(held_by_us, satisfy))
    assert len(free) == n
    if may_take:
        d = decide(gpus, [job("fits", gpus=may_take, mem=35)], allocs, reserve=2, reserve_rule=rule)
        assert started(d) == {"fits": tuple(free[:may_take])}
    d = decide(
        gpus, [job("one_more", gpus=may_take + 1, mem=35)], allocs, reserve=2, reserve_rule=rule
    )
    assert d.starts == ()
    reason = d.reasons["one_more"]
    assert reason.startswith(f"needs {may_take + 1} GPU")
    assert f"{may_take or 'none'} eligible" in reason
    assert f"reserve 2 keeps {n - may_take}" in reason


@pytest.mark.parametrize("rule", ["strict", "seed"])
@pytest.mark.parametrize("reserve", [0, 1, 2, 3])
def test_reserve_rule_for_every_small_pool(reserve: int, rule: str) -> None:
    """Every pool of up to 6 GPUs, 0-2 of them running a job of ours (shared mode): a job
    needing ``size`` GPUs starts exactly when size <= allowed(n), n the GPUs free of ours."""
    for pool in range(7):
        for busy in range(min(pool, 2) + 1):
            gpus, allocs = reserve_row_gpus(pool, busy)
            n = pool - busy
            if rule == "seed":
                expected = 0 if n < reserve else (1 if n == reserve and n > 0 else n - reserve)
            else:
                expected = max(0, n - reserve)
            for size in range(1, pool + 2):
                d = decide(
                    gpus, [job("j", gpus=size, mem=35)], allocs, reserve=reserve, reserve_rule=rule
                )
                assert (d.starts != ()) is (size <= expected), (pool, busy, size, d.reasons)


@pytest.mark.parametrize(("rule", "idle_left"), [("strict", 1), ("seed", 0)])
def test_reserve_one_leaves_one_idle_gpu_when_colleagues_use_none(
    rule: str, idle_left: int
) -> None:
    """The README's own example, `reserve = 1` in shared mode on a box where colleagues use
    nothing: one pass after another, jobs keep starting until the rule stops them. Strict leaves
    one idle GPU, as a reader expects; the bash script's rule, kept for imported queues, leaves none."""
    gpus = [gpu(i) for i in range(4)]
    allocs: list[Allocation] = []
    waiting = [job(f"j{i}", mem=20) for i in range(8)]
    while True:
        d = decide(gpus, waiting, allocs, reserve=1, reserve_rule=rule)
        if not d.starts:
            break
        for s in d.starts:
            allocs.append(ours(s.name, list(s.gpus), mem=20, observed=20))
        waiting = [j for j in waiting if j.name not in started(d)]
    taken = {g for a in allocs for g in a.gpus}
    assert len(taken) == 4 - idle_left


def test_reserve_counts_only_gpus_that_fit_the_job() -> None:
    """4 idle 80G GPUs and 4 with 60G used, reserve 2: for a 12G job n=8 (6 may be taken), for a
    35G job n=4 (2 may be taken): the reserve is judged per request, as in the bash script."""
    gpus = [gpu(i) for i in range(4)] + [gpu(i, used=60) for i in range(4, 8)]
    assert len(decide(gpus, [job("small", gpus=6, mem=12)], reserve=2).starts) == 1
    d = decide(gpus, [job("big", gpus=3, mem=35)], reserve=2)
    assert d.reasons["big"] == (
        "needs 3 GPUs with 35G: 2 eligible (GPU4,5,6,7 20G < 35G, reserve 2 keeps 2)"
    )
    assert started(decide(gpus, [job("big", gpus=2, mem=35)], reserve=2)) == {"big": (0, 1)}


def test_reserve_is_recomputed_after_each_start_in_a_pass() -> None:
    """Eight idle GPUs, reserve 2, one-GPU jobs: each start lowers n for the next job, and the
    strict rule stops at six, leaving two GPUs idle."""
    d = decide([gpu(i) for i in range(8)], [job(f"j{i}", order=i) for i in range(10)], reserve=2)
    assert [s.gpus for s in d.starts] == [(i,) for i in range(6)]
    assert d.reasons["j6"] == (
        "needs 1 GPU with 12G: none eligible (GPU0,1,2,3,4,5 ours, reserve 2 keeps 2)"
    )
    assert d.reserved == (6, 7)


def test_reserve_rule_seed_takes_one_more_when_n_equals_the_reserve() -> None:
    """The bash script's rule, taken literally: the n == k row lets a seventh job start (n=2 -> 1),
    as the script does when it scans again for each command, leaving k - 1 GPUs free."""
    jobs = [job(f"j{i}", order=i) for i in range(10)]
    d = decide([gpu(i) for i in range(8)], jobs, reserve=2, reserve_rule="seed")
    assert [s.gpus for s in d.starts] == [(i,) for i in range(7)]
    assert d.reasons["j7"] == (
        "needs 1 GPU with 12G: none eligible (GPU0,1,2,3,4,5,6 ours, reserve 2 keeps 1)"
    )
    assert d.reserved == (7,)


def test_reserve_does_not_limit_gpus_that_already_hold_our_jobs() -> None:
    gpus = [gpu(0, used=12), gpu(1), gpu(2)]
    allocs = [ours("x", [0], observed=12)]
    d = decide(
        gpus,
        [job("pair", gpus=2), job("a"), job("b")],
        allocs,
        reserve=1,
        mode="pack",
        placement="most_available",
    )
    # n = 2 free GPUs, reserve 1: one of them, plus GPU0 which already holds a job of ours.
    # a and b only fit on GPUs holding our jobs: most available first (GPU1 68G, then a tie).
    assert started(d) == {"pair": (0, 1), "a": (1,), "b": (0,)}
    assert d.reserved == (2,)


def test_pack_with_a_reserve_sweeps_again_when_starts_make_room() -> None:
    """Pack mode, reserve 3, five idle GPUs. ``trio`` (3 GPUs) first: n=5 allows 2, it waits.
    Each one-GPU job then turns a free GPU into one holding our job, which the reserve does not
    limit: after three of them, trio fits on those three. Resources grew within the pass, so the
    pass sweeps the waiting jobs again instead of leaving trio for the next poll. Only the bash
    script's rule can make room so (its n == k row): under the strict rule a start on a free GPU adds one
    GPU of ours and removes one allowed free GPU, so the room stays the same."""
    jobs = [job("trio", gpus=3, order=0)] + [job(f"s{i}", order=1 + i) for i in range(3)]
    d = decide(
        [gpu(i) for i in range(5)],
        jobs,
        mode="pack",
        reserve=3,
        reserve_rule="seed",
        placement="most_available",
    )
    assert [(s.name, s.gpus) for s in d.starts] == [
        ("s0", (0,)),
        ("s1", (1,)),
        ("s2", (2,)),
        ("trio", (0, 1, 2)),
    ]
    assert d.reasons == {}
    assert d.available_mib == {0: 56 * G, 1: 56 * G, 2: 56 * G, 3: 80 * G, 4: 80 * G}
    assert d.reserved == (3, 4)


def test_pack_with_a_reserve_a_failed_shape_is_tried_again_after_room_grows() -> None:
    """As above with a second trio ranked after the one-GPU jobs: within the same sweep it is
    tried afresh (trio's failure proves nothing once room grew), then the next sweep starts
    trio."""
    jobs = [job("trio", gpus=3, order=0)] + [job(f"s{i}", order=1 + i) for i in range(3)]
    jobs.append(job("trio2", gpus=3, order=9))
    d = decide(
        [gpu(i) for i in range(5)],
        jobs,
        mode="pack",
        reserve=3,
        reserve_rule="seed",
        placement="most_available",
    )
    assert [s.name for s in d.starts] == ["s0", "s1", "s2", "trio2", "trio"]
    assert d.available_mib[0] == 44 * G


def test_reserve_larger_than_the_pool_ever_allows_is_said_plainly() -> None:
    d = decide([gpu(0), gpu(1)], [job("a"), job("pair", gpus=2)], reserve=3)
    assert d.reasons["a"] == "needs 1 GPU: reserve 3 leaves at most 0 of the pool's 2"
    d = decide([gpu(i) for i in range(4)], [job("quad", gpus=4), job("a")], reserve=2)
    assert d.reasons["quad"] == "needs 4 GPUs: reserve 2 leaves at most 2 of the pool's 4"
    assert started(d) == {"a": (0,)}


@pytest.mark.parametrize(
    ("idle", "reserve", "rule", "reserved"),
    [
        (4, 0, "strict", ()),
        (4, 2, "strict", (2, 3)),
        (2, 2, "strict", (0, 1)),
        (1, 1, "strict", (0,)),
        (1, 2, "strict", (0,)),
        (3, 1, "strict", (2,)),
        (2, 2, "seed", (1,)),
        (1, 1, "seed", ()),
    ],
)
def test_reserved_names_the_free_gpus_the_reserve_keeps(
    idle: int, reserve: int, rule: str, reserved: tuple[int, ...]
) -> None:
    d = decide([gpu(i) for i in range(idle)], [], reserve=reserve, reserve_rule=rule)
    assert d.reserved == reserved


def test_reserved_marks_the_gpus_our_next_job_would_take_last() -> None:
    gpus = [gpu(0, used=20), gpu(1), gpu(2, used=10), gpu(3, used=30)]
    assert decide(gpus, [], reserve=1).reserved == (1,)  # idle GPUs: only GPU1, kept
    assert decide(gpus, [], reserve=1, reserve_rule="seed").reserved == ()  # n == k: taken
    d = decide(gpus, [job("a", mem=70), job("b", gpus=2, mem=45)], reserve=2, reserve_rule="seed")
    assert started(d) == {"a": (1,)}
    assert d.reasons["b"] == "needs 2 GPUs with 45G: 1 eligible (GPU1 ours, reserve 2 keeps 2)"
    # Judged for b, the smallest waiting request: GPU0/2/3 fit it, 1 may be taken: GPU2 (most
    # available) is the one our next job would take; GPU0 and GPU3 are kept.
    assert d.reserved == (0, 3)


def test_no_reserve_with_reserve_zero_and_no_gpus() -> None:
    assert reserve_allows(0, 0) == 0
    assert reserve_allows(3, 0) == 3
    assert reserve_allows(0, 1) == 0


# ------------------------------------------------------------------------------------- order
def test_higher_priority_first_then_queue_order() -> None:
    jobs = [job("first", order=0), job("urgent", order=5, priority=3), job("second", order=1)]
    d = decide([gpu(0), gpu(1)], jobs)
    assert [s.name for s in d.starts] == ["urgent", "first"]
    assert "second" in d.reasons


def test_queue_order_not_input_order_decides() -> None:
    jobs = [job("b", order=2), job("a", order=1)]
    assert started(decide([gpu(0)], jobs)) == {"a": (0,)}


def test_multi_gpu_first_reproduces_the_seeds_order() -> None:
    jobs = [job("single", priority=5, order=0), job("pair", gpus=2, order=1)]
    d = decide([gpu(0), gpu(1)], jobs, multi_gpu_first=True)
    assert started(d) == {"pair": (0, 1)}
    d = decide([gpu(0), gpu(1)], jobs)
    assert started(d) == {"single": (0,)}
    assert d.reasons["pair"] == "needs 2 GPUs with 12G: 1 eligible (GPU0 ours)"


def test_a_job_that_cannot_start_does_not_block_later_ones() -> None:
    jobs = [job("big", gpus=2, mem=70, order=0), job("small", mem=20, order=1)]
    d = decide([gpu(0, used=40), gpu(1)], jobs)
    assert started(d) == {"small": (1,)}
    assert d.reasons["big"] == "needs 2 GPUs with 70G: 1 eligible (GPU0 40G < 70G)"
    assert d.starving is None


def test_a_reason_is_recomputed_once_a_later_job_starts() -> None:
    jobs = [
        job("pair", gpus=2, mem=35, order=0),
        job("one", mem=35, order=1),
        job("pair2", gpus=2, mem=35, order=2),
    ]
    d = decide([gpu(0), gpu(1, used=50)], jobs)
    assert started(d) == {"one": (0,)}
    assert d.reasons["pair"] == "needs 2 GPUs with 35G: 1 eligible (GPU1 30G < 35G)"
    assert d.reasons["pair2"] == "needs 2 GPUs with 35G: none eligible (GPU0 ours, GPU1 30G < 35G)"


def test_a_failed_shape_also_fails_larger_ones_but_smaller_ones_still_start() -> None:
    jobs = [
        job("a", mem=50, order=0),
        job("b", gpus=2, mem=60, order=1),
        job("c", mem=20, order=2),
        job("d", mem=50, order=3),
    ]
    d = decide([gpu(0, used=40), gpu(1, used=45)], jobs)
    assert started(d) == {"c": (0,)}
    assert d.reasons["b"] == "needs 2 GPUs with 60G: none eligible (GPU0 40G < 60G, GPU1 35G < 60G)"
    assert d.reasons["d"] == "needs 1 GPU with 50G: none eligible (GPU0 ours, GPU1 35G < 50G)"


def test_a_smaller_request_after_a_failed_one_still_fits_to_the_mib() -> None:
    jobs = [job("a", mem=50, order=0), job("b", mem=49.5, order=1)]
    d = decide([gpu(0, used=30.5)], jobs)
    assert started(d) == {"b": (0,)}
    assert d.reasons["a"] == "needs 1 GPU with 50G: none eligible (GPU0 49.5G < 50G)"


# --------------------------------------------------------------------------------- starvation
NOW = 100_000.0


def test_a_starving_first_job_keeps_the_gpus_it_could_use() -> None:
    jobs = [
        job("big", gpus=2, mem=35, order=0, waiting_since=NOW - 700),
        job("small", order=1, waiting_since=NOW - 5),
        job("prep", gpus=0, mem=None, order=2),
    ]
    gpus = [gpu(0, used=12), gpu(1)]
    allocs = [ours("x", [0], observed=12)]
    d = decide(gpus, jobs, allocs, now=NOW, starve_after_s=600)
    assert started(d) == {"prep": ()}  # CPU jobs take no GPU: they still run
    assert d.starving == "big"
    assert d.reasons["big"] == (
        "needs 2 GPUs with 35G: 1 eligible (GPU0 ours); starving 11m, GPU1 kept for it"
    )
    assert d.reasons["small"] == "waiting for big (starving since 11m)"


def test_before_starve_after_later_jobs_backfill() -> None:
    jobs = [job("big", gpus=2, mem=35, order=0, waiting_since=NOW - 500), job("small", order=1)]
    d = decide(
        [gpu(0, used=12), gpu(1)], jobs, [ours("x", [0], observed=12)], now=NOW, starve_after_s=600
    )
    assert started(d) == {"small": (1,)}
    assert d.starving is None


def test_a_later_job_may_still_take_a_gpu_the_starving_job_cannot_use() -> None:
    jobs = [
        job("big", mem=70, order=0, waiting_since=NOW - 3600),
        job("small", mem=20, order=1),
        job("small2", mem=20, order=2),
    ]
    gpus = [gpu(0, used=12), gpu(1, used=50)]
    allocs = [ours("x", [0], mem=12, observed=12)]
    d = decide(gpus, jobs, allocs, now=NOW, mode="pack")
    # GPU0 has room for big once our job there ends (80G, no other user): kept. GPU1 never
    # will (50G others): small may take it.
    assert started(d) == {"small": (1,)}
    assert d.reasons["big"] == (
        "needs 1 GPU with 70G: none eligible (GPU0 68G < 70G, GPU1 30G < 70G); "
        "starving 1h00m, GPU0 kept for it"
    )
    assert d.reasons["small2"] == "waiting for big (starving since 1h00m)"


def test_a_job_that_can_never_start_does_not_starve_the_queue() -> None:
    jobs = [job("huge", gpus=3, order=0), job("toobig", mem=100, order=1), job("a", order=2)]
    d = decide([gpu(0), gpu(1)], jobs, now=NOW)
    assert started(d) == {"a": (0,)}
    assert d.reasons["huge"] == "needs 3 GPUs, pool has 2"
    assert d.reasons["toobig"] == "needs 1 GPU with 100G: the largest GPU has 80G"
    assert d.starving is None


def test_held_or_dependent_first_jobs_do_not_starve_the_queue() -> None:
    jobs = [
        job("held", gpus=2, held=True, order=0),
        job("dep", gpus=2, after=("prep",), order=1),
        job("a", order=2),
    ]
    d = decide([gpu(0), gpu(1, used=70)], jobs, deps={"prep": "running"}, now=NOW)
    assert started(d) == {"a": (0,)}
    assert d.starving is None


def test_only_the_first_blocked_job_can_starve_the_queue() -> None:
    jobs = [
        job("young", gpus=2, mem=35, order=0, waiting_since=NOW - 10),
        job("old", gpus=2, mem=35, order=1, waiting_since=NOW - 9999),
        job("a", order=2),
    ]
    d = decide([gpu(0, used=50), gpu(1)], jobs, now=NOW)
    assert started(d) == {"a": (1,)}
    assert d.starving is None


def test_a_job_of_the_starving_jobs_shape_gets_the_plain_reason() -> None:
    jobs = [job("big", gpus=2, mem=35, order=0), job("big2", gpus=2, mem=35, order=1)]
    d = decide([gpu(0, used=50), gpu(1)], jobs, now=NOW)
    assert d.reasons["big2"] == "needs 2 GPUs with 35G: 1 eligible (GPU0 30G < 35G)"


# ---------------------------------------------------------------- held, paused, after, limits
def test_held_jobs_never_start() -> None:
    d = decide([gpu(0)], [job("h", held=True), job("cpu", gpus=0, mem=None, held=True)])
    assert d.starts == ()
    assert d.reasons == {"h": "held by you", "cpu": "held by you"}


def test_a_paused_queue_starts_nothing() -> None:
    jobs = [job("a"), job("cpu", gpus=0, mem=None), job("h", held=True)]
    d = decide([gpu(0)], jobs, paused=True)
    assert d.starts == ()
    assert d.reasons == {"a": "queue paused", "cpu": "queue paused", "h": "held by you"}
    assert d.available_mib == {0: 80 * G}


@pytest.mark.parametrize(
    ("deps", "reason"),
    [
        ({"prep": "done", "fetch": "done"}, None),
        ({"prep": "running", "fetch": "done"}, "after prep (running)"),
        ({"prep": JobState.FAILED, "fetch": "queued"}, "after prep (failed), fetch (queued)"),
        ({"prep": "done"}, "after fetch (unknown job)"),
    ],
)
def test_after_waits_until_every_dependency_is_done(
    deps: dict[str, str], reason: str | None
) -> None:
    for gpus in (1, 0):
        d = decide([gpu(0)], [job("train", gpus=gpus, after=("prep", "fetch"))], deps=deps)
        assert d.reasons.get("train") == reason
        assert (d.starts != ()) is (reason is None)


def test_max_parallel_counts_running_jobs_and_starts_in_this_pass() -> None:
    jobs = [job(f"j{i}", order=i) for i in range(4)]
    d = decide([gpu(i) for i in range(4)], jobs, running=1, max_parallel=3)
    assert list(started(d)) == ["j0", "j1"]
    assert d.reasons == {"j2": "max_parallel 3 reached", "j3": "max_parallel 3 reached"}
    assert len(decide([gpu(i) for i in range(4)], jobs, max_parallel=0).starts) == 4


def test_cpu_jobs_count_toward_max_parallel() -> None:
    jobs = [
        job("cpu", gpus=0, mem=None, order=0),
        job("gpu", order=1),
        job("cpu2", gpus=0, mem=None, order=2),
    ]
    d = decide([gpu(0)], jobs, max_parallel=1)
    assert started(d) == {"cpu": ()}
    assert d.reasons == {"gpu": "max_parallel 1 reached", "cpu2": "max_parallel 1 reached"}


def test_max_parallel_already_reached_still_gives_the_specific_reasons() -> None:
    jobs = [
        job("h", held=True),
        job("d", after=("prep",)),
        job("huge", gpus=2),
        job("a"),
        job("cpu", gpus=0, mem=None),
    ]
    d = decide([gpu(0)], jobs, running=2, max_parallel=2, deps={"prep": "running"})
    assert d.starts == ()
    assert d.reasons == {
        "h": "held by you",
        "d": "after prep (running)",
        "huge": "needs 2 GPUs, pool has 1",
        "a": "max_parallel 2 reached",
        "cpu": "max_parallel 2 reached",
    }


def test_max_parallel_one_is_strictly_serial() -> None:
    jobs = [job(f"j{i}", order=i) for i in range(3)]
    d = decide([gpu(0), gpu(1)], jobs, max_parallel=1)
    assert started(d) == {"j0": (0,)}


# ---------------------------------------------------------------------------------- reasons
def test_a_reason_says_what_keeps_each_gpu_and_the_reserve() -> None:
    gpus = [gpu(0), gpu(1, used=20, util=60), gpu(2, used=70, util=50), gpu(3)]
    d = decide(gpus, [job("big", gpus=2, mem=35)], [ours("x", [1], mem=20, observed=20)], reserve=1)
    assert d.reasons["big"] == (
        "needs 2 GPUs with 35G: 1 eligible (GPU1 ours, GPU2 10G < 35G, reserve 1 keeps 1)"
    )


def test_every_candidate_either_starts_or_has_a_reason() -> None:
    jobs = [
        job(f"j{i}", gpus=i % 3, mem=None if i % 4 == 0 else 10 + i, order=i) for i in range(30)
    ]
    d = decide([gpu(0), gpu(1, used=30)], jobs, mode="pack")
    names = {c.name for c in jobs}
    assert set(started(d)) | set(d.reasons) == names
    assert not set(started(d)) & set(d.reasons)
    assert all(d.reasons.values())


def test_mem_above_most_gpus_for_a_multi_gpu_job() -> None:
    d = decide([gpu(0, total=40), gpu(1), gpu(2, total=24)], [job("pair", gpus=2, mem=48)])
    assert d.reasons["pair"] == "needs 2 GPUs with 48G: only 1 of the pool's GPUs has that much"


def test_same_input_same_decision() -> None:
    gpus = [gpu(0, used=10), gpu(1), gpu(2, used=30, util=10)]
    jobs = [job(f"j{i}", gpus=1 + i % 2, mem=8 + 3 * i, order=i, priority=i % 3) for i in range(12)]
    first = decide(gpus, jobs, mode="pack", reserve=1)
    assert decide(gpus, list(reversed(jobs)), mode="pack", reserve=1) == first


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (59.9, "59s"),
        (60, "1m"),
        (725, "12m"),
        (3600, "1h00m"),
        (7500, "2h05m"),
        (3 * 86400 + 7200, "3d2h"),
    ],
)
def test_format_wait(seconds: float, text: str) -> None:
    assert format_wait(seconds) == text


@pytest.mark.parametrize(
    "args",
    [
        ("a", 1, 70_000, 0, 0, (), 0.0, False),
        ("b", 2, None, 5, 123, ("a",), 17.5, False),
        ("c", 0, None, -3, 7, (), 1.0, True),
        ("d", 1, 10_240, 300, 1 << 21, (), 2.0, False),
        ("e", 4, 40_960, -255, (1 << 21) - 1, ("a", "b"), 3.0, True),
    ],
)
def test_candidate_make_equals_the_constructor(args: tuple) -> None:
    """The planner's positional constructor fills the same fields."""
    fields = ("name", "gpus", "mem_mib", "priority", "order", "after", "waiting_since", "held")
    made = Candidate.make(*args)
    built = Candidate(**dict(zip(fields, args, strict=True)))
    assert made == built
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.gpus = 3  # type: ignore[misc]
