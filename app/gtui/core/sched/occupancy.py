"""What our jobs hold on the GPUs: the usage the GPU reader is told, the memory each job is
seen to use (matched to its processes by the executor), the check that a job uses only the
GPUs it was given, and the GpusRead event that the GPU panel shows.

And what other users' gtui schedulers hold: their claims are read at
every poll and judged against the GPU reading (gtui.core.gpus.claims), placement counts the
live ones, and our own jobs' claims are published for them, with since when each GPU has read
0 % at every poll (its ``idle_since``: ``gtui gpus`` reads once and cannot know it). Around a
pass that starts jobs on GPUs the board is locked and read again (``claiming``), so two
schedulers never both find the same GPU free. A queue with ``neighbours = false``, or on GPUs
no one else can see (a plain fake spec), does neither.

Size: about 420 lines, as the GPUs' and the host's use by our jobs and the neighbours' claims
of both are read in one poll and judged against one reading; the host's own part is HostUse.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from gtui.core.api import GpusRead, JobChanged
from gtui.core.bus import EventBus
from gtui.core.exec.base import Executor, handle_of
from gtui.core.gpus.claims import (
    Claim,
    ClaimBoard,
    IdleMark,
    NeighbourClaim,
    counted,
    gpu_keys,
    judge,
    own_start,
    queue_id,
)
from gtui.core.gpus.fake import FAKE_USE_ENV, fake_use_mib
from gtui.core.gpus.reader import GpuReader
from gtui.core.gpus.snapshot import GpuSnapshot, JobUsage
from gtui.core.model import JobRecord, JobState, Settings
from gtui.core.paths import QueuePaths
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.hostuse import HostUse
from gtui.core.sched.planner import Planner
from gtui.core.sched.policy import Decision, Start
from gtui.core.sched.quarantine import Quarantine
from gtui.core.state.book import JobBook

FAST_POLL_FOR_S = 1.0  # after a job ends on real GPUs, poll fast this long (driver release)
FAST_POLL_S = 0.2  # and this often
MAX_CLAIM_NOTES = 1000  # notes on neighbours' claims told once each, at most this many
HOST_SAMPLE_S = 1.0  # running jobs' host memory is read at most this often


def record_gpu_peaks(rec: JobRecord, observed: dict[int, int]) -> None:
    """Keep ``rec``'s peak on each of its GPUs in ``rec.gpus`` order."""
    peaks = rec.peak_gpu_mib
    if len(peaks) != len(rec.gpus):
        peaks = rec.peak_gpu_mib = [0] * len(rec.gpus)
    for i, index in enumerate(rec.gpus):
        seen = observed.get(index, 0)
        if seen > peaks[i]:
            peaks[i] = seen


@dataclass(frozen=True)
class PlanInputs:
    """The GPU reading, the settings in force, our jobs' seen use and the neighbours' claims."""

    snapshot: GpuSnapshot
    settings: Settings
    observed: Mapping[str, Mapping[int, int]]
    claims: Sequence[NeighbourClaim]


class Occupancy:
    """Our jobs' GPU use as read, and the neighbours' claims: what placement counts."""

    def __init__(
        self,
        *,
        book: JobBook,
        bus: EventBus,
        executor: Executor,
        reader: GpuReader,
        planner: Planner,
        quarantine: Quarantine,
        paths: QueuePaths,
        config: QueueConfig,
    ) -> None:
        self._book = book
        self._bus = bus
        self._executor = executor
        self._reader = reader
        self._planner = planner
        self._quarantine = quarantine
        self.paths = paths
        self._config = config
        self.gpus: GpusRead | None = None  # the last GpusRead published
        self._observed: dict[str, dict[int, int]] = {}  # job -> GPU -> MiB seen in use
        self._last_gpu_meta = ""
        self._fast_until = 0.0
        # Neighbours' claims: the board is made on first use.
        self._board: ClaimBoard | None = None
        self._host_sampled_at = float("-inf")
        self._neighbour_claims: tuple[NeighbourClaim, ...] = ()
        self._claim_notes: frozenset[str] = frozenset()
        self._own_start: float | None = None  # this process's start time, for our idle marks
        self.host = HostUse(book, bus, config, lambda: planner.asks_host)  # cores and RAM

    @property
    def _snapshot(self) -> GpuSnapshot:
        return self._reader.snapshot

    def poll_interval(self, poll_s: float) -> float:
        """``poll_s``, or shorter for a moment after a job ended on real GPUs."""
        return min(poll_s, FAST_POLL_S) if time.monotonic() < self._fast_until else poll_s

    def usage(self) -> list[JobUsage]:
        out = []
        for name in self._book.active_names():
            rec = self._book.records[name]
            if rec.active and rec.pid and rec.gpus:
                # Simulated GPUs only: the job's own env wins over [settings] env, as at start.
                spec = self._book.specs.get(name)
                env = spec.env if spec is not None and FAKE_USE_ENV in spec.env else None
                use = fake_use_mib(env if env is not None else self._config.settings.env)
                out.append(
                    JobUsage(
                        pid=rec.pid,
                        gpus=rec.gpus,
                        mem_mib=rec.mem_mib,
                        suspended=rec.state == JobState.SUSPENDED,
                        name=name,
                        fake_use_mib=use,
                    )
                )
        return out

    def match_processes(self) -> None:
        """Match GPU processes to our jobs through the executor: memory observed per job and
        GPU, peaks, and a warning for a process on a GPU its job was not given."""
        self._sample_host_memory()
        self._observed = {}
        on_gpu: dict[int, list[tuple[int, int | None]]] = {}
        for gpu in self._snapshot.gpus:
            for p in gpu.processes:
                on_gpu.setdefault(p.pid, []).append((gpu.index, p.mem_mib))
        if not on_gpu:
            return
        records = self._book.records
        active = {n: records[n] for n in self._book.active_names() if records[n].active}
        handles = {n: handle_of(r) for n, r in active.items() if r.pid}
        for name, procs in self._executor.gpu_processes(handles, on_gpu).items():
            rec = active[name]
            observed: dict[int, int] = {}
            for pid, index, mem in procs:
                observed[index] = observed.get(index, 0) + mem
                if index not in rec.gpus:
                    warning = (
                        f"process {pid} runs on GPU {index}, which is not assigned to it "
                        f"(assigned: {','.join(map(str, rec.gpus)) or 'none'})"
                    )
                    if warning not in rec.warnings:
                        rec.warnings = [*rec.warnings, warning]
                        self._book.commit(rec)
                        self._bus.publish(JobChanged(self._book.view(name)))
            self._observed[name] = observed
            peak = max(observed.values(), default=0)
            if peak and (rec.peak_mib or 0) < peak:
                rec.peak_mib = peak
            record_gpu_peaks(rec, observed)

    def _sample_host_memory(self) -> None:
        """Each running job's resident host memory, kept as its attempt's host peak;
        at most every HOST_SAMPLE_S (a walk of /proc), and only where the executor can
        say (the others return {})."""
        now = time.monotonic()
        if now - self._host_sampled_at < HOST_SAMPLE_S:
            return
        self._host_sampled_at = now
        records = self._book.records
        handles = {
            n: handle_of(records[n])
            for n in self._book.active_names()
            if records[n].state == JobState.RUNNING and records[n].pid
        }
        if not handles:
            return
        used = self._executor.host_memory_mib(handles)
        self.host.used = dict(used)
        for name, mib in used.items():
            rec = records[name]
            if mib > (rec.host_peak_mib or 0):
                rec.host_peak_mib = mib

    def publish_gpus(self) -> None:
        self.publish_claims()
        ours: dict[int, list[str]] = {}
        ours_mib: dict[int, int] = {}
        for name in self._book.active_names():
            rec = self._book.records[name]
            if not rec.active:
                continue
            for index in rec.gpus:
                ours.setdefault(index, []).append(name)
                seen = self._observed.get(name, {}).get(index, 0)
                declared = rec.mem_mib if rec.mem_mib is not None else seen
                ours_mib[index] = ours_mib.get(index, 0) + max(seen, declared or 0)
        decision = self._planner.last
        if decision is None:
            return
        neighbours_mib: dict[int, int] = {}
        neighbours: dict[int, list[str]] = {}
        for c in self._neighbour_claims:
            if c.promised_mib > 0:
                neighbours_mib[c.gpu] = neighbours_mib.get(c.gpu, 0) + c.promised_mib
                neighbours.setdefault(c.gpu, []).append(f"{c.user}'s {c.job}")
        self.gpus = GpusRead(
            snapshot=self._snapshot,
            ours={k: tuple(v) for k, v in ours.items()},
            ours_mib=ours_mib,
            available_mib=dict(decision.available_mib),
            reserved=tuple(decision.reserved),
            neighbours_mib=neighbours_mib,
            neighbours={k: tuple(v) for k, v in neighbours.items()},
            quarantined=tuple(sorted(self._quarantine.gpus)),
            host=self.host.doc(),
        )
        self._bus.publish(self.gpus)
        text = json.dumps([g.to_json() for g in self._snapshot.gpus])
        if text != self._last_gpu_meta:
            self._last_gpu_meta = text
            with contextlib.suppress(Exception):
                self._book.store.set_meta("gpus", text)

    async def read(self) -> None:
        """The poll's look: the GPUs read (our jobs' processes matched), the host, the claims
        read."""
        if await self._reader.read(self.usage()):
            self.match_processes()
        self.host.read()
        self.read_claims()  # other users' gtui claims

    async def read_after_end(self) -> None:
        """A job ended: read the GPUs at once so the freed one is seen by the pass after."""
        reader = self._reader
        if reader.source != "nvml":
            # Cheap fake GPUs: read them again now. The memory seen per job must come from the
            # same read: jobs started since the last match would otherwise count twice (in
            # ``used`` and again as declared - 0 observed), and a packed GPU would take fewer
            # jobs (benchmarks/extreme.py: 5 rounds, not 4).
            reader.read_now(self.usage())
            self.match_processes()
        else:
            # Real GPUs: the driver may take a moment to release memory: poll fast a second.
            if await reader.read(self.usage()):
                self.match_processes()
            self._fast_until = time.monotonic() + FAST_POLL_FOR_S
        if self._planner.asks_host or self.host.info is None:
            # Only a job that asks cores or memory makes the pass look at the host; for the
            # others the poll's reading stands (psutil's read was ~0.1 ms of every end).
            self.host.read()

    # ------------------------------------------------------------------ neighbours' claims
    def inputs(self) -> PlanInputs:
        """What a pass is planned from, as last read: for a question asked of the policy
        beside the pass (sched/preempting.py: would this job start without those?)."""
        return PlanInputs(
            self._snapshot,
            self._quarantine.apply(self._config.settings),
            self._observed,
            self._neighbour_claims,
        )

    def decide(self) -> Decision:
        """One pass of the planner, counting the neighbours' claims last read; again, with the
        host's claims read, when a job asking cores or memory has just come."""
        asked_before = self._planner.asks_host
        decision = self._pass()
        if not asked_before and self._planner.asks_host and self.host.shared():
            self.read_claims()
            decision = self._pass()
        return decision

    def _pass(self) -> Decision:
        return self._planner.decide(
            self._snapshot,
            self._quarantine.apply(self._config.settings),  # GPUs out after a hardware fault
            self._observed,
            paused=self._config.paused,
            now=time.time(),
            claims=self._neighbour_claims,
            host=self.host.info,
            host_used=self.host.used,
            host_claims=self.host.claims,
        )

    def _claim_keys(self) -> dict[int, str]:
        """Our GPUs as claims name them; empty when this queue takes no part."""
        reader = self._reader
        if reader is None or not self._config.settings.neighbours:
            return {}
        return gpu_keys(self._snapshot, getattr(reader.backend, "file", None))

    def _claims_board(self) -> ClaimBoard:
        if self._board is None:
            self._board = ClaimBoard(queue=queue_id(self.paths.db))
        return self._board

    def read_claims(self) -> bool:
        """Read the neighbours' claims and judge them against the last GPU reading. True when
        what placement counts changed."""
        keys = self._claim_keys()
        if not keys and not self.host.shared():
            changed = bool(self._neighbour_claims) or self.host.judge(())[0]
            self._neighbour_claims = ()
            return changed
        board = self._claims_board()
        read = board.read()
        judged = judge(read.claims, self._snapshot, keys, now=time.time()) if keys else []
        host_changed, host_notes = self.host.judge(read.claims)
        notes = [*read.notes, *(j.note for j in judged), *host_notes, board.lock_note or ""]
        self._tell_claim_notes(notes)
        claims = counted(judged)
        changed = claims != self._neighbour_claims or host_changed
        self._neighbour_claims = claims
        return changed

    def _tell_claim_notes(self, notes: Iterable[str]) -> None:
        """Each note on the board (a file ignored, a claim not trusted) once, as a warning."""
        for note in notes:
            if note and note not in self._claim_notes and len(self._claim_notes) < MAX_CLAIM_NOTES:
                self._claim_notes = self._claim_notes | {note}
                self._bus.notice("warning", f"neighbours' claims: {note}")

    def _our_claims(self, keys: dict[int, str], board: ClaimBoard) -> list[Claim]:
        """A claim for each GPU of each running (or suspended) job of ours."""
        out: list[Claim] = []
        totals = {g.index: g.mem_total_mib for g in self._snapshot.gpus}
        records = self._book.records
        for name in self._book.active_names():
            rec = records[name]
            if not (rec.active and rec.gpus and rec.pid and rec.create_time is not None):
                continue
            for index in rec.gpus:
                key = keys.get(index)
                mem = rec.mem_mib if rec.mem_mib is not None else totals.get(index)
                if key is None or not mem:
                    continue
                out.append(
                    Claim(
                        uid=board.uid,
                        user=board.user,
                        gpu=key,
                        mem_mib=mem,
                        pid=rec.pid,
                        start=rec.create_time,
                        job=name,
                        since=rec.started_at or rec.create_time,
                        queue=board.queue or "",
                        index=index,
                    )
                )
        return out

    def _our_idle(self, keys: dict[int, str], board: ClaimBoard) -> list[IdleMark]:
        """Our word on each GPU that has read 0 % at every poll since some moment."""
        if self._own_start is None:
            self._own_start = own_start()
            if self._own_start is None:
                return []
        return [
            IdleMark(
                board.uid,
                board.user,
                keys[g.index],
                g.idle_since,
                os.getpid(),
                self._own_start,
                board.queue or "",
            )
            for g in self._snapshot.gpus
            if g.index in keys and g.util == 0 and g.idle_since is not None and not g.lost
        ]

    def publish_claims(self) -> None:
        """Publish our jobs' claims and our idle marks when they changed (or the board lost
        them); withdraw them when this queue stops taking part. Cheap when nothing changed: no
        file is touched (a GPU starts or stops idling seldom)."""
        keys = self._claim_keys()
        if not keys and self._board is None and not self.host.shared():
            return  # never took part: nothing to publish or withdraw
        board = self._claims_board()
        mine = self._our_claims(keys, board) if keys else []
        mine += self.host.our_claims(board.uid, board.user, board.queue or "")
        idle = self._our_idle(keys, board) if keys else []
        written = board.written
        if (
            not board.stale
            and frozenset(mine) == (written or frozenset())
            and frozenset(idle) == board.written_idle
        ):
            return
        note = board.publish(mine, idle)
        if note:
            self._tell_claim_notes([note])

    @contextlib.contextmanager
    def claiming(self, starts: Sequence[Start]) -> Iterator[bool]:
        """Around the starts of a pass: when one takes GPUs others can see (or the host's
        cores and memory are shared), hold the board's lock, read the claims again (another
        user's scheduler may have started a job since the last poll) and publish ours after the
        starts. Yields True when the claims placement counts changed: pass again first."""
        gpus = any(s.gpus for s in starts) and self._claim_keys()
        if not gpus and not (starts and self.host.shared()):
            yield False
            return
        board = self._claims_board()
        with board.lock():
            yield self.read_claims()
            self.publish_claims()
