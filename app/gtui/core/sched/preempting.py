"""Preemption in the placement pass: a waiting job of higher priority that no GPU can take
stops the fewest preemptible jobs of ours that free enough (the choice is sched/preempt.py's,
the stop sched/stops.py's), and its waiting reason says whom it will stop.

Whether a set of victims frees enough is asked of the placement policy itself, with those jobs'
allocations and seen memory taken away: every rule (mode, reserve, neighbours' claims, isolation
of whole GPUs) counts as it does for a start. The preemptor is not started here: it starts in a
later pass, once its victims have ended and their memory is gone from the GPU reading.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from gtui.core.model import JobState
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.occupancy import Occupancy, PlanInputs
from gtui.core.sched.policy import Decision, place
from gtui.core.sched.policy_types import Allocation, Candidate
from gtui.core.sched.preempt import Running, choose
from gtui.core.sched.requeue import resume_of
from gtui.core.sched.runs import JobRunner
from gtui.core.state.book import JobBook


class Preemption:
    """Plans preemptions after each pass and words the preemptors' reasons."""

    def __init__(
        self, book: JobBook, config: QueueConfig, occupancy: Occupancy, runner: JobRunner
    ) -> None:
        self._book = book
        self._config = config
        self._occupancy = occupancy
        self._runner = runner

    def plan(self, decision: Decision) -> Decision:
        """``decision`` with the reasons of the jobs that preempt; the stops are started for
        at most one new preemptor a pass (the next pass sees the GPUs as they are then)."""
        if self._config.paused or not decision.reasons:
            return decision
        running, making_room = self._running()
        said: dict[str, str] = {}
        for by, stopping in making_room.items():
            if by in decision.reasons:
                said[by] = _reason(stopping)
        if running:
            name, victims = self._choose(decision.reasons, running, set(making_room))
            if name is not None:
                for victim in victims:
                    self._runner.preempt(victim, name)
                said[name] = _reason(victims)
        if not said:
            return decision
        return replace(decision, reasons={**decision.reasons, **said})

    def victims_for(self, name: str) -> tuple[str, ...] | None:
        """Whom the waiting job ``name`` would stop now (the dashboard asks before it acts):
        () when it can start without stopping anything, None when no set would do. A
        person's "make room now" too takes only preemptible jobs of lower priority."""
        running, _ = self._running()
        spec = self._book.specs.get(name)
        rec = self._book.records.get(name)
        if spec is None or rec is None or not rec.waiting:
            return None
        frees = self._frees(name, self._occupancy.inputs())
        if frees(frozenset()):
            return ()
        return choose(spec.priority, running, frees)

    def make_room(self, name: str) -> tuple[str, ...]:
        """Stop now the jobs ``name`` needs gone (its ``victims_for``); () when none would do."""
        victims = self.victims_for(name) or ()
        for victim in victims:
            self._runner.preempt(victim, name)
        return victims

    def _running(self) -> tuple[list[Running], dict[str, list[str]]]:
        """Our running preemptible jobs, and the stops under way by the job they make room for."""
        book, settings = self._book, self._config.settings
        running: list[Running] = []
        making_room: dict[str, list[str]] = {}
        for name in book.active_names():
            rec = book.records[name]
            if rec.preempt_for is not None:
                making_room.setdefault(rec.preempt_for, []).append(name)
                continue
            spec = book.specs.get(name)
            if spec is None or rec.state is not JobState.RUNNING or rec.started_at is None:
                continue
            if resume_of(spec, settings).preemptible:
                running.append(Running(name, spec.priority, rec.started_at, True))
        return running, making_room

    def _choose(
        self, reasons: Mapping[str, str], running: list[Running], busy: set[str]
    ) -> tuple[str | None, tuple[str, ...]]:
        """The first waiting job, by priority then queue order, that some victims make room
        for, and those victims."""
        book = self._book
        floor = min(r.priority for r in running)
        waiting = []
        for name in reasons:
            spec = book.specs.get(name)
            rec = book.records.get(name)
            if spec is None or rec is None or name in busy or spec.priority <= floor:
                continue
            if rec.state is JobState.QUEUED and rec.retry_at is None:
                waiting.append((-spec.priority, book.index.get(name, 0), name))
        if not waiting:
            return None, ()
        inputs = self._occupancy.inputs()
        for _, _, name in sorted(waiting):
            victims = choose(book.specs[name].priority, running, self._frees(name, inputs))
            if victims:
                return name, victims
        return None, ()

    def _frees(self, name: str, inputs: PlanInputs) -> Callable[[frozenset[str]], bool]:
        """Whether ``name`` would start were the named jobs gone: the policy asked again."""
        book = self._book
        spec, rec = book.specs[name], book.records[name]
        cand = Candidate.make(
            name, spec.gpus, rec.mem_mib, spec.priority, 0, spec.after, rec.queued_since, False
        )
        deps = {a: s.value for a in spec.after if (s := book.records.state(a)) is not None}

        def frees(without: frozenset[str]) -> bool:
            allocs, freed = [], dict.fromkeys((g.index for g in inputs.snapshot.gpus), 0)
            count = 0
            for other in book.active_names():
                orec = book.records[other]
                if not orec.active:
                    continue
                count += other not in without
                seen = inputs.observed.get(other, {})
                if other in without:
                    for gpu in orec.gpus:
                        freed[gpu] = freed.get(gpu, 0) + seen.get(gpu, 0)
                elif orec.gpus:
                    allocs.append(Allocation(other, orec.gpus, orec.mem_mib, seen))
            gpus = tuple(
                replace(g, mem_used_mib=max(0, g.mem_used_mib - freed.get(g.index, 0)))
                if g.mem_used_mib is not None and freed.get(g.index)
                else g
                for g in inputs.snapshot.gpus
            )
            decision = place(
                replace(inputs.snapshot, gpus=gpus),
                [cand],
                allocs,
                inputs.settings,
                dep_states=deps,
                running_count=count,
                now=time.time(),
                claims=inputs.claims,
            )
            return any(s.name == name for s in decision.starts)

        return frees


def _reason(victims: list[str] | tuple[str, ...]) -> str:
    listed = ", ".join(victims)
    return f"will preempt {listed} (preemptible, lower priority): starts once their memory is free"
