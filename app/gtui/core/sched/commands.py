"""The scheduler's operations, as every client calls them (gtui.core.control.client): kill,
pause, resume, retry, the queue's pause, and the edits of the queue file.

The state flips are gtui.core.sched.transitions (shared with the no-scheduler commands); this
part adds what only a running scheduler does: signals through the executor, the file rewritten
and taken in at once, a placement pass right after.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Literal

from gtui.core.api import JobChanged
from gtui.core.bus import EventBus
from gtui.core.errors import GtuiError
from gtui.core.exec.base import Executor, handle_of
from gtui.core.model import JobState
from gtui.core.sched import transitions
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.intake import Intake
from gtui.core.sched.preempting import Preemption
from gtui.core.sched.quarantine import Quarantine
from gtui.core.sched.runs import JobRunner
from gtui.core.state.book import JobBook

Where = Literal["up", "down", "top"]


class Operations:
    """One method per request a client makes of a running scheduler."""

    def __init__(
        self,
        *,
        book: JobBook,
        bus: EventBus,
        executor: Executor,
        runner: JobRunner,
        intake: Intake,
        quarantine: Quarantine,
        config: QueueConfig,
        queue_path: Path,
        kick: Callable[[], None],
        preemption: Preemption | None = None,
    ) -> None:
        self.queue_path = queue_path
        self._preemption = preemption
        self._book = book
        self._bus = bus
        self._executor = executor
        self._runner = runner
        self._intake = intake
        self._source = intake.source
        self._quarantine = quarantine
        self._config = config
        self._kick = kick

    def _changed(self, name: str) -> None:
        self._bus.publish(JobChanged(self._book.view(name)))

    async def kill(self, names: Sequence[str], *, wait: bool = True) -> None:
        """Kill running jobs (TERM, KILL after kill_grace); waiting jobs become killed. Raises
        GtuiError, once all are done, for a job whose kill signalled nothing (it still runs).

        ``wait=False`` returns once TERM is sent (``gtui kill``): the grace and the KILL go on
        in the background, and the job's end is recorded as killed when it comes."""
        book = self._book
        transitions.check_kill(book.require, names)
        tasks: list[Awaitable[object]] = []
        for name in names:
            rec = book.records[name]
            if rec.active:
                if wait:
                    tasks.append(self._runner.kill(name))
                else:
                    signalled = asyncio.Event()
                    self._runner.spawn(self._runner.kill(name, signalled))
                    tasks.append(signalled.wait())
            else:
                transitions.kill_waiting(rec)
                book.commit(rec)
                self._changed(name)
        await asyncio.gather(*tasks)
        self._kick()
        failed = {n: why for n in names if (why := self._runner.kill_failure(n)) is not None}
        if failed:
            raise GtuiError(
                "; ".join(f"could not kill {n}: {why}" for n, why in failed.items())
                + ": nothing was signalled, it still runs"
            )

    async def pause(self, names: Sequence[str]) -> None:
        """Hold waiting jobs; suspend running ones (their GPU memory stays counted)."""
        self._switch(names, transitions.PAUSE)

    async def resume(self, names: Sequence[str]) -> None:
        """Release held jobs; continue suspended ones."""
        self._switch(names, transitions.RESUME)

    def _switch(self, names: Sequence[str], how: transitions.Switch) -> None:
        book = self._book
        transitions.check_switch(book.require, names, how)
        for name in names:
            rec = book.records[name]
            if transitions.switch(rec, how):
                handle = handle_of(rec)
                if how is transitions.PAUSE:
                    self._executor.suspend(handle)
                else:
                    self._executor.resume(handle)
            book.commit(rec)
            self._changed(name)
        self._kick()

    async def preempt(self, name: str, *, dry_run: bool = False) -> list[str]:
        """Make room now for the waiting job ``name`` (the dashboard's key, ``gtui preempt``):
        the preemptible jobs of lower priority it needs gone are stopped as a preemption
        would stop them; ``dry_run`` only names them. Refused, with why, when none would do."""
        rec = self._book.require(name)
        if rec.state is not JobState.QUEUED:
            raise GtuiError(f"{name} is {rec.state.value}: only a queued job can make room")
        preemption = self._preemption
        if preemption is None:
            raise GtuiError("this engine starts no job: it makes no room")
        victims = preemption.victims_for(name)
        if victims == ():
            raise GtuiError(f"{name} needs no room made: it starts at the next pass")
        if victims is None:
            raise GtuiError(
                f"no set of preemptible jobs of lower priority than {name} frees enough for it"
            )
        if not dry_run:
            preemption.make_room(name)
            self._kick()
        return list(victims)

    async def retry(self, names: Sequence[str]) -> None:
        """Queue finished jobs again (failed, killed, blocked, or done to run it once more)."""
        book = self._book
        transitions.check_retry(book.require, names)
        for name in names:
            rec = book.records[name]
            transitions.retry(rec)
            book.commit(rec)
            self._changed(name)
            for drec in transitions.unblocked_by(name, book.order, book.specs, book.records):
                book.commit(drec)
                self._changed(drec.name)
        self._kick()

    @property
    def quarantined(self) -> dict[int, dict[str, object]]:
        """GPUs out of placement after a hardware fault: index -> why, which job, since."""
        return dict(self._quarantine.gpus)

    async def clear_quarantine(self, gpus: Sequence[int] | None = None) -> list[int]:
        """Give quarantined GPUs back to placement (None: all); returns those released."""
        cleared = self._quarantine.clear(gpus)
        if cleared:
            self._bus.notice("info", f"GPU {','.join(map(str, cleared))} back in placement")
        self._kick()
        return cleared

    async def pause_queue(self) -> None:
        self._config.set_paused(True, self._book.store)
        self._kick()

    async def resume_queue(self) -> None:
        self._config.set_paused(False, self._book.store)
        self._kick()

    # ------------------------------------------------------------------ the queue file
    async def add(self, fields: dict[str, object]) -> str:
        """Append a job to the queue file (validated like the file) and take it in at once."""
        return (await self.add_many([fields]))[0]

    async def add_many(self, many: Sequence[dict[str, object]]) -> list[str]:
        """Append jobs to the queue file in one edit (validated like the file: one wrong job
        adds none) and take them in at once; the first name of each entry.

        The write and the take-in are one step under the intake's ``file_edits``: a second
        add (another shell) or a reload between them would read the new jobs from the file,
        and the take-in would then make them a second time (two records, two runs)."""
        if not many:
            return []
        async with self._intake.file_edits:
            if len(many) > 1:  # the same command twice is two jobs (a name each)
                from gtui.core.queue.names import named_apart

                many = named_apart(many, self._book.index)
            return await self._add(many)

    async def _add(self, many: Sequence[dict[str, object]]) -> list[str]:
        from gtui.core.queue.writeback import append_jobs, append_known_many

        book = self._book
        fast = await asyncio.to_thread(
            append_known_many,
            self.queue_path,
            [dict(f) for f in many],
            runs=self._source.runs,
            settings=self._config.settings,
            known=book.index,
            entry=book.next_entry,
            pool=self._intake.pool(),
            tables=self._source.holds_tables,
        )
        if fast is not None:
            # The file changed only by what we wrote and checked: take the new jobs in as they
            # are, instead of a reload that reads all 100,000 again.
            self._source.taken(fast.text, fast.digest, tables=True)
            back = book.extend(fast.jobs)
            for spec in fast.jobs:
                self._changed(spec.name)
            for rec in back:
                self._bus.notice(
                    "info",
                    f"{rec.name}: back in the queue file, and ended before "
                    f"({rec.state.value}): not run again; `gtui retry` runs it again",
                )
            for warning in fast.warnings:
                self._bus.notice("warning", warning)
            self._kick()
            return fast.firsts

        before = set(self._book.specs)
        # Checked against the GPUs too: a job none can take would make the file unrunnable.
        names = await asyncio.to_thread(
            append_jobs,
            self.queue_path,
            [dict(f) for f in many],
            pool=self._intake.pool(),
            reader=self._source.reader,
        )
        self._intake.reload_if_changed(force=True, edit=True)
        added = [n for n in self._book.order if n not in before]
        self._kick()
        if len(many) == 1:
            return added[-1:] if added else [str(many[0].get("name", ""))]
        return names

    async def edit(self, name: str, fields: dict[str, object]) -> None:
        from gtui.core.queue.writeback import update_job

        async with self._intake.file_edits:  # its state as the edit before it left it
            transitions.check(self._book.require, [name], transitions.why_not_edit)
            await asyncio.to_thread(
                update_job,
                self.queue_path,
                name,
                dict(fields),
                pool=self._intake.pool(),
                reader=self._source.reader,
            )
            self._intake.reload_if_changed(force=True, edit=True)
        self._kick()

    async def remove(self, name: str) -> None:
        from gtui.core.queue.writeback import remove_job

        async with self._intake.file_edits:  # its state as the edit before it left it
            transitions.check(self._book.require, [name], transitions.why_not_remove)
            await asyncio.to_thread(remove_job, self.queue_path, name, reader=self._source.reader)
            self._intake.reload_if_changed(force=True, edit=True)
        self._kick()

    async def move(self, name: str, where: Where) -> None:
        from gtui.core.queue.writeback import Place, move_job, place_job

        async with self._intake.file_edits:  # its state as the edit before it left it
            book = self._book
            transitions.check(book.require, [name], transitions.why_not_move)
            if where == "top":
                await asyncio.to_thread(
                    move_job, self.queue_path, name, where, reader=self._source.reader
                )
            else:  # past the next waiting job: the ended ones between stay where they are
                live = book.records.live()
                step = -1 if where == "up" else 1
                other = transitions.move_target(
                    name, step, book.order, book.specs, lambda n: n in live and live[n].waiting
                )
                if other is None:
                    return  # already the first (last) of the waiting jobs
                place: Place = "before" if where == "up" else "after"
                await asyncio.to_thread(
                    place_job, self.queue_path, name, place, other, reader=self._source.reader
                )
            self._intake.reload_if_changed(force=True, edit=True)
        self._kick()
