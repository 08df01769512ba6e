"""The victim choice, held by properties over random GPUs and jobs: the fewest victims, never
one of higher or equal priority than the waiting job, never a neighbour's or a job that is
not preemptible, and never a costlier victim where a cheaper one would do."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from gtui.core.sched.preempt import Running, choose, cost_order, may_stop

jobs = st.lists(
    st.tuples(
        st.integers(0, 3),  # gpu
        st.integers(1, 40),  # GiB held
        st.integers(0, 4),  # priority
        st.integers(0, 100),  # started_at
        st.booleans(),  # preemptible
        st.booleans(),  # ours
    ),
    max_size=7,
)


def _model(raw: list[tuple[int, int, int, int, bool, bool]], free: list[int], need: int):  # type: ignore[no-untyped-def]
    running = [
        Running(f"j{i}", prio, float(start), pre, ours)
        for i, (_, _, prio, start, pre, ours) in enumerate(raw)
    ]
    held = {f"j{i}": (gpu, gib) for i, (gpu, gib, *_rest) in enumerate(raw)}

    def frees(names: frozenset[str]) -> bool:
        room = list(free)
        for n in names:
            gpu, gib = held[n]
            room[gpu] += gib
        return max(room) >= need

    return running, frees


@settings(max_examples=300, deadline=None)
@given(
    jobs,
    st.lists(st.integers(0, 30), min_size=4, max_size=4),
    st.integers(1, 80),
    st.integers(0, 5),
)
def test_the_choice_is_minimal_allowed_and_cheapest(
    raw: list[tuple[int, int, int, int, bool, bool]], free: list[int], need: int, priority: int
) -> None:
    running, frees = _model(raw, free, need)
    chosen = choose(priority, running, frees)
    allowed = [j for j in running if may_stop(j, priority)]
    by_name = {j.name: j for j in running}
    if chosen is None:
        # No allowed set frees enough.
        assert not any(
            frees(frozenset(j.name for j in c))
            for k in range(1, len(allowed) + 1)
            for c in itertools.combinations(allowed, k)
        )
        return
    victims = [by_name[n] for n in chosen]
    assert all(v.ours and v.preemptible and v.priority < priority for v in victims)
    assert frees(frozenset(chosen))
    # Minimal: no smaller allowed set frees enough.
    for k in range(1, len(chosen)):
        assert not any(
            frees(frozenset(j.name for j in c)) for c in itertools.combinations(allowed, k)
        )
    # Never a costlier victim where a cheaper one (not chosen) would do just as well.
    order = [j.name for j in cost_order(allowed)]
    for v in chosen:
        for cheaper in order[: order.index(v)]:
            if cheaper in chosen:
                continue
            assert not frees(frozenset(chosen) - {v} | {cheaper})


def test_same_priority_the_shortest_running_goes_first() -> None:
    running = [Running("old", 0, 10.0, True), Running("new", 0, 90.0, True)]
    assert choose(5, running, lambda names: len(names) >= 1) == ("new",)


def test_then_the_lowest_priority() -> None:
    running = [Running("p2", 2, 50.0, True), Running("p1", 1, 50.0, True)]
    assert choose(5, running, lambda names: len(names) >= 1) == ("p1",)


def test_nothing_for_an_equal_priority_or_a_neighbour() -> None:
    running = [Running("same", 5, 50.0, True), Running("theirs", 0, 50.0, True, ours=False)]
    assert choose(5, running, lambda names: True) is None
