"""The column walk of the placement pass (``policy_fast.walk_columns``) against the readable
walk (``policy.walk`` with its caches off), on queues long enough for the column walk to matter:
thousands of jobs sharing a few dozen request shapes, so most of them are filled in bulk and
the heap of next positions, the re-sweep and the ``max_parallel`` tail all get exercised.
The hypothesis properties (test_policy_properties.py) cover small, odd worlds; these cover
long, repetitive ones. Also the ``Reasons`` mapping the pass returns.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from gtui.core.gpus.snapshot import GpuInfo, GpuSnapshot
from gtui.core.model import Mode, Placement, Settings
from gtui.core.sched.policy import (
    Allocation,
    Candidate,
    Decision,
    PassState,
    Reasons,
    place,
    walk,
)
from gtui.core.sched.policy_fast import walk_columns

G = 1024


def world(
    seed: int, n: int
) -> tuple[GpuSnapshot, list[Candidate], list[Allocation], dict[str, str]]:
    rng = random.Random(seed)
    n_gpus = rng.choice([2, 4, 8])
    infos = []
    for i in range(n_gpus):
        total = rng.choice([24, 40, 80]) * G
        infos.append(
            GpuInfo(
                index=i,
                name="Fake",
                uuid=f"GPU-{i}",
                mem_total_mib=total,
                mem_used_mib=rng.choice([0, 0, 1, 10, 30]) * total // 80,
                util=rng.choice([0, 0, 40, None]),
                temperature=40,
                lost=rng.random() < 0.05,
            )
        )
    allocations = [
        Allocation(f"run{a}", (rng.randrange(n_gpus),), rng.choice([None, 8 * G, 20 * G]), {})
        for a in range(rng.choice([0, 0, 1, 3]))
    ]
    names = [f"job{i}" for i in range(n)]
    cands = []
    for i, name in enumerate(names):
        after: tuple[str, ...] = ()
        if i and rng.random() < 0.1:
            after = tuple(rng.sample(names[:i], k=min(i, rng.choice([1, 1, 2]))))
        cands.append(
            Candidate(
                name=name,
                gpus=rng.choice([0, 1, 1, 1, 2, 2, 4, 8]),
                mem_mib=rng.choice([None, 4 * G, 10 * G, 20 * G, 30 * G, 45 * G, 70 * G]),
                priority=rng.choice([0, 0, 0, 1, 5, -1]),
                order=i,
                after=after,
                waiting_since=rng.choice([0.0, 9_000.0, 9_990.0]),
                held=rng.random() < 0.03,
            )
        )
    rng.shuffle(cands)
    deps = {name: rng.choice(["done", "done", "queued", "running", "failed"]) for name in names}
    snap = GpuSnapshot(gpus=tuple(infos), taken_at=0.0, source="fake")
    return snap, cands, allocations, deps


SETTINGS = [
    Settings(mode=Mode.SHARED),
    Settings(mode=Mode.PACK),
    Settings(mode=Mode.PACK, reserve=1),
    Settings(mode=Mode.PACK, reserve=2, placement=Placement.MOST_AVAILABLE),
    Settings(mode=Mode.EXCLUSIVE, reserve=1),
    Settings(mode=Mode.SHARED, max_parallel=5),
    Settings(mode=Mode.PACK, reserve=1, max_parallel=3, starve_after_s=60.0),
    Settings(mode=Mode.SHARED, starve_after_s=60.0, multi_gpu_first=True),
    Settings(mode=Mode.PACK, starve_after_s=0.0),
]


def both(
    seed: int, n: int, settings: Settings, running: int = 0, paused: bool = False
) -> tuple[Decision, Decision]:
    snap, cands, allocs, deps = world(seed, n)
    fast = walk_columns(PassState(snap, allocs, settings, 10_000.0), cands, deps, running, paused)
    slow = walk(
        PassState(snap, allocs, settings, 10_000.0, shape_cache=False), cands, deps, running, paused
    )
    return fast, slow


@pytest.mark.parametrize(
    "settings", SETTINGS, ids=lambda s: f"{s.mode.value}-r{s.reserve}-p{s.max_parallel}"
)
@pytest.mark.parametrize("seed", range(6))
def test_the_column_walk_decides_exactly_as_the_job_at_a_time_pass(
    seed: int, settings: Settings
) -> None:
    fast, slow = both(seed, 1500, settings)
    assert fast.starts == slow.starts
    assert dict(fast.reasons) == slow.reasons
    assert fast == slow  # every field: available memory, reserved GPUs, the starving job


def test_a_long_queue_with_max_parallel_already_reached_gets_the_same_reasons() -> None:
    fast, slow = both(7, 3000, Settings(mode=Mode.PACK, max_parallel=4), running=4)
    assert fast.starts == () and fast == slow
    assert "max_parallel 4 reached" in set(fast.reasons.values())


def test_a_paused_queue_says_so_for_every_job_but_the_held_ones() -> None:
    fast, slow = both(3, 2000, Settings(mode=Mode.SHARED), paused=True)
    assert fast == slow
    assert set(fast.reasons.values()) == {"queue paused", "held by you"}


def test_the_walk_starts_cpu_jobs_without_a_limit_one_after_another() -> None:
    snap, cands, allocs, deps = world(11, 2000)
    cpu = [replace(c, gpus=0, after=(), held=False) for c in cands[:500]]
    fast = walk_columns(PassState(snap, allocs, Settings(), 1.0), cpu + cands[500:], deps, 0, False)
    slow = walk(
        PassState(snap, allocs, Settings(), 1.0, shape_cache=False),
        cpu + cands[500:],
        deps,
        0,
        False,
    )
    assert fast == slow
    assert {s.name for s in fast.starts} >= {c.name for c in cpu}


# ------------------------------------------------------------------------------ Reasons


def reasons_of(seed: int = 1) -> tuple[Reasons, dict[str, str], Decision]:
    fast, slow = both(seed, 400, Settings(mode=Mode.PACK, reserve=1))
    assert isinstance(fast.reasons, Reasons)
    return fast.reasons, slow.reasons, fast


def test_reasons_behave_as_the_dict_they_stand_for() -> None:
    reasons, expected, _ = reasons_of()
    assert len(reasons) == len(expected)
    assert list(reasons) == list(expected)  # rank order, started jobs left out
    assert list(reasons.items()) == list(expected.items())
    assert list(reasons.values()) == list(expected.values())
    assert set(reasons.keys()) == set(expected)
    name, text = next(iter(expected.items()))
    assert reasons[name] == text and reasons.get(name) == text and name in reasons
    assert reasons == expected and expected == reasons
    assert reasons != {**expected, name: "something else"}
    assert "Reasons({" in repr(reasons)


def test_a_started_or_unknown_job_has_no_reason() -> None:
    reasons, _, decision = reasons_of()
    assert decision.starts
    started = decision.starts[0].name
    assert started not in reasons and reasons.get(started) is None
    with pytest.raises(KeyError):
        reasons[started]
    with pytest.raises(KeyError):
        reasons["no-such-job"]


def test_two_passes_over_the_same_candidates_compare_by_their_texts() -> None:
    snap, cands, allocs, deps = world(5, 800)
    s = Settings(mode=Mode.SHARED)
    a = place(snap, cands, allocs, s, dep_states=deps, running_count=0, now=10_000.0)
    b = place(snap, cands, allocs, s, dep_states=deps, running_count=0, now=10_000.0)
    assert a.reasons == b.reasons
    waiting = next(
        c for c in cands if not c.held and len(c.after) == 1 and deps[c.after[0]] != "done"
    )
    changed = {**deps, waiting.after[0]: "done"}  # its `after` is met now
    c = place(snap, cands, allocs, s, dep_states=changed, running_count=0, now=10_000.0)
    assert c.reasons != a.reasons
    assert a.reasons[waiting.name].startswith("after ")
    assert not c.reasons.get(waiting.name, "").startswith("after ")


@pytest.mark.parametrize("offset", [0, 2**21 - 700, 2**21, 10**12])
def test_extreme_priorities_and_queue_positions_rank_as_the_reference_does(offset: int) -> None:
    """Priorities far outside (-256, 256] and queue positions past 2**21 (where a Candidate has
    no small rank int) rank exactly as the readable walk does."""
    snap, cands, allocs, deps = world(13, 1500)
    odd = [
        replace(
            c, priority=[10**9, -(10**9), 255, 256, -255, -256, 0][i % 7], order=c.order + offset
        )
        for i, c in enumerate(cands)
    ]
    for settings in (Settings(mode=Mode.PACK, reserve=1), Settings(multi_gpu_first=True)):
        fast = walk_columns(PassState(snap, allocs, settings, 1e4), odd, deps, 0, False)
        slow = walk(PassState(snap, allocs, settings, 1e4, shape_cache=False), odd, deps, 0, False)
        assert fast == slow
        assert list(fast.reasons) == list(slow.reasons)  # the same rank order
