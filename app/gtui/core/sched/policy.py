"""The placement policy: one pure function, used by the engine, the tests, the simulator and the UI.

Snapshot + waiting jobs + our allocations + settings in; which jobs start on which GPUs, and a
reason a person can act on for every job that waits, out. No I/O, no clock, no randomness.

The rules (DESIGN.md 4.1-4.3, seed 000 sections 5 and 13), and what this module chose where they
are silent:

- Pool: ``settings.gpus`` ("all" or a list) minus ``settings.exclude``, minus lost GPUs and GPUs
  whose memory the driver does not report.
- ``available = total - used - sum over our jobs on it of max(0, declared - observed)``; a job of
  ours with no ``mem`` declares the whole GPU. Neighbours' claims (data, judged in gpus/claims)
  count the same way; a GPU with one is not idle; a wait they cause names user and job.
- A GPU is *idle* when its utilization is 0 % and used memory is under 3 % of total. An unknown
  utilization (the driver says n/a) counts as 0 %: the memory test alone then decides, otherwise
  such a GPU could never be used in exclusive mode.
- exclusive: no job of ours, idle, and (if the job gives ``mem``) ``available >= mem``.
  shared: no job of ours and ``available >= mem``. pack: ``available >= mem`` even beside jobs of
  ours, never beside a job of ours that has no ``mem``.
  A job with no ``mem`` needs its GPUs to itself in every mode: no job of ours and idle.
- Reserve (DESIGN.md 4.2): of the GPUs eligible for a job that hold no job of ours (n of
  them), ``reserve_allows(n, k, rule)`` may be taken; GPUs already holding a job of ours (pack)
  are not limited. Each start in a pass changes n for the next job. The default ``strict`` rule
  keeps k free; ``reserve_rule = "seed"`` is the bash script's table (seed 000, 5.2), whose
  ``n == k -> 1`` row leaves ``k - 1`` free in the end (none with ``reserve = 1``): imported
  queues keep it so that they behave as they did under the script.
- Order: priority (higher first), then queue order; ``multi_gpu_first`` sorts by GPUs needed
  first (the seed's order). A job that cannot start does not block later ones (backfill), except
  when the first job that waits for GPUs has waited longer than ``starve_after_s``: then no later
  job may take a GPU that job could use, i.e. a GPU eligible for it now (reserve aside) or, in
  pack mode, one that would be once our jobs on it end. Jobs that can never start (more GPUs
  than the pool, ``mem`` above every GPU, more GPUs than the reserve ever allows) do not starve.
- ``max_parallel`` (0 = no limit) counts every job of ours running at once, CPU jobs included.
- Among eligible GPUs: most available memory first (ties: lower index), or least available that
  still fits with ``Placement.BEST_FIT``. ``Placement.AUTO`` (the default) is best fit in pack
  mode and most available otherwise: measured in benchmarks/simulate.py (BENCHMARKS.md).

Speed: one pass over 100k waiting jobs on 8 GPUs must take about 50 ms at most, growing
linearly. Resources only shrink within a pass, so once a request shape (GPUs, mem) fails it fails
for every later job of that shape, or of any shape needing as many GPUs or more and as much memory
or more; its reason is worked out once and shared until the next start changes the GPUs. So the
pass (``run``) looks only at the first job of each shape since the GPUs last changed and at the
jobs that start; the runs of jobs in between get their shape's reason in bulk, from a list of
small shape codes, and the reasons come back as a mapping over those columns (``Reasons``), not
a dict of 100k names. The one exception to shrinking: in pack mode with a reserve, a start on a
GPU free of our jobs can make room (the reserve does not limit GPUs holding our jobs). Then what
failed is forgotten, and if a job failed before that start the pass sweeps the waiting jobs
again, so nothing that could start waits for the next poll. ``run_each`` is the same pass one
job at a time: the reference the tests hold ``run`` to.

Size: the placement policy is one pure function with the words for every wait; one place for
each rule (DESIGN.md 4), shared by the engine, the tests, the simulator and the dashboard.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import ItemsView, Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from itertools import compress, repeat
from operator import attrgetter, is_not

from gtui.core.gpus.claims import NeighbourClaim
from gtui.core.gpus.holders import held_text, holders
from gtui.core.gpus.snapshot import NODE_GPU_STRIDE, GpuInfo, GpuSnapshot, gpu_label
from gtui.core.gpus.snapshot import pool_totals as snapshot_pool_totals
from gtui.core.model import Mode, Placement, Settings
from gtui.core.reserve import reserve_allows
from gtui.core.units import format_mib

IDLE_USED_PERCENT = 3  # exclusive mode: used memory under this share of total (seed 000, 13.2)
HELD_REASON = "held by you"
PAUSED_REASON = "queue paused"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A job that could start now (state queued or held)."""

    name: str
    gpus: int
    mem_mib: int | None  # per GPU; None = needs its GPUs to itself
    priority: int = 0
    order: int = 0  # position in the queue file
    after: tuple[str, ...] = ()
    waiting_since: float = 0.0
    held: bool = False
    # Worked out once per Candidate (the engine keeps them between passes): the rank order
    # (priority, then queue order) as one int, and the request shape, marked special when the
    # job is held or has an `after`, as a small shared int. The pass works on lists of these
    # (see _Pass.run); a Candidate holds nothing else, as 100k of them must stay small.
    rank: int | None = field(init=False, repr=False, compare=False)
    code: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        special = self.held or bool(self.after)
        object.__setattr__(self, "rank", _rank(self.priority, self.order))
        object.__setattr__(self, "code", shape_code(self.gpus, self.mem_mib, special))

    @classmethod
    def make(
        cls,
        name: str,
        gpus: int,
        mem_mib: int | None,
        priority: int,
        order: int,
        after: tuple[str, ...],
        waiting_since: float,
        held: bool,
    ) -> Candidate:
        """``Candidate(...)`` with every field given, filled through its slots: the frozen
        ``__init__`` sets each through ``object.__setattr__``, and the engine's first pass
        over a 100,000-job sweep makes 100,000 of them (0.55 -> 0.30 s). Equal to the
        constructor's (tests/test_policy.py)."""
        c = _new(cls)
        _SET_NAME(c, name)
        _SET_GPUS(c, gpus)
        _SET_MEM(c, mem_mib)
        _SET_PRIORITY(c, priority)
        _SET_ORDER(c, order)
        _SET_AFTER(c, after)
        _SET_SINCE(c, waiting_since)
        _SET_HELD(c, held)
        _SET_RANK(c, _rank(priority, order))
        _SET_CODE(c, shape_code(gpus, mem_mib, held or bool(after)))
        return c


# The slots' setters, for Candidate.make (a frozen class refuses plain assignment).
_new = object.__new__
(
    _SET_NAME,
    _SET_GPUS,
    _SET_MEM,
    _SET_PRIORITY,
    _SET_ORDER,
    _SET_AFTER,
    _SET_SINCE,
    _SET_HELD,
    _SET_RANK,
    _SET_CODE,
) = (
    Candidate.__dict__[f].__set__
    for f in (
        "name", "gpus", "mem_mib", "priority", "order", "after", "waiting_since", "held",
        "rank", "code",
    )
)


_ORDER_BITS = 21
_PRIORITY_BIAS = 256


def _rank(priority: int, order: int) -> int | None:
    """Priority (higher first), then queue order, as one int; None past 2**21 queue positions
    (the pass then sorts by the two keys). For priorities in (-256, 256] it stays below 2**30,
    one CPython digit, which the sort compares a third faster than a longer int (measured:
    10.4 vs 14.9 ms for 100k Candidates in 4 priorities)."""
    if 0 <= order < 1 << _ORDER_BITS:
        return ((_PRIORITY_BIAS - priority) << _ORDER_BITS) + order
    return None


# Request shapes as small ints, shared by every Candidate of the same shape (like sys.intern):
# a list of them is compared, hashed and looked up without touching the Candidates. The table
# only grows with distinct (GPUs, mem) pairs, a few dozen in a real queue.
_CODES: dict[tuple[int, int | None, bool], int] = {}
_CODE_KEYS: list[tuple[int, int | None, bool]] = []
_SPECIAL_CODES: set[int] = set()
_PLAIN: dict[int, int] = {}  # a special code -> the code of the same shape, not special
_CODES_LOCK = threading.Lock()
_BLOCKED = -1  # held, or an `after` not met: never placed in this pass
_STARTED = -2  # started earlier in this pass


def shape_code(gpus: int, mem_mib: int | None, special: bool = False) -> int:
    """The shared small int for a request shape (``special``: held or with ``after``)."""
    key = (gpus, mem_mib, special)
    code = _CODES.get(key)
    if code is None:
        plain = shape_code(gpus, mem_mib) if special else -1  # before taking the lock
        with _CODES_LOCK:
            code = _CODES.get(key)
            if code is None:
                code = len(_CODE_KEYS)
                _CODE_KEYS.append(key)
                if special:
                    _PLAIN[code] = plain
                    _SPECIAL_CODES.add(code)
                _CODES[key] = code  # last: a reader that finds it finds the rest
    return code


@dataclass(frozen=True)
class Allocation:
    """A running or suspended job of ours and what it holds."""

    name: str
    gpus: tuple[int, ...]
    mem_mib: int | None  # declared per GPU; None = the whole GPU
    observed_mib: Mapping[int, int] = field(default_factory=dict)  # per GPU, seen in use


@dataclass(frozen=True)
class Start:
    name: str
    gpus: tuple[int, ...]


class Reasons(Mapping[str, str]):
    """Why each job that does not start waits, by name: a read-only mapping over the pass's
    two columns, the ranked Candidates and a text per rank position (None: it started).

    At 100k waiting jobs a dict of every name took as long as the rest of the pass, and its
    main reader, the engine, only walks it: ``items()`` walks the columns, and the first
    lookup by name builds the index once. Two Reasons over the same Candidates compare by
    their texts, which is how the engine sees that a poll changed nothing.
    """

    __slots__ = ("_index", "_len", "_ranked", "_texts")

    def __init__(
        self, ranked: Sequence[Candidate], texts: Sequence[str | None], nones: int | None = None
    ) -> None:
        """``nones``: how many texts are None, if the caller knows (saves counting 100k)."""
        self._ranked = ranked
        self._texts = texts
        self._len = len(texts) - (texts.count(None) if nones is None else nones)
        self._index: dict[str, int] | None = None

    @property
    def ranked(self) -> Sequence[Candidate]:
        """The pass's Candidates in rank order (one column)."""
        return self._ranked

    @property
    def texts(self) -> Sequence[str | None]:
        """The text of each rank position (None: it started) (the other column)."""
        return self._texts

    def __getitem__(self, name: str) -> str:
        index = self._index
        if index is None:
            names = map(_NAME, self._ranked)
            index = self._index = dict(zip(names, range(len(self._texts)), strict=True))
        text = self._texts[index[name]]
        if text is None:
            raise KeyError(name)
        return text

    def __iter__(self) -> Iterator[str]:
        return compress(map(_NAME, self._ranked), map(is_not, self._texts, repeat(None)))

    def __len__(self) -> int:
        return self._len

    def items(self) -> ItemsView[str, str]:
        return _ReasonItems(self)

    def values(self) -> ValuesView[str]:
        return _ReasonValues(self)

    def pairs(self) -> Iterator[tuple[str, str]]:
        """(name, text) in rank order, from the columns."""
        texts = self._texts
        pairs = zip(map(_NAME, self._ranked), texts, strict=True)
        return compress(pairs, map(is_not, texts, repeat(None)))  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Reasons):
            if self._len != other._len:
                return False
            if self._ranked == other._ranked:  # the same Candidates: an identity check each
                return self._texts == other._texts
        if isinstance(other, Mapping):
            return dict(self.pairs()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Reasons({dict(self.pairs())!r})"


class _ReasonItems(ItemsView[str, str]):
    _mapping: Reasons

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return self._mapping.pairs()


class _ReasonValues(ValuesView[str]):
    _mapping: Reasons

    def __iter__(self) -> Iterator[str]:
        return (text for _, text in self._mapping.pairs())


@dataclass(frozen=True)
class Decision:
    starts: tuple[Start, ...]
    reasons: Mapping[str, str]  # every candidate that does not start -> why, in words
    available_mib: dict[int, int]  # per GPU in the pool, the formula of DESIGN.md 4.1, after starts
    reserved: tuple[int, ...] = ()  # free GPUs the reserve rule keeps for others right now
    starving: str | None = None  # the job later jobs must leave GPUs to, if any


def gpu_names(info: GpuInfo) -> tuple[set[int], set[str]]:
    """The numbers and names ``gpus`` / ``exclude`` may call a GPU by: its index (on a cluster
    its index on its node: ``exclude = [1]`` is GPU 1 of every node) and a MIG instance's
    GPU's; on a cluster also its node and ``node:index`` (issue 23)."""
    parent = info.mig_parent  # a MIG instance is named by its GPU's index too
    if info.node is None:
        local = info.index
    else:
        local = info.node_index if info.node_index is not None else info.index % NODE_GPU_STRIDE
    numbers = {local} if parent is None else {local, parent}
    if info.node is None:
        return numbers, set()
    names = {info.node, info.label}
    if parent is not None:
        names.add(f"{info.node}:{parent}")
    return numbers, names


def chosen(numbers: set[int], names: set[str], settings: Settings) -> bool:
    """Whether ``gpus`` takes a GPU of these numbers and names: every GPU when it lists none,
    else one a number or a name of the list calls it by (numbers and node names add up)."""
    if settings.gpus == "all" and not settings.cluster_gpus:
        return True
    return bool(
        (settings.gpus != "all" and numbers.intersection(settings.gpus))
        or names.intersection(settings.cluster_gpus)
    )


def excluded(numbers: set[int], names: set[str], settings: Settings) -> bool:
    """Whether ``exclude`` (numbers, node names) leaves a GPU of these numbers and names out."""
    return bool(
        numbers.intersection(settings.exclude) or names.intersection(settings.cluster_exclude)
    )


def pool_totals(settings: Settings, snapshot: GpuSnapshot) -> list[int | None] | None:
    """Total memory of each GPU in the pool, for the queue file's pool checks (None: unknown):
    on a cluster by this module's rule of numbers and node names, else the snapshot's own."""
    if not any(g.node is not None for g in snapshot.gpus):
        return snapshot_pool_totals(settings, snapshot)
    return [g.total for g in _Pass(snapshot, (), settings, 0.0).pool]


def format_wait(seconds: float) -> str:
    """``45`` -> ``45s``, ``720`` -> ``12m``, ``7500`` -> ``2h05m``: how long a job has waited."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    h, rem = divmod(s, 3600)
    if h < 48:
        return f"{h}h{rem // 60:02d}m"
    return f"{h // 24}d{h % 24}h"


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
) -> Decision:
    """One placement pass: which candidates start on which GPUs, and why each other one waits.
    ``claims``: neighbours' live claims on our GPUs (DESIGN.md 4.1)."""
    return _Pass(snapshot, allocations, settings, now, claims=claims).run(
        candidates, dep_states, running_count, queue_paused
    )


class _Gpu:
    """One pool GPU's state during a pass (mutated as jobs start)."""

    __slots__ = (
        "avail",
        "busy",
        "claims",
        "idle",
        "index",
        "mig",
        "node",
        "others",
        "ours",
        "promised",
        "total",
        "whole",
    )

    def __init__(
        self,
        index: int,
        total: int,
        used: int,
        util: int | None,
        mig: bool = False,
        node: str | None = None,
    ) -> None:
        self.index = index
        self.mig = mig  # a MIG instance (issue 19.6): one job at a time, of one GPU
        self.node = node  # a cluster's node (issue 23); None on one server
        self.total = total
        self.avail = total - used
        self.ours = 0  # jobs of ours on it
        self.whole = False  # held by a job of ours that gave no mem
        self.others = used  # memory not ours (corrected once allocations are known)
        self.idle = (util or 0) == 0 and used * 100 < IDLE_USED_PERCENT * total
        parts = []
        if util:
            parts.append(f"util {util}%")
        if used * 100 >= IDLE_USED_PERCENT * total:
            parts.append(f"mem {used * 100 // total}% used")
        self.busy = " ".join(parts)
        self.promised = 0  # neighbours' claims: declared, not yet allocated
        self.claims: list[NeighbourClaim] = []

    def claim(self, c: NeighbourClaim) -> None:
        """A neighbour's live claim on this GPU: its promised memory is not available, and
        the GPU is not idle (DESIGN.md 4.1)."""
        promised = c.promised_mib
        self.avail -= promised
        self.promised += promised
        self.claims.append(c)
        if not self.busy:
            self.busy = "claimed"  # idle but for the claim
        self.idle = False


_Shape = tuple[int, int | None]


class _Pass:
    """The state of one placement pass; ``run`` walks the candidates in rank order."""

    def __init__(
        self,
        snapshot: GpuSnapshot,
        allocations: Sequence[Allocation],
        settings: Settings,
        now: float,
        *,
        shape_cache: bool = True,
        claims: Sequence[NeighbourClaim] = (),
    ) -> None:
        self.settings = settings
        self.now = now
        self.k = max(0, settings.reserve)
        self.reserve_rule = settings.reserve_rule
        self.mode = settings.mode
        self.exclusive = settings.mode == Mode.EXCLUSIVE
        self.pack = settings.mode == Mode.PACK
        self.best_fit = settings.placement == Placement.BEST_FIT or (
            settings.placement == Placement.AUTO and self.pack
        )
        self.shape_cache = shape_cache
        self.pool: list[_Gpu] = []
        self.notes: list[str] = []  # why configured GPUs are not in the pool
        # a cluster's GPUs' nodes, for reasons that name GPUs as people do (node2:3)
        self.nodes_of = {g.index: g.node for g in snapshot.gpus if g.node is not None}
        out = set(settings.pool_exclude)  # the quarantine's: pool numbers
        seen: set[int] = set()
        names_seen: set[str] = set()
        for info in sorted(snapshot.gpus, key=attrgetter("index")):
            numbers, names = gpu_names(info)
            seen |= numbers
            names_seen |= names
            parent = info.mig_parent
            if info.index in out or (parent is not None and parent in out):
                continue
            if not chosen(numbers, names, settings) or excluded(numbers, names, settings):
                continue
            if info.lost:
                self.notes.append(f"{_gpu_list([info.index], self.nodes_of)} lost")
            elif info.mem_total_mib is None or info.mem_used_mib is None:
                self.notes.append(f"{_gpu_list([info.index], self.nodes_of)} memory unknown")
            else:
                self.pool.append(
                    _Gpu(
                        info.index,
                        info.mem_total_mib,
                        info.mem_used_mib,
                        info.util,
                        mig=parent is not None,
                        node=info.node,
                    )
                )
        if settings.gpus != "all":
            missing = sorted(set(settings.gpus) - seen - set(settings.exclude))
            if missing:
                self.notes.append(_gpu_list(missing) + " not found")
        unknown = sorted(set(settings.cluster_gpus) - names_seen)
        if unknown:
            self.notes.append(", ".join(unknown) + " not found")
        if not self.pool and snapshot.error:
            self.notes.append(snapshot.error)
        by_index = {g.index: g for g in self.pool}
        self.infos = {i.index: i for i in snapshot.gpus if i.index in by_index and i.processes}
        self.our_names = frozenset(a.name for a in allocations)
        self.holder_texts: dict[int, str] = {}  # GPU index -> who holds it, in words
        for alloc in allocations:
            for index in alloc.gpus:
                gpu = by_index.get(index)
                if gpu is None:
                    continue
                observed = max(0, alloc.observed_mib.get(index, 0))
                declared = gpu.total if alloc.mem_mib is None else alloc.mem_mib
                gpu.ours += 1
                gpu.avail -= max(0, declared - observed)
                gpu.others -= observed
                if alloc.mem_mib is None or gpu.mig:  # a MIG instance takes one job
                    gpu.whole = True
        for c in claims:
            gpu = by_index.get(c.gpu)
            if gpu is not None:
                gpu.claim(c)
        for gpu in self.pool:
            gpu.others = max(0, gpu.others)
        self.pool_n = len(self.pool)
        # A cluster (issue 23): a multi-GPU job stays on one node, so the widest node bounds it.
        sizes: dict[str | None, int] = {}
        for g in self.pool:
            sizes[g.node] = sizes.get(g.node, 0) + 1
        self.nodes = len(sizes) > 1 or None not in sizes
        self.widest = max(sizes.values(), default=0)
        self.node_reserve = {node: k for node, k in settings.cluster_reserve if k > 0}
        self.totals_desc = sorted((g.total for g in self.pool), reverse=True)
        # Failure bounds: fail_mem[n] = the least mem a request of <= n GPUs failed with;
        # fail_idle = the fewest GPUs a request without mem failed with.
        self.fail_mem: list[float] = []
        self.fail_idle = 0
        self.forget_failures()
        self.permanent: dict[_Shape, str] = {}
        # the most free GPUs ever allowed
        self.reserve_cap = reserve_allows(self.pool_n, self.k, self.reserve_rule)
        self.said: dict[tuple[int, str, int], str] = {}  # see reason_for
        self.avails: list[int] | None = None  # sorted available memory, for reason_for
        self.avail_texts: dict[int, str] = {}  # GPU index -> its available memory in words
        self.mem_texts: dict[int, str] = {}  # a request's mem in words
        self.starving: str | None = None
        self.starving_for = ""  # "waiting for X (starving since 12m)"
        self.protected: frozenset[int] = frozenset()
        self.dep_states: Mapping[str, str] = {}
        self.after_cache: dict[tuple[str, ...], str] = {}  # "" = every dependency done

    # ---------------------------------------------------------------- eligibility
    def ok(self, g: _Gpu, m: int | None) -> bool:
        """May a job asking ``m`` per GPU go on ``g`` now (reserve and starvation aside)?"""
        if g.ours:
            return self.pack and m is not None and not g.whole and g.avail >= m
        if m is None or self.exclusive:
            return g.idle and (m is None or g.avail >= m)
        return g.avail >= m

    def why_not(self, g: _Gpu, m: int | None, m_text: str = "") -> str | None:
        """``ok`` in words: None if eligible, else what keeps ``g`` from the job."""
        if g.ours:
            if g.whole:
                return "ours (one job per MIG instance)" if g.mig else "ours (whole GPU)"
            if not self.pack or m is None:
                return "ours"
        elif (m is None or self.exclusive) and not g.idle:
            return g.busy
        if m is not None and g.avail < m:
            text = self.avail_texts.get(g.index)
            if text is None:
                text = self.avail_texts[g.index] = format_mib(max(0, g.avail))
            return f"{text} < {m_text or format_mib(m)}"
        return None

    def could_use(self, g: _Gpu, m: int | None) -> bool:
        """Eligible now, or (pack) once our jobs on ``g`` end: what a starving job keeps."""
        if self.ok(g, m):
            return True
        if not (self.pack and g.ours):
            return False
        if m is None:
            return not g.claims and g.others * 100 < IDLE_USED_PERCENT * g.total
        return g.total - g.others - g.promised >= m

    # ---------------------------------------------------------------- placing
    def try_place(self, n: int, m: int | None, skip: frozenset[int]) -> list[_Gpu] | None:
        """The GPUs a job gets now, or None: eligibility, the reserve, then the placement order."""
        ok = self.ok
        eligible = [g for g in self.pool if g.index not in skip and ok(g, m)]
        if n > 1:  # CUDA gives a process one MIG instance: a multi-GPU job takes whole GPUs
            eligible = [g for g in eligible if not g.mig]
        if self.node_reserve:
            eligible = self.within_node_reserves(eligible)
        free = sum(1 for g in eligible if not g.ours)
        allowed = reserve_allows(free, self.k, self.reserve_rule)
        if len(eligible) - free + min(free, allowed) < n:
            return None
        if self.best_fit:
            eligible.sort(key=lambda g: (g.avail, g.index))
        else:
            eligible.sort(key=lambda g: (-g.avail, g.index))
        if self.nodes and n > 1:
            return self.on_one_node(eligible, n, allowed)
        chosen: list[_Gpu] = []
        for g in eligible:
            if not g.ours:
                if allowed <= 0:
                    continue
                allowed -= 1
            chosen.append(g)
            if len(chosen) == n:
                break
        return chosen

    def within_node_reserves(self, eligible: list[_Gpu]) -> list[_Gpu]:
        """``[cluster] reserve = {node1 = 1}``: on a node with a reserve of its own, only as
        many of its free eligible GPUs as the reserve rule allows stay eligible (the first in
        placement order); GPUs holding jobs of ours are not limited, as with ``reserve``."""
        order = (lambda g: (g.avail, g.index)) if self.best_fit else (lambda g: (-g.avail, g.index))
        eligible = sorted(eligible, key=order)
        left = {
            node: reserve_allows(
                sum(1 for g in eligible if g.node == node and not g.ours), k, self.reserve_rule
            )
            for node, k in self.node_reserve.items()
        }
        out = []
        for g in eligible:
            if not g.ours and g.node in left:
                if left[g.node] <= 0:
                    continue
                left[g.node] -= 1
            out.append(g)
        return out

    @staticmethod
    def on_one_node(eligible: list[_Gpu], n: int, allowed: int) -> list[_Gpu] | None:
        """The first node, in placement order, where ``n`` eligible GPUs fit within the
        reserve's ``allowed`` free ones: its GPUs in placement order (issue 23)."""
        per_node: dict[str | None, list[_Gpu]] = {}
        for g in eligible:
            per_node.setdefault(g.node, []).append(g)
        for gpus in per_node.values():
            left = allowed
            chosen = []
            for g in gpus:
                if not g.ours:
                    if left <= 0:
                        continue
                    left -= 1
                chosen.append(g)
                if len(chosen) == n:
                    return chosen
        return None

    def take(self, chosen: list[_Gpu], m: int | None) -> bool:
        """Start a job on ``chosen``. True if it took a GPU that held no job of ours: in pack
        mode with a reserve that can make *more* GPUs usable (the reserve does not limit GPUs
        holding our jobs), the one way resources grow within a pass."""
        converted = False
        for g in chosen:
            converted = converted or not g.ours
            g.ours += 1
            if m is None:
                g.whole = True
                g.avail -= g.total
            else:
                g.avail -= m
                g.whole = g.whole or g.mig  # one job per MIG instance
        return converted and self.pack and (self.k > 0 or bool(self.node_reserve))

    def forget_failures(self) -> None:
        """Resources grew (see ``take``): earlier failures prove nothing any more."""
        self.fail_mem = [float("inf")] * (self.pool_n + 1)
        self.fail_idle = self.pool_n + 1

    def known_to_fail(self, n: int, m: int | None) -> bool:
        if not self.shape_cache:
            return False
        if m is None:
            return n >= self.fail_idle
        return m >= self.fail_mem[n]

    def failed(self, n: int, m: int | None) -> None:
        if m is None:
            self.fail_idle = min(self.fail_idle, n)
            return
        fail = self.fail_mem
        for i in range(n, len(fail)):
            if m < fail[i]:
                fail[i] = m

    # ---------------------------------------------------------------- reasons
    def header(self, n: int, m: int | None, m_text: str) -> str:
        s = "GPU" if n == 1 else "GPUs"
        if m is None:
            return f"needs {n} {s} idle ({'exclusive' if self.exclusive else 'no mem set'})"
        if self.exclusive:
            return f"needs {n} {s} idle (exclusive) with {m_text}"
        return f"needs {n} {s} with {m_text}"

    def permanent_reason(self, n: int, m: int | None) -> str | None:
        """Why a request can never be met by this pool whatever frees, or None (cheap: it runs
        for every new request shape)."""
        if n > self.pool_n or (m is not None and self.totals_desc[n - 1] < m):
            key = (n, m)
            reason = self.permanent.get(key)
            if reason is None:
                reason = self.permanent[key] = self.never_fits(n, m)
            return reason
        if self.nodes and n > self.widest:
            return f"needs {n} GPUs on one node: the largest node has {self.widest}"
        if n > self.reserve_cap and (m is None or not self.pack):
            cap = self.reserve_cap
            s = "GPU" if n == 1 else "GPUs"
            return (
                f"needs {n} {s}: reserve {self.k} leaves at most {cap} of the pool's {self.pool_n}"
            )
        return None

    def never_fits(self, n: int, m: int | None) -> str:
        s = "GPU" if n == 1 else "GPUs"
        if n > self.pool_n or m is None:
            reason = f"needs {n} {s}, pool has {self.pool_n}"
            return f"{reason} ({', '.join(self.notes)})" if self.notes else reason
        fits = sum(1 for t in self.totals_desc if t >= m)
        where = (
            f"the largest GPU has {format_mib(self.totals_desc[0])}"
            if fits == 0
            else f"only {fits} of the pool's GPUs {'has' if fits == 1 else 'have'} that much"
        )
        return f"needs {n} {s} with {format_mib(m)}: {where}"

    def reason_for(self, n: int, m: int | None, protected: bool) -> str:
        """``explain``, shared by every request that would get the same words: the same GPUs
        count, the same memory as shown, and the same GPUs short of it (cleared by ``changed``).
        """
        if not self.shape_cache:
            return self.explain(n, m, protected)
        if m is None:
            m_text = ""
            key: tuple[int, str, int] = (n, "", 0)
        else:
            if self.avails is None:
                self.avails = sorted(g.avail for g in self.pool)
            m_text = self.mem_texts.get(m, "")
            if not m_text:
                m_text = self.mem_texts[m] = format_mib(m)
            key = (n, m_text, bisect_left(self.avails, m))
        reason = self.said.get(key)
        if reason is None:
            reason = self.said[key] = self.explain(n, m, protected, m_text)
        return reason

    def changed(self) -> None:
        """The GPUs (or the starvation guard) changed: reasons must be worked out again."""
        self.said.clear()
        self.avails = None
        self.avail_texts.clear()

    def explain(self, n: int, m: int | None, protected: bool, m_text: str = "") -> str:
        """Why a request does not fit now, as in the seed's logs (13.3)."""
        groups: dict[str, list[int]] = {}
        free = busy_ours = 0
        m_text = m_text or ("" if m is None else format_mib(m))
        claimed: list[_Gpu] = []  # kept from the job by a neighbour's claim (among others)
        short: list[_Gpu] = []  # kept from the job by memory others hold
        for g in self.pool:
            why = self.why_not(g, m, m_text)
            if why is None:
                if g.ours:
                    busy_ours += 1
                else:
                    free += 1
            else:
                groups.setdefault(why, []).append(g.index)
                if g.claims and not g.ours:
                    claimed.append(g)
                if not g.ours and g.others > 0 and (m is None or g.avail < m):
                    short.append(g)
        allowed = reserve_allows(free, self.k, self.reserve_rule)
        usable = busy_ours + min(free, allowed)
        if protected and usable >= n:
            return self.starving_for
        details = [f"{_gpu_list(indices, self.nodes_of)} {why}" for why, indices in groups.items()]
        if free > allowed:
            details.append(f"reserve {self.k} keeps {free - allowed}")
        text = f"{self.header(n, m, m_text)}: {usable or 'none'} eligible"
        text = f"{text} ({', '.join(details)})" if details else text
        if short:
            text += self.holders_text(short)
        return text + _claims_text(claimed, self.now) if claimed else text

    def holders_text(self, gpus: Sequence[_Gpu]) -> str:
        """``; GPU 2: 61G held by alice's python train.py, 3 h``: who holds the memory that
        keeps a job from ``gpus`` (the largest holder of each, issue 19.1); "" when the GPUs
        list no such process (NVML hides other users' processes on some systems)."""
        said = []
        for g in gpus:
            text = self.holder_texts.get(g.index)
            if text is None:
                info = self.infos.get(g.index)
                found = holders(info, self.our_names) if info is not None else []
                text = held_text(info, found[0], self.now) if info is not None and found else ""
                if len(found) > 1:
                    text += f" (+{len(found) - 1} more)"
                self.holder_texts[g.index] = text
            if text:
                said.append(text)
        shown = said[:MAX_CLAIMS_SAID]
        if len(said) > MAX_CLAIMS_SAID:
            shown.append(f"{len(said) - MAX_CLAIMS_SAID} more GPU(s) held")
        return "; " + "; ".join(shown) if shown else ""

    def after_reason(self, after: tuple[str, ...]) -> str | None:
        """``after prep (running), fetch (unknown job)``, or None once every one is done."""
        if len(after) == 1:  # the common case, without the list
            state = self.dep_states.get(after[0])
            return None if state == "done" else "after " + _dep_text(after[0], state)
        unmet = []
        for dep in after:
            state = self.dep_states.get(dep)
            if state != "done":
                unmet.append(_dep_text(dep, state))
        return "after " + ", ".join(unmet) if unmet else None

    # ---------------------------------------------------------------- the pass
    def run(
        self,
        candidates: Sequence[Candidate],
        dep_states: Mapping[str, str],
        running_count: int,
        queue_paused: bool,
    ) -> Decision:
        """The pass. The loop over the ranked jobs visits only the jobs that can change
        something: the first job of each request shape since the GPUs last changed, and the
        ones that start. Every job in between waits for the reason its shape already got,
        and those stretches are filled in bulk (``map`` over a list of shape codes), without
        touching the Candidates. ``run_each`` is the same pass one job at a time, the
        reference the tests hold this one to."""
        if not self.shape_cache:
            return self.run_each(candidates, dep_states, running_count, queue_paused)
        try:
            ranked = sorted(candidates, key=_RANK)
        except TypeError:  # a queue position past 2**21 has no rank int: sort by the two keys
            ranked = sorted(candidates, key=_ORDER)
            ranked.sort(key=_PRIORITY, reverse=True)
        if self.settings.multi_gpu_first:
            ranked.sort(key=_GPUS, reverse=True)
        codes = list(map(_CODE, ranked))
        present = set(codes)
        # Held jobs and jobs whose `after` is not met never start and change nothing: their
        # reasons are fixed now, and their positions are left out of the sweep.
        fixed: dict[int, str] = {}
        specials = present & _SPECIAL_CODES
        if specials:
            self.dep_states = dep_states
            after_reason, after_cache = self.after_reason, self.after_cache
            for i in compress(range(len(codes)), map(specials.__contains__, codes)):
                c = ranked[i]
                if c.held:
                    fixed[i] = HELD_REASON
                    codes[i] = _BLOCKED
                    continue
                if queue_paused:
                    continue
                after = c.after
                if len(after) == 1:  # most: one reason per job, nothing to share
                    ar = after_reason(after) or ""
                else:
                    ar = after_cache.get(after)  # type: ignore[assignment]
                    if ar is None:
                        ar = after_cache[after] = after_reason(after) or ""
                if ar:
                    fixed[i] = ar
                    codes[i] = _BLOCKED
                else:
                    codes[i] = _PLAIN[codes[i]]  # waits like any other job
            present = set(codes)
        if queue_paused:
            reasons = dict.fromkeys(map(_NAME, ranked), PAUSED_REASON)
            for i in fixed:
                reasons[ranked[i].name] = HELD_REASON
            return self.decision([], reasons, None)
        self.dep_states = dep_states
        present -= _SENTINELS
        texts: list[str | None] = [None] * len(codes)
        starts: list[Start] = []
        first = True
        while True:
            new, probe, again = self.sweep_codes(
                ranked, codes, present, texts, running_count + len(starts), first
            )
            first = False
            starts += new
            if not again:
                break
        for i, text in fixed.items():
            texts[i] = text
        return self.decision(starts, Reasons(ranked, texts, nones=len(starts)), probe)

    def sweep_codes(
        self,
        ranked: list[Candidate],
        codes: list[int],
        present: set[int],
        texts: list[str | None],
        running: int,
        first: bool,
    ) -> tuple[list[Start], int | None, bool]:
        """``sweep`` over the shape codes: writes each waiting job's reason into ``texts`` (by
        rank position), marks started jobs ``_STARTED`` in ``codes``, and returns (starts,
        probe, sweep again?). Every rule and every word comes from the same methods as
        ``sweep``; only the walk differs.

        The walk: ``dead`` maps the codes whose reason is known until the GPUs next change
        (cleared then, as in ``sweep``); a heap holds the next position of every other code.
        The next job to look at is the heap's least; the ones before it all have a dead code.
        """
        n_all = len(codes)
        limit = max(0, self.settings.max_parallel)
        starts: list[Start] = []
        target = None if first else self.starving
        self.starving, self.starving_for, self.protected = None, "", frozenset()
        self.forget_failures()
        self.changed()
        first_blocked = first
        any_failure = grew_after_a_failure = False
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
            perm = self.permanent_reason(n, m)
            if perm is not None:
                texts[q] = dead[k] = perm
                continue
            protected = bool(self.protected)
            if not self.known_to_fail(n, m):
                chosen = self.try_place(n, m, self.protected)
                if chosen is not None:
                    if self.take(chosen, m):
                        self.forget_failures()
                        grew_after_a_failure = grew_after_a_failure or any_failure
                    starts.append(Start(c.name, tuple(sorted(g.index for g in chosen))))
                    codes[q] = _STARTED
                    texts[q] = None
                    running += 1
                    dead = dict.fromkeys(_SENTINELS)
                    self.changed()
                    if limit and running >= limit:
                        rest = p
                        break
                    heap = heap_from(p)
                    continue
                self.failed(n, m)
            any_failure = True
            if m is not None and (probe is None or m < probe):
                probe = m
            reason = self.reason_for(n, m, protected)
            if first_blocked or c.name == target:
                first_blocked = False
                waited = self.now - c.waiting_since
                if waited > self.settings.starve_after_s or c.name == target:
                    texts[q] = reason + self.starve(c, waited)
                    dead = dict.fromkeys(_SENTINELS)  # later reasons now name the starving job
                    self.changed()
                    heap = heap_from(p)
                    continue
            texts[q] = dead[k] = reason

        if rest < n_all:  # max_parallel reached: no more starts; why each remaining job waits
            slot = f"max_parallel {limit} reached"
            tail: dict[int, str | None] = dict.fromkeys(_SENTINELS)
            for k in set(codes[rest:]) - _SENTINELS:
                gpus, mem, _ = _CODE_KEYS[k]
                tail[k] = (self.permanent_reason(gpus, mem) if gpus > 0 else None) or slot
            texts[rest:] = map(tail.__getitem__, codes[rest:])
        return starts, probe, grew_after_a_failure and rest == n_all

    def run_each(
        self,
        candidates: Sequence[Candidate],
        dep_states: Mapping[str, str],
        running_count: int,
        queue_paused: bool,
    ) -> Decision:
        """The pass one job at a time: the reference ``run`` must agree with."""
        ranked = sorted(candidates, key=attrgetter("order"))
        ranked.sort(key=attrgetter("priority"), reverse=True)
        if self.settings.multi_gpu_first:
            ranked.sort(key=attrgetter("gpus"), reverse=True)
        if queue_paused:
            reasons = {c.name: HELD_REASON if c.held else PAUSED_REASON for c in ranked}
            return self.decision([], reasons, None)
        self.dep_states = dep_states
        starts: list[Start] = []
        todo = ranked
        first = True
        while True:
            new, reasons, probe, again = self.sweep(todo, running_count + len(starts), first)
            first = False
            starts += new
            if not again:
                return self.decision(starts, reasons, probe)
            # Pack mode with a reserve: a job that failed early may fit now. Sweep the jobs
            # still waiting again, in rank order, as the next pass would (rare; at most once
            # per GPU that took its first job of ours).
            done = {s.name for s in new}
            gone = []  # where the started ones stand: near the front, so stop once all found
            for i, c in enumerate(todo):
                if c.name in done:
                    gone.append(i)
                    if len(gone) == len(done):
                        break
            todo = list(todo)
            for i in reversed(gone):
                del todo[i]

    def sweep(
        self, ranked: list[Candidate], running: int, first: bool
    ) -> tuple[list[Start], dict[str, str], int | None, bool]:
        """``run_each``'s walk, one job at a time and nothing skipped: (starts, reasons, probe,
        sweep again?). Kept as plain as the rules allow: it is what ``sweep_codes`` is checked
        against.

        Only the first sweep picks the starving job; a later sweep protects that same job again
        once it reaches it (and forgets it if it starts), never another one.
        """
        limit = max(0, self.settings.max_parallel)
        reasons: dict[str, str] = {}
        starts: list[Start] = []
        target = None if first else self.starving
        self.starving, self.starving_for, self.protected = None, "", frozenset()
        self.forget_failures()
        self.changed()
        first_blocked = first
        any_failure = grew_after_a_failure = False
        probe: int | None = None  # least mem among jobs that wait for GPUs (for `reserved`)
        rest = 0 if limit and running >= limit else len(ranked)  # where max_parallel is hit
        for i, c in enumerate(ranked[:rest]):
            if c.held:
                reasons[c.name] = HELD_REASON
                continue
            ar = self.after_reason(c.after) if c.after else None
            if ar:
                reasons[c.name] = ar
                continue
            n, m = c.gpus, c.mem_mib
            if n <= 0:
                starts.append(Start(c.name, ()))
                running += 1
                if limit and running >= limit:
                    rest = i + 1
                    break
                continue
            perm = self.permanent_reason(n, m)
            if perm is not None:
                reasons[c.name] = perm
                continue
            protected = bool(self.protected)
            if not self.known_to_fail(n, m):
                chosen = self.try_place(n, m, self.protected)
                if chosen is not None:
                    if self.take(chosen, m):
                        self.forget_failures()
                        grew_after_a_failure = grew_after_a_failure or any_failure
                    starts.append(Start(c.name, tuple(sorted(g.index for g in chosen))))
                    running += 1
                    self.changed()
                    if limit and running >= limit:
                        rest = i + 1
                        break
                    continue
                self.failed(n, m)
            any_failure = True
            if m is not None and (probe is None or m < probe):
                probe = m
            reason = self.reason_for(n, m, protected)
            if first_blocked or c.name == target:
                first_blocked = False
                waited = self.now - c.waiting_since
                if waited > self.settings.starve_after_s or c.name == target:
                    reasons[c.name] = reason + self.starve(c, waited)
                    self.changed()  # reasons of later jobs now name the starving job
                    continue
            reasons[c.name] = reason

        # max_parallel reached (if rest < len): no more starts; say why each remaining job waits.
        slot = f"max_parallel {limit} reached"
        for c in ranked[rest:]:
            ar = HELD_REASON if c.held else self.after_reason(c.after) if c.after else None
            if ar:
                reasons[c.name] = ar
            elif c.gpus > 0:
                reasons[c.name] = self.permanent_reason(c.gpus, c.mem_mib) or slot
            else:
                reasons[c.name] = slot
        return starts, reasons, probe, grew_after_a_failure and rest == len(ranked)

    def starve(self, c: Candidate, waited: float) -> str:
        """``c`` waited too long: later jobs must leave it every GPU it could use. Returns what
        its reason says of it."""
        self.starving = c.name
        self.starving_for = f"waiting for {c.name} (starving since {format_wait(waited)})"
        self.protected = frozenset(g.index for g in self.pool if self.could_use(g, c.mem_mib))
        note = f"; starving {format_wait(waited)}"
        if self.protected:
            note += f", {_gpu_list(sorted(self.protected), self.nodes_of)} kept for it"
        return note

    def decision(
        self, starts: list[Start], reasons: Mapping[str, str], probe: int | None
    ) -> Decision:
        return Decision(
            starts=tuple(starts),
            reasons=reasons,
            available_mib={g.index: max(0, g.avail) for g in self.pool},
            reserved=self.reserved(probe),
            starving=self.starving,
        )

    def reserved(self, probe: int | None) -> tuple[int, ...]:
        """The free GPUs the reserve keeps from our jobs after this pass.

        Judged for a one-GPU job asking the least memory any waiting job asks (a GPU that fits
        no waiting job is not "kept"); with no such job, for a job that needs an idle GPU.
        The kept ones are those our next job would take last.
        """
        if self.k <= 0:
            return ()
        free = [g for g in self.pool if not g.ours and self.ok(g, probe)]
        keep = len(free) - reserve_allows(len(free), self.k, self.reserve_rule)
        if keep <= 0:
            return ()
        if self.best_fit:
            free.sort(key=lambda g: (g.avail, g.index))
        else:
            free.sort(key=lambda g: (-g.avail, g.index))
        return tuple(sorted(g.index for g in free[len(free) - keep :]))


_RANK = attrgetter("rank")
_ORDER = attrgetter("order")
_PRIORITY = attrgetter("priority")
_GPUS = attrgetter("gpus")
_NAME = attrgetter("name")
_CODE = attrgetter("code")
_SENTINELS = frozenset((_BLOCKED, _STARTED))


def _dep_text(dep: str, state: str | None) -> str:
    return f"{dep} ({'unknown job' if state is None else str(state)})"


MAX_CLAIMS_SAID = 3


def _claims_text(gpus: Sequence[_Gpu], now: float) -> str:
    """``; GPU 1: 60G promised to bob's train-vit since 14:02:10, not yet allocated``: the
    neighbours' claims that keep a job from ``gpus``, each naming its user and job. The clock
    time, not an age, so the words stay the same from one pass to the next."""
    said = []
    claims = [(g.index, c) for g in gpus for c in g.claims]
    for index, c in claims[:MAX_CLAIMS_SAID]:
        when = time.strftime(
            "%H:%M:%S" if now - c.since < 20 * 3600 else "%b %d %H:%M", time.localtime(c.since)
        )
        held = (
            "not yet allocated"
            if c.observed_mib <= 0
            else f"{format_mib(min(c.observed_mib, c.mem_mib))} of it allocated"
        )
        said.append(
            f"GPU {index}: {format_mib(c.mem_mib)} promised to {c.user}'s {c.job} "
            f"since {when}, {held}"
        )
    if len(claims) > MAX_CLAIMS_SAID:
        said.append(f"{len(claims) - MAX_CLAIMS_SAID} more claim(s)")
    return "; " + "; ".join(said)


def _gpu_list(indices: Sequence[int], nodes: Mapping[int, str] | None = None) -> str:
    """``[1, 3]`` -> ``GPU1,3`` (a MIG instance as ``0:1``); on a cluster, where ``nodes``
    gives pool GPUs' nodes, ``GPU node1:0,node2:1`` (issue 23)."""
    if nodes:
        return "GPU " + ",".join(gpu_label(i, nodes.get(i)) for i in indices)
    return "GPU" + ",".join(gpu_label(i) for i in indices)
