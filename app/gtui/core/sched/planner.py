"""The placement pass as the scheduler runs it: the policy's inputs from the job book, one call
of the pure policy (gtui.core.sched.policy.place), and the words for the jobs that wait.

A pass runs at every job end, so what it builds is kept while nothing it holds changed: the
waiting jobs' Candidates (building 2,000 of them was half of a pass: benchmarks/throughput.py),
the check for jobs whose ``after`` failed, and the reasons last told.

Size: about 510 lines, as each of those caches is followed through commits, appends and
one-job edits here, beside the walk it saves (at 100,000 jobs a walk costs ~0.4 s).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gtui.core.api import JobChanged, QueueChanged, ReasonChanged, WaitingSummary
from gtui.core.bus import EventBus
from gtui.core.gpus.claims import NeighbourClaim
from gtui.core.gpus.snapshot import GpuSnapshot, HostInfo
from gtui.core.model import JobRecord, JobSpec, JobState, Settings
from gtui.core.sched.hostfit import HostHolder
from gtui.core.sched.outcome import backoff_group, backoff_reason
from gtui.core.sched.policy import HELD_REASON, Allocation, Candidate, Decision, Reasons, place
from gtui.core.sched.reasonkey import reason_key
from gtui.core.state.book import JobBook
from gtui.core.state.records import Records
from gtui.core.state.usage import ram_asked

EXPLAIN_EVERY_S = 0.5  # a walk over every waiting job's reason, at most this often
BULK_REASONS = 2000  # reasons changed in one walk from which the whole queue is sent instead
BAD_STATES_FOR_AFTER = frozenset(
    {JobState.FAILED, JobState.KILLED, JobState.BLOCKED, JobState.UNKNOWN}
)

# name -> (spec, mem, queued_since, state, Candidate, retry_at), or the Candidate alone for a
# queued job without a back-off (most of a sweep): see _waiting_candidates and _kept
_CacheEntry = tuple[Any, int | None, float, JobState, Candidate, float | None]


class Planner:
    def __init__(self, book: JobBook, bus: EventBus) -> None:
        self._book = book
        self._bus = bus
        self._cands_at = -1
        self._cands_list: list[Candidate] = []
        self._cands_names: set[str] = set()
        # Whether a waiting job asked host cores or memory at the last look (kept through
        # appends and one-job edits, made again with the list): then neighbours' claims of
        # the host are read (hostuse.py).
        self.asks_host = False
        self._candidates: dict[str, _CacheEntry | Candidate] = {}
        self._blocked_at = -1
        self._said: tuple[int, Mapping[str, str]] = (-1, {})  # (version, reasons) last told
        self.summary = ""
        self.summary_key = ""  # the summary in the reasons' key parts (WaitingSummary.key)
        self._groups: dict[str, int] = {}  # the last summary's counts, for _summarize_tail
        self._waiting = 0
        self._explained = 0
        self.last: Decision | None = None
        self._walked_at = -1e9  # monotonic time of the last walk over every waiting job
        self._later: Decision | None = None  # the decision a pending walk will explain
        self._timer: asyncio.TimerHandle | None = None
        book.followers.append(self._follow)
        book.appenders.append(self._appended)
        book.respecifiers.append(self._respecified)

    def forget(self, name: str) -> None:
        """``name``'s back-off is over: its Candidate (held back) must be built anew."""
        self._book.invalidate()
        self._candidates.pop(name, None)

    def _follow(self, rec: JobRecord, version: int) -> None:
        """Keep the candidate list and the blocked check current through a commit of ``rec``
        alone instead of redoing them over every job (see JobBook._follow)."""
        name = rec.name
        if self._cands_at == version - 1 and not rec.waiting:
            if name in self._cands_names:  # it stopped waiting (started, killed, blocked)
                cands = self._cands_list  # jobs start from the front: found early
                del cands[next(i for i, c in enumerate(cands) if c.name == name)]
                self._cands_names.discard(name)
            self._cands_at = version
        if (
            self._blocked_at == version - 1
            and not rec.waiting
            and rec.state not in BAD_STATES_FOR_AFTER
        ):
            self._blocked_at = version  # nothing new for a waiting job's `after` to fail on

    def _appended(self, recs: list[JobRecord], version: int) -> None:
        """Jobs appended at the end of the queue (``gtui add``): their Candidates join the end
        of the list instead of all 100,000 being walked again."""
        book = self._book
        if self._cands_at == version - 1:
            for rec in recs:
                if rec.state is not JobState.QUEUED:
                    self._cands_at = -1  # a job put back held or ended: rebuild
                    break
                spec = book.specs[rec.name]
                cand = Candidate(
                    name=rec.name,
                    gpus=spec.gpus,
                    mem_mib=rec.mem_mib,
                    priority=spec.priority,
                    order=book.index[rec.name],
                    after=spec.after,
                    waiting_since=rec.queued_since,
                    held=False,
                    cpus=spec.cpus,
                    ram_mib=ram_asked(spec, rec.host_peak_mib),
                    group=spec.group,
                )
                self._keep(rec, spec, cand)
                self._cands_list.append(cand)
                self.asks_host = self.asks_host or _asks_host(spec)
                self._cands_names.add(rec.name)
            else:
                self._cands_at = version
        if self._blocked_at == version - 1 and not any(book.specs[r.name].after for r in recs):
            self._blocked_at = version

    # ------------------------------------------------------------------ one pass
    def decide(
        self,
        snapshot: GpuSnapshot,
        settings: Settings,
        observed: Mapping[str, dict[int, int]],
        *,
        paused: bool,
        now: float,
        claims: Sequence[NeighbourClaim] = (),
        host: HostInfo | None = None,
        host_used: Mapping[str, int] | None = None,
        host_claims: Sequence[HostHolder] = (),
    ) -> Decision:
        """The policy's inputs from the jobs, then one pass. It hands the policy a view of
        the states instead of a copy. ``claims``: neighbours' live claims, other users' gtui
        jobs (gtui.core.gpus.claims); ``host``: the host's cores and memory, ``host_used``
        the host memory each running job is seen to use, ``host_claims`` neighbours' claims
        of the host."""
        book = self._book
        records = book.records
        candidates = self._waiting_candidates()
        allocations = []
        running = 0
        groups: dict[str, int] = {}  # our running jobs in each group
        specs = book.specs
        for name in book.active_names():
            rec = records[name]
            if rec.active:
                running += 1
                spec = specs.get(name)
                if spec is not None and spec.group is not None:
                    groups[spec.group] = groups.get(spec.group, 0) + 1
                cpus = spec.cpus if spec is not None else None
                ram = ram_asked(spec, rec.host_peak_mib) if spec is not None else None
                if rec.gpus or cpus or ram:
                    allocations.append(
                        Allocation(
                            name=name,
                            gpus=rec.gpus,
                            mem_mib=rec.mem_mib,
                            observed_mib=observed.get(name, {}),
                            cpus=cpus,
                            ram_mib=ram,
                            ram_used_mib=(host_used or {}).get(name, 0),
                        )
                    )
        self.last = place(
            snapshot,
            candidates,
            allocations,
            settings,
            dep_states=_StateView(records),
            running_count=running,
            now=now,
            queue_paused=paused,
            claims=claims,
            host=host,
            host_claims=host_claims,
            group_running=groups,
        )
        return self.last

    def _waiting_candidates(self) -> list[Candidate]:
        """The waiting jobs as the policy takes them, in queue order. The list is kept until
        the next commit or queue change (nothing a Candidate holds changes without one); each
        Candidate is kept while its job's spec, memory, state and place are the same."""
        book = self._book
        if self._cands_at == book.version:
            return self._cands_list
        records, specs = book.records, book.specs
        candidates = []
        cache = self._candidates
        queued, held = JobState.QUEUED, JobState.HELD
        now = time.time()
        live = records.live()  # an ended job is no candidate: its record stays in the store
        asks_host = False
        for index, name in enumerate(book.order):
            rec = live.get(name)
            if rec is None:
                continue
            state = rec.state
            if state is not queued and state is not held:
                continue
            spec = specs[name]
            if spec.cpus or spec.ram_mib or spec.ram_auto:
                asks_host = True
            hit = cache.get(name)
            if hit is not None:
                if isinstance(hit, Candidate):
                    if (
                        state is queued
                        and rec.retry_at is None
                        and hit.order == index
                        and hit.mem_mib == rec.mem_mib
                        and hit.waiting_since == rec.queued_since
                        and hit.gpus == spec.gpus
                        and hit.priority == spec.priority
                        and hit.after == spec.after
                        and hit.cpus == spec.cpus
                        and (hit.ram_mib == spec.ram_mib if not spec.ram_auto else False)
                        and hit.group == spec.group
                    ):
                        candidates.append(hit)
                        continue
                elif (
                    hit[0] is spec
                    and hit[1] == rec.mem_mib
                    and hit[2] == rec.queued_since
                    and hit[3] is state
                    and hit[4].order == index
                    and hit[5] == rec.retry_at
                    and not spec.ram_auto
                ):
                    candidates.append(hit[4])
                    continue
            candidates.append(self._candidate(rec, spec, index, now))
        if len(cache) > 2 * len(candidates) + 64:  # jobs that left the queue, or stopped waiting
            waiting = {c.name for c in candidates}
            for name in [n for n in cache if n not in waiting]:
                del cache[name]
        self._cands_list = candidates
        self.asks_host = asks_host
        self._cands_names = {c.name for c in candidates}
        self._cands_at = book.version
        return candidates

    def _candidate(self, rec: JobRecord, spec: JobSpec, index: int, now: float) -> Candidate:
        """A waiting job's Candidate, made and kept (see _waiting_candidates)."""
        state = rec.state
        cand = Candidate.make(
            rec.name,
            spec.gpus,
            rec.mem_mib,
            spec.priority,
            index,
            spec.after,
            rec.queued_since,
            # Backing off after quick failures: out of placement until its time comes.
            state is JobState.HELD or (rec.retry_at is not None and rec.retry_at > now),
            spec.cpus,
            ram_asked(spec, rec.host_peak_mib),
            spec.group,
        )
        self._keep(rec, spec, cand)
        return cand

    def _keep(self, rec: JobRecord, spec: JobSpec, cand: Candidate) -> None:
        """Keep ``cand`` for ``rec``'s job until what it was made from changes. A queued job
        without a back-off is kept as its Candidate alone, which holds all it was made from
        (its spec's GPUs, priority, ``after`` and group, its memory, queue place and time): a tuple
        beside each was 88 bytes a job of a 100,000-job sweep. Others (held, backing off) keep
        their state and back-off beside it, and their spec, as before."""
        if rec.state is JobState.QUEUED and rec.retry_at is None and not cand.held:
            self._candidates[rec.name] = cand
        else:
            self._candidates[rec.name] = (
                spec,
                rec.mem_mib,
                rec.queued_since,
                rec.state,
                cand,
                rec.retry_at,
            )

    def _respecified(self, name: str, version: int) -> None:
        """One job's table was edited in the file (``JobBook.replace_spec``): its Candidate
        alone is made again, instead of all 100,000 being walked (a live edit at 100,000 jobs
        spent 0.4 s there, and as much again in the blocked check)."""
        book = self._book
        spec = book.specs.get(name)
        self.asks_host = self.asks_host or (spec is not None and _asks_host(spec))
        if self._cands_at == version - 1:
            if name in self._cands_names:
                rec = book.records.live().get(name)
                cands = self._cands_list
                i = next(i for i, c in enumerate(cands) if c.name == name)
                if rec is None or spec is None:
                    self._cands_at = -1  # cannot happen to a waiting job: rebuild to be sure
                else:
                    cands[i] = self._candidate(rec, spec, cands[i].order, time.time())
                    self._cands_at = version
            else:
                self._cands_at = version  # not waiting: no Candidate to change
        if self._blocked_at == version - 1 and spec is not None and not spec.after:
            self._blocked_at = version

    # ------------------------------------------------------------------ words and blocks
    def explain(self, decision: Decision, *, now: bool = False) -> None:
        """Give each waiting job its reason and the queue its summary, when they changed.

        A walk over every waiting job runs at most every EXPLAIN_EVERY_S: a burst of short jobs
        runs a pass at every end, and walking 2,000 waiting jobs' reasons at each was 37 % of
        the scheduler's time (benchmarks/peers.py, profiled). In between, the latest decision
        waits for the timer; ``now`` (shutdown) walks at once."""
        book = self._book
        if self._said == (book.version, decision.reasons):
            return  # the same jobs wait for the same reasons: nothing to tell (a poll at rest)
        reasons = decision.reasons
        tail = self._tail_since_said(reasons)
        if tail is None and not now:
            wait = self._walked_at + EXPLAIN_EVERY_S - time.monotonic()
            if wait > 0:
                self._later = decision
                if self._timer is None:
                    loop = asyncio.get_running_loop()
                    self._timer = loop.call_later(wait, self._explain_later)
                return
        if tail is None:
            self._walked_at = time.monotonic()
        self._later = None
        changed = []
        now_s = time.time()
        pairs = reasons.items() if tail is None else tail
        live = book.records.live()
        for name, reason in pairs:
            rec = live.get(name)
            if rec is not None and rec.waiting and rec.reason != reason:
                if rec.after_edit_of is not None:
                    continue  # held as the edit of a running job: its own reason says so
                if reason == HELD_REASON and rec.state is JobState.QUEUED:
                    # Out of placement but not held by the user: backing off. One without a
                    # back-off was held at the pass and released since: the next pass tells it.
                    if rec.retry_at is None:
                        continue
                    reason = backoff_reason(rec, now_s)
                    if rec.reason == reason:
                        continue
                rec.reason = reason
                rec.reason_at = now_s
                changed.append(rec)
                book.reasons_dirty.add(name)
        if changed and self._bus.wants(ReasonChanged):
            if len(changed) >= BULK_REASONS and self._bus.covers(ReasonChanged, QueueChanged):
                # A long queue's first walk: one whole queue instead of 100,000 events, each
                # a view, a publish and a fold in the dashboard's buffer (~0.6 s of them).
                self._bus.publish(QueueChanged(tuple(book.views())))
            else:
                for rec in changed:
                    self._bus.publish(ReasonChanged(book.view(rec.name)))
        if tail is None or not isinstance(reasons, Reasons):
            self._summarize(reasons)
        else:
            self._summarize_tail(reasons)
        self._said = (book.version, reasons)

    def _explain_later(self) -> None:
        self._timer = None
        decision = self._later
        if decision is not None:
            self.explain(decision, now=True)

    def flush(self) -> None:
        """Tell what a pending walk would (at shutdown: the saved reasons are the last)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._explain_later()

    def _tail_since_said(self, reasons: Mapping[str, str]) -> list[tuple[str, str]] | None:
        """When this pass ranks the same Candidates, with the same words, as the last one told,
        and only adds some at the end (``gtui add`` into a long queue), just those: at 100,000
        waiting jobs, walking them all was 0.2 s of every add. None: walk them all."""
        old = self._said[1]
        if not isinstance(reasons, Reasons) or not isinstance(old, Reasons):
            return None
        n = len(old.ranked)
        if len(reasons.ranked) < n or reasons.ranked[:n] != old.ranked:
            return None
        if reasons.texts[:n] != old.texts:
            return None
        return [
            (c.name, text)
            for c, text in zip(reasons.ranked[n:], reasons.texts[n:], strict=True)
            if text is not None
        ]

    def _summarize(self, reasons: Mapping[str, str]) -> None:
        """ "12 waiting: 8 needs 1 GPU with 40G ...; 4 after prep (queued)": the three most
        common reasons among the queued jobs (held ones are shown as held). It walks the
        reasons once instead of looking each waiting job up by name (100k lookups at 100k
        jobs), so ties go to the reason met first in rank order."""
        records = self._book.records
        queued, state, live = JobState.QUEUED, records.state, records.live()
        waiting = sum(1 for n in self._book.order if state(n) is queued)
        groups: dict[str, int] = {}
        explained = 0
        if waiting:
            for name, reason in reasons.items():
                rec = live.get(name)
                if rec is not None and rec.state == queued:
                    group = _summary_group(rec, reason)
                    if group is not None:
                        groups[group] = groups.get(group, 0) + 1
                        explained += 1
        # queued but without a reason: it starts in this pass ("starting")
        self._summarize_counts(groups, waiting, explained)

    def _summarize_tail(self, reasons: Reasons) -> None:
        """The summary after only new jobs joined at the end: the counts of the last one, plus
        theirs."""
        records, queued = self._book.records.live(), JobState.QUEUED
        groups = dict(self._groups)
        groups.pop("starting", None)
        explained, waiting = self._explained, self._waiting
        n = len(self._said[1].ranked) if isinstance(self._said[1], Reasons) else 0
        for cand, reason in zip(reasons.ranked[n:], reasons.texts[n:], strict=True):
            rec = records.get(cand.name)
            if rec is None or rec.state != queued:
                continue
            waiting += 1
            group = None if reason is None else _summary_group(rec, reason)
            if group is not None:
                groups[group] = groups.get(group, 0) + 1
                explained += 1
        self._summarize_counts(groups, waiting, explained)

    def _summarize_counts(self, groups: dict[str, int], waiting: int, explained: int) -> None:
        if not waiting:
            text = key = ""
        else:
            if waiting > explained:
                groups["starting"] = groups.get("starting", 0) + waiting - explained
            text = _counted(waiting, groups)
            keys: dict[str, int] = {}  # the same reasons by their key parts
            for reason, count in groups.items():
                k = reason_key(reason)
                keys[k] = keys.get(k, 0) + count
            key = _counted(waiting, keys)
        groups.pop("starting", None)
        self._groups, self._waiting, self._explained = groups, waiting, explained
        self._tell_summary(text, key)

    def _tell_summary(self, text: str, key: str) -> None:
        if (text, key) != (self.summary, self.summary_key):
            self.summary, self.summary_key = text, key
            # "" once nothing waits: the old is stale
            self._bus.publish(WaitingSummary(text, key))

    def block_dependents(self) -> None:
        """A waiting job whose ``after`` failed or was killed can never run: blocked."""
        book = self._book
        if self._blocked_at == book.version:
            return  # no commit since the last check: no job failed, none started waiting
        changed = True
        specs, records = book.specs, book.records
        while changed:
            changed = False
            state, live = records.state, records.live()
            for name in book.order:
                if not specs[name].after:  # most jobs: skip them cheaply (runs every pass)
                    continue
                rec = live.get(name)
                if rec is None or not rec.waiting:
                    continue
                bad = [d for d in specs[name].after if state(d) in BAD_STATES_FOR_AFTER]
                if bad:
                    rec.state = JobState.BLOCKED
                    dep = state(bad[0])
                    rec.reason = f"after {bad[0]} ({dep.value if dep else 'gone'})"
                    rec.ended_at = time.time()
                    book.commit(rec)
                    self._bus.publish(JobChanged(book.view(name)))
                    changed = True
        self._blocked_at = book.version


def _summary_group(rec: JobRecord, reason: str) -> str | None:
    """What the summary counts a queued job's reason as. The policy says "held by you" of every
    job out of placement, and a queued job is never held by the user: it is backing off (put
    off, or after quick failures), or it was held at the pass and released since (None: it
    starts next, counted as "starting")."""
    if reason != HELD_REASON:
        return reason
    return backoff_group(rec) if rec.retry_at is not None else None


def _asks_host(spec: JobSpec) -> bool:
    return bool(spec.cpus or spec.ram_mib or spec.ram_auto)


class _StateView(Mapping[str, str]):
    """Job name -> state value, read through to the records: what ``place`` needs of the jobs
    a waiting job is ``after``, without copying every job's state at every pass."""

    __slots__ = ("_records",)

    def __init__(self, records: Records) -> None:
        self._records = records

    def __getitem__(self, name: str) -> str:
        state = self._records.state(name)
        if state is None:
            raise KeyError(name)
        return state.value

    def get(self, name: str, default: Any = None) -> Any:
        state = self._records.state(name)
        return default if state is None else state.value

    def __iter__(self) -> Iterator[str]:
        return iter(self._records)

    def __len__(self) -> int:
        return len(self._records)


def _counted(waiting: int, groups: dict[str, int]) -> str:
    """``12 waiting: 8 <reason>; 4 <reason>; <reason>``: the three most common reasons."""
    top = sorted(groups.items(), key=lambda kv: -kv[1])[:3]
    parts = [f"{count} {reason}" if count > 1 else reason for reason, count in top]
    return f"{waiting} waiting: " + "; ".join(parts)
