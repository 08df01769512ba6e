"""The column walk (``policy_fast.walk_columns``) held to the readable walk (``policy.walk``,
its caches off) on random queues and GPU states (hypothesis): the same starts, the same reasons
in the same order, and the same rest of the Decision. The worlds are those of
test_policy_properties.py, each queue also repeated so that jobs share request shapes, which is
what the column walk skips over."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from gtui.core.model import Mode
from gtui.core.sched.policy import Candidate, Decision, PassState, walk
from gtui.core.sched.policy_fast import walk_columns
from gtui.core.sched.policy_types import shape_key
from tests.core.sched.test_policy_properties import PROFILE, World, worlds


@st.composite
def long_worlds(draw: st.DrawFn) -> World:
    """A world whose queue is its own repeated 1-12 times: later copies rank among the first
    (same priorities, orders after them) and keep their ``after`` and held flags. Half of
    them in pack mode with a reserve, where the walk may go over the queue again."""
    w = draw(worlds())
    copies = draw(st.sampled_from([1, 3, 12, 2]))
    n = len(w.candidates)
    jobs: list[Candidate] = []
    for k in range(copies):
        for c in w.candidates:
            jobs.append(replace(c, name=f"{c.name}.{k}", order=c.order + k * n))
    settings = w.settings
    if draw(st.booleans()):  # pack mode with a reserve: where a start can make room (rule 9)
        reserve = draw(st.sampled_from([1, 2]))
        settings = replace(settings, mode=Mode.PACK, reserve=reserve, max_parallel=0)
    return replace(w, candidates=tuple(jobs), settings=settings)


def readable(w: World) -> Decision:
    state = PassState(w.snapshot, w.allocations, w.settings, w.now, shape_cache=False)
    return walk(state, w.candidates, w.dep_states, w.running_count, w.paused)


def columns(w: World) -> Decision:
    state = PassState(w.snapshot, w.allocations, w.settings, w.now)
    return walk_columns(state, w.candidates, w.dep_states, w.running_count, w.paused)


@PROFILE
@given(long_worlds())
def test_the_column_walk_decides_as_the_readable_walk(w: World) -> None:
    fast, slow = columns(w), readable(w)
    assert fast.starts == slow.starts
    assert list(fast.reasons.items()) == list(slow.reasons.items())
    assert fast == slow


@PROFILE
@given(
    st.tuples(st.integers(-3, 10**6), st.one_of(st.none(), st.integers(-3, 10**7)), st.booleans()),
    st.tuples(st.integers(-3, 10**6), st.one_of(st.none(), st.integers(-3, 10**7)), st.booleans()),
)
def test_a_shape_is_one_int_per_request(
    a: tuple[int, int | None, bool], b: tuple[int, int | None, bool]
) -> None:
    """The column walk tells requests apart by ``Candidate.shape`` alone: equal only for equal
    (GPUs, mem, held-or-after), never one of its two skip codes (-1, -2)."""
    assert (shape_key(*a) == shape_key(*b)) == (a == b)
    assert shape_key(*a) not in (-1, -2)
    assert (shape_key(*a) < 0) == a[2]
