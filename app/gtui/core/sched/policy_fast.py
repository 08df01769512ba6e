"""The column walk: the placement pass of policy.py, fast enough for 100k waiting jobs.

``policy.walk`` asks every job in turn. This walk gives the same Decision (starts, reasons,
available memory, reserved GPUs, the starving job; tests/test_policy_fast.py holds it to
``walk`` on random queues and GPU states) while it looks only at the jobs that can change
something: the first job of each request shape since the GPUs last changed, and the ones that
start. Resources only shrink within a pass, so every later job of a shape that failed gets that
shape's reason, and those stretches are filled in bulk (``map`` over a list of shape codes)
without touching the Candidates. Every rule and every word comes from the same ``PassState``
methods as ``walk``; only the order of visiting differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from heapq import heapify, heappop, heappush
from itertools import compress
from operator import attrgetter

from gtui.core.sched.policy_reasons import Reasons
from gtui.core.sched.policy_state import PassState, rank
from gtui.core.sched.policy_types import HELD_REASON, PAUSED_REASON, Candidate, Decision, Start

_BLOCKED = -1  # held, or an `after` not met: never placed in this pass
_STARTED = -2  # started earlier in this pass
_SENTINELS = frozenset((_BLOCKED, _STARTED))
_NAME = attrgetter("name")
_GPUS = attrgetter("gpus")
_MEM = attrgetter("mem_mib")
_HELD = attrgetter("held")
_AFTER = attrgetter("after")

Shape = tuple[int, int | None]  # (GPUs, mem per GPU) of a request


class Shapes:
    """The request shapes of one pass's ranked jobs as small ints (codes), one per distinct
    (GPUs, mem): a list of codes is compared, hashed and searched without touching the
    Candidates. Made by the walk for its pass, and dropped with it."""

    def __init__(self, ranked: Sequence[Candidate]) -> None:
        keys = list(zip(map(_GPUS, ranked), map(_MEM, ranked), strict=True))
        self.keys: list[Shape] = list(dict.fromkeys(keys))  # code -> shape
        code_of = {key: code for code, key in enumerate(self.keys)}
        self.codes: list[int] = list(map(code_of.__getitem__, keys))  # by rank position


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
    shapes = Shapes(ranked)
    codes = shapes.codes
    n_all = len(codes)
    held = set(compress(range(n_all), map(_HELD, ranked)))
    if queue_paused:
        paused = dict.fromkeys(map(_NAME, ranked), PAUSED_REASON)
        for i in held:
            paused[ranked[i].name] = HELD_REASON
        return state.decision([], paused, None)
    state.dep_states = dep_states
    fixed: dict[int, str] = dict.fromkeys(held, HELD_REASON)
    shared: dict[tuple[str, ...], str] = {}  # the reasons of `after` lists of two or more
    for i in compress(range(n_all), map(_AFTER, ranked)):
        if i in fixed:
            continue
        after = ranked[i].after
        if len(after) == 1:  # most: one reason per job, nothing to share
            unmet = state.after_reason(after) or ""
        else:
            said = shared.get(after)
            if said is None:
                said = shared[after] = state.after_reason(after) or ""
            unmet = said
        if unmet:
            fixed[i] = unmet
    for i in fixed:
        codes[i] = _BLOCKED
    present = set(codes) - _SENTINELS
    texts: list[str | None] = [None] * n_all
    starts: list[Start] = []
    first = True
    while True:
        new, probe, again = _sweep(
            state, shapes, ranked, present, texts, running_count + len(starts), first
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
    shapes: Shapes,
    ranked: list[Candidate],
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
    codes = shapes.codes
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
        for k in set(codes[rest:]) - _SENTINELS:
            gpus_n, mem = shapes.keys[k]
            tail[k] = (state.permanent_reason(gpus_n, mem) if gpus_n > 0 else None) or full_text
        texts[rest:] = map(tail.__getitem__, codes[rest:])
    return starts, probe, made_room and rest == n_all
