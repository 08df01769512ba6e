"""The state of one placement pass and every rule it applies to one request: the pool, which
GPUs a job may take, which it gets, and the words for why it waits. Both walks (the readable
one in policy.py and the column walk in policy_fast.py) ask the same methods here, so each rule
and each word has one place.

A ``PassState`` is made per pass and mutated as jobs start; nothing here outlives it.

Size: the rules (pool, eligibility, reserve, choice of GPUs) and the words for why a job waits
read one another at every step, so they stay in one room rather than split by kind.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from operator import attrgetter

from gtui.core.gpus.claims import NeighbourClaim
from gtui.core.gpus.holders import held_text, holders
from gtui.core.gpus.snapshot import NODE_GPU_STRIDE, GpuInfo, GpuSnapshot, HostInfo, gpu_label
from gtui.core.model import Mode, Placement, Settings
from gtui.core.reserve import reserve_allows
from gtui.core.sched.hostfit import HostHolder, HostPool
from gtui.core.sched.policy_groups import GroupCaps, group_priorities
from gtui.core.sched.policy_types import Allocation, Candidate, Decision, Start
from gtui.core.units import format_mib

IDLE_USED_PERCENT = 3  # exclusive mode: used memory under this share of total
MAX_CLAIMS_SAID = 3


def gpu_names(info: GpuInfo) -> tuple[set[int], set[str]]:
    """The numbers and names ``gpus`` / ``exclude`` may call a GPU by: its index (on a cluster
    its index on its node: ``exclude = [1]`` is GPU 1 of every node) and a MIG instance's
    GPU's; on a cluster also its node and ``node:index``."""
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


def pool_of(
    snapshot: GpuSnapshot, settings: Settings, nodes_of: Mapping[int, str] | None = None
) -> tuple[list[tuple[GpuInfo, int, int]], list[str]]:
    """The GPUs placement may use, by index, each with its total and used memory, and why
    configured GPUs are not among them:
    ``gpus`` minus ``exclude`` and the quarantine, minus lost GPUs and GPUs whose memory the
    driver does not report."""
    notes: list[str] = []
    pool: list[tuple[GpuInfo, int, int]] = []
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
            notes.append(f"{_gpu_list([info.index], nodes_of)} lost")
        elif info.mem_total_mib is None or info.mem_used_mib is None:
            notes.append(f"{_gpu_list([info.index], nodes_of)} memory unknown")
        else:
            pool.append((info, info.mem_total_mib, info.mem_used_mib))
    if settings.gpus != "all":
        missing = sorted(set(settings.gpus) - seen - set(settings.exclude))
        if missing:
            notes.append(_gpu_list(missing) + " not found")
    unknown = sorted(set(settings.cluster_gpus) - names_seen)
    if unknown:
        notes.append(", ".join(unknown) + " not found")
    if not pool and snapshot.error:
        notes.append(snapshot.error)
    return pool, notes


def rank(candidates: Sequence[Candidate], settings: Settings) -> list[Candidate]:
    """The order jobs are asked in: priority (its own plus its group's; higher first), then
    queue order; with ``multi_gpu_first``, the GPUs a job needs (more first) before both.
    Stable sorts, least significant key first."""
    ranked = sorted(candidates, key=_ORDER)
    extra = group_priorities(settings)
    if extra:  # a group's priority adds to its jobs' own
        ranked.sort(key=lambda c: c.priority + extra.get(c.group or "", 0), reverse=True)
    else:
        ranked.sort(key=_PRIORITY, reverse=True)
    if settings.multi_gpu_first:
        ranked.sort(key=_GPUS, reverse=True)
    return ranked


_ORDER = attrgetter("order")
_PRIORITY = attrgetter("priority")
_GPUS = attrgetter("gpus")


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
        self.mig = mig  # a MIG instance: one job at a time, of one GPU
        self.node = node  # a cluster's node; None on one server
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
        the GPU is not idle."""
        promised = c.promised_mib
        self.avail -= promised
        self.promised += promised
        self.claims.append(c)
        if not self.busy:
            self.busy = "claimed"  # idle but for the claim
        self.idle = False


_Shape = tuple[int, int | None]


class PassState:
    """One placement pass's GPUs and bookkeeping, mutated as jobs start; the walks decide in
    what order jobs are asked, the methods here what each one gets or why it waits."""

    def __init__(
        self,
        snapshot: GpuSnapshot,
        allocations: Sequence[Allocation],
        settings: Settings,
        now: float,
        *,
        shape_cache: bool = True,
        claims: Sequence[NeighbourClaim] = (),
        host: HostInfo | None = None,
        host_claims: Sequence[HostHolder] = (),
        group_running: Mapping[str, int] | None = None,
    ) -> None:
        """``shape_cache=False`` turns off the two shortcuts (requests known to fail, reasons
        shared by equal requests): the plainest pass, which the tests hold the others to."""
        self.settings = settings
        self.now = now
        # our running jobs in each capped group, raised as this pass starts more
        self.groups = GroupCaps(settings, group_running or {})
        self.k = max(0, settings.reserve)
        self.reserve_rule = settings.reserve_rule
        self.mode = settings.mode
        self.exclusive = settings.mode == Mode.EXCLUSIVE
        self.pack = settings.mode == Mode.PACK
        self.best_fit = settings.placement == Placement.BEST_FIT or (
            settings.placement == Placement.AUTO and self.pack
        )
        self.shape_cache = shape_cache
        # a cluster's GPUs' nodes, for reasons that name GPUs as people do (node2:3)
        self.nodes_of = {g.index: g.node for g in snapshot.gpus if g.node is not None}
        infos, self.notes = pool_of(snapshot, settings, self.nodes_of)
        self.pool: list[_Gpu] = [
            _Gpu(info.index, total, used, info.util, info.mig_parent is not None, info.node)
            for info, total, used in infos
        ]
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
        # A cluster: a multi-GPU job stays on one node, so the widest node bounds it.
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
        # The host's cores and memory (hostfit.py), when read: our jobs that asked some, and
        # neighbours' claims of them.
        self.host: HostPool | None = None
        if host is not None:
            ours = [
                HostHolder(a.name, a.cpus or 0, a.ram_mib or 0, a.ram_used_mib)
                for a in allocations
                if a.cpus or a.ram_mib
            ]
            self.host = HostPool(host, [*ours, *host_claims])

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
        reserve's ``allowed`` free ones: its GPUs in placement order."""
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

    def start(self, n: int, m: int | None) -> tuple[tuple[int, ...] | None, bool]:
        """Start a request of ``n`` GPUs with ``m`` each if it fits now, leaving the starving
        job's GPUs alone: (its GPUs, or None; whether the start made room, see ``take``).

        Resources only shrink within a pass (but for ``take``'s exception), so a request no
        smaller than one that already failed fails too and is not tried again."""
        if self.known_to_fail(n, m):
            return None, False
        chosen = self.try_place(n, m, self.protected)
        if chosen is None:
            self.failed(n, m)
            return None, False
        made_room = self.take(chosen, m)
        if made_room:
            self.forget_failures()
        self.changed()
        return tuple(sorted(g.index for g in chosen)), made_room

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
        """Why a request does not fit now: the request, how many GPUs are eligible, and what keeps
        each other GPU from it."""
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
        keeps a job from ``gpus`` (the largest holder of each); "" when the GPUs
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
    def begin_sweep(self) -> None:
        """A sweep over the waiting jobs begins: no job starves yet, nothing is known to fail,
        and no reason is said yet."""
        self.starving, self.starving_for, self.protected = None, "", frozenset()
        self.forget_failures()
        self.changed()

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


def _dep_text(dep: str, state: str | None) -> str:
    return f"{dep} ({'unknown job' if state is None else str(state)})"


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
    gives pool GPUs' nodes, ``GPU node1:0,node2:1``."""
    if nodes:
        return "GPU " + ",".join(gpu_label(i, nodes.get(i)) for i in indices)
    return "GPU" + ",".join(gpu_label(i) for i in indices)
