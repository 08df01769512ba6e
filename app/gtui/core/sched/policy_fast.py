"""The column walk: the placement pass of policy.py, fast enough for 100k waiting jobs.

``policy.walk`` asks every job in turn. This walk gives the same Decision (starts, reasons,
available memory, reserved GPUs, the starving job; tests/core/sched/test_policy_fast.py holds it to
``walk`` on random queues and GPU states) while it looks only at the jobs that can change
something: the first job of each request shape since the GPUs last changed, and the ones that
start. Resources only shrink within a pass, so every later job of a shape that failed gets that
shape's reason, and those stretches are filled in bulk (``map`` over the column of the
Candidates' ``shape`` ints) without touching the Candidates. Every rule and every word comes
from the same ``PassState`` methods as ``walk``; only the order of visiting differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from heapq import heapify, heappop, heappush
from itertools import compress, repeat
from operator import attrgetter, lt

from gtui.core.sched.policy_reasons import Reasons
from gtui.core.sched.policy_state import PassState, rank
from gtui.core.sched.policy_types import (
    HELD_REASON,
    PAUSED_REASON,
    Candidate,
    Decision,
    Start,
    shape_key,
)

# Codes of positions the sweep skips (a plain shape is never negative, a held or `after` one
# below -2, see Candidate.shape).
_BLOCKED = -1  # held, or an `after` not met: never placed in this pass
_STARTED = -2  # started earlier in this pass
_SENTINELS = frozenset((_BLOCKED, _STARTED))
_NAME = attrgetter("name")
_SHAPE = attrgetter("shape")


def walk_columns(
    state: PassState,
    candidates: Sequence[Candidate],
    dep_states: Mapping[str, str],
    running_count: int,
    queue_paused: bool,
) -> Decision:
    """``policy.walk``'s answer, from the columns. Held jobs and jobs whose ``after`` is not
    met never start and change nothing: their reasons are fixed first and their positions
    left out; then ``_sweep`` walks the codes, again while a start makes room (rule 9)."""
    ranked = rank(candidates, state.settings)
    codes = list(map(_SHAPE, ranked))  # the request shape of each rank position
    n_all = len(codes)
    present = set(codes)
    fixed: dict[int, str] = {}  # rank position -> its reason, for held and `after` jobs
    if queue_paused:
        paused = dict.fromkeys(map(_NAME, ranked), PAUSED_REASON)
        for c in ranked:
            if c.held:
                paused[c.name] = HELD_REASON
        return state.decision([], paused, None)
    state.dep_states = dep_states
    if min(present, default=0) < 0:  # held jobs, or jobs with an `after`
        shared: dict[tuple[str, ...], str] = {}  # the reasons of `after` lists of 2 or more
        for i in compress(range(n_all), map(lt, codes, repeat(0))):
            c = ranked[i]
            if c.held:
                fixed[i] = HELD_REASON
                codes[i] = _BLOCKED
                continue
            after = c.after
            if len(after) == 1:  # most: one reason per job, nothing to share
                unmet = state.after_reason(after) or ""
            else:
                said = shared.get(after)
                if said is None:
                    said = shared[after] = state.after_reason(after) or ""
                unmet = said
            if unmet:
                fixed[i] = unmet
                codes[i] = _BLOCKED
            else:
                codes[i] = shape_key(c.gpus, c.mem_mib)  # waits like any plain job
        present = set(codes)
    present -= _SENTINELS
    texts: list[str | None] = [None] * n_all
    starts: list[Start] = []
    first = True
    while True:
        new, probe, again = _sweep(
            state, ranked, codes, present, texts, running_count + len(starts), first
        )
        first = False
        starts += new
        if not again:
            break
    for i, text in fixed.items():
        texts[i] = text
    return state.decision(starts, Reasons(ranked, texts, nones=len(starts)), probe)


def _sweep(
    state: PassState,
    ranked: list[Candidate],
    codes: list[int],
    present: set[int],
    texts: list[str | None],
    running: int,
    first: bool,
) -> tuple[list[Start], int | None, bool]:
    """``policy._sweep`` over the shape codes: writes each waiting job's reason into
    ``texts`` (by rank position), marks started jobs ``_STARTED`` in the codes, and returns
    (starts, probe, sweep again?).

    ``dead`` maps the codes whose reason is known until the GPUs next change (cleared then);
    a heap holds the next position of every other code. The next job to look at is the
    heap's least; the ones before it all have a dead code.
    """
    n_all = len(codes)
    limit = max(0, state.settings.max_parallel)
    starts: list[Start] = []
    target = None if first else state.starving
    state.begin_sweep()
    first_blocked = first
    failed = made_room = False
    probe: int | None = None
    dead: dict[int, str | None] = dict.fromkeys(_SENTINELS)
    live = set(present)  # codes that may still occur at or after the position
    nxt: dict[int, int] = {}  # code -> its next position, where known

    def heap_from(p: int) -> list[tuple[int, int]]:
        """The next position of every code not dead, from ``p`` on."""
        h = []
        for k in list(live):
            if k in dead:
                continue
            pos = nxt.get(k, -1)
            if pos < p:
                try:
                    pos = codes.index(k, p)
                except ValueError:
                    live.discard(k)
                    continue
                nxt[k] = pos
            h.append((pos, k))
        heapify(h)
        return h

    rest = 0 if limit and running >= limit else n_all  # where max_parallel is hit
    p = 0
    heap = heap_from(0) if rest else []
    while True:
        q = rest
        while heap:
            pos, k = heap[0]
            if k in dead or pos < p:  # stale: the code failed since, or was passed
                heappop(heap)
                continue
            q = min(pos, rest)
            break
        if q > p:
            texts[p:q] = map(dead.__getitem__, codes[p:q])
        if q >= rest:
            break
        heappop(heap)
        p = q + 1
        k = codes[q]
        c = ranked[q]
        n, m = c.gpus, c.mem_mib
        if n <= 0:
            starts.append(Start(c.name, ()))
            codes[q] = _STARTED
            texts[q] = None
            running += 1
            if limit and running >= limit:
                rest = p
                break
            try:
                pos = nxt[k] = codes.index(k, p)
                heappush(heap, (pos, k))
            except ValueError:
                live.discard(k)
            continue
        never = state.permanent_reason(n, m)
        if never is not None:
            texts[q] = dead[k] = never
            continue
        gpus, room = state.start(n, m)
        if gpus is not None:
            made_room = made_room or (room and failed)
            starts.append(Start(c.name, gpus))
            codes[q] = _STARTED
            texts[q] = None
            running += 1
            dead = dict.fromkeys(_SENTINELS)
            if limit and running >= limit:
                rest = p
                break
            heap = heap_from(p)
            continue
        failed = True
        if m is not None and (probe is None or m < probe):
            probe = m
        reason = state.reason_for(n, m, bool(state.protected))
        if first_blocked or c.name == target:
            first_blocked = False
            waited = state.now - c.waiting_since
            if waited > state.settings.starve_after_s or c.name == target:
                texts[q] = reason + state.starve(c, waited)
                dead = dict.fromkeys(_SENTINELS)  # later reasons now name the starving job
                state.changed()
                heap = heap_from(p)
                continue
        texts[q] = dead[k] = reason

    if rest < n_all:  # max_parallel reached: no more starts; why each remaining job waits
        full_text = f"max_parallel {limit} reached"
        tail: dict[int, str | None] = dict.fromkeys(_SENTINELS)
        for k, c in dict(zip(codes[rest:], ranked[rest:], strict=True)).items():
            if k not in _SENTINELS:
                n, m = c.gpus, c.mem_mib
                tail[k] = (state.permanent_reason(n, m) if n > 0 else None) or full_text
        texts[rest:] = map(tail.__getitem__, codes[rest:])
    return starts, probe, made_room and rest == n_all
