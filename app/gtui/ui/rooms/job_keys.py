"""The keys that act on jobs and the queue: kill, retry, pause / resume, move, pause the queue,
give a GPU back. Each asks the core's rule (``transitions``) whether it applies, and says the
core's refusal word for word when it does not."""

from __future__ import annotations

from typing import Literal

from gtui.core.api import JobView
from gtui.core.errors import GtuiError
from gtui.core.model import JobRecord, JobState
from gtui.core.sched import transitions
from gtui.core.units import format_duration, plural
from gtui.ui.rooms.commands import Commands, split_by_rule
from gtui.ui.rooms.selection import Selection
from gtui.ui.rooms.view import MainView
from gtui.ui.screens.confirm import Choice, ConfirmScreen


def why_not_pause(rec: JobRecord) -> str | None:
    return transitions.why_not_switch(rec, transitions.PAUSE)


def why_not_resume(rec: JobRecord) -> str | None:
    return transitions.why_not_switch(rec, transitions.RESUME)


class JobKeys:
    """x, r, p, K / J / t, P and the palette's quarantine clear, on the selected job or, where
    jobs are marked, on every marked one."""

    def __init__(self, screen: MainView, selection: Selection, commands: Commands) -> None:
        self.screen = screen
        self.selection = selection
        self.commands = commands
        self._asking = False  # a kill's question is on its way or on screen

    def pause_label(self, default: str) -> str:
        """``p`` reads Resume on a job that the core would resume."""
        v = self.selection.view(quiet=True)
        return "Resume" if v is not None and why_not_resume(v.record) is None else default

    async def kill(self) -> None:
        """``x``, run in a worker (``MainScreen.action_kill``): the core's refusal said word for
        word, else "Kill NAME?" awaited, and on ``y`` the engine's kill awaited here, the
        screen live meanwhile (a running job's kill waits out ``kill_grace``)."""
        s = self.screen
        marked = self.selection.marked()
        if marked:
            await self._kill_marked(marked)
            return
        view = self.selection.view()
        if view is None:
            return
        name, rec = view.spec.name, view.record
        if self.commands.refused(transitions.why_not_kill(rec), timeout=4):
            return
        if rec.active:
            where = ",".join(map(str, rec.gpus)) or "the CPU"
            since = format_duration(s.clock() - rec.started_at) if rec.started_at else "?"
            grace = format_duration(s.engine.settings.kill_grace_s)
            body = (
                (
                    f"{name} is {rec.state.value} on GPU {where} for {since} (pid {rec.pid}).\n"
                    f"Its process group gets SIGTERM, then SIGKILL after {grace}; nothing of it "
                    "survives. r runs it again."
                )
                if rec.gpus
                else (
                    f"{name} is {rec.state.value} (pid {rec.pid}) for {since}.\n"
                    f"Its process group gets SIGTERM, then SIGKILL after {grace}. r runs it again."
                )
            )
        else:
            body = f"{name} has not started. It is marked killed and will not run (r retries it)."
        if not await self._confirmed(f"Kill {name}?", body):
            return
        with self.commands.told("kill", f"killing {name}"):
            await s.engine.kill([name])

    async def _kill_marked(self, marked: list[JobView]) -> None:
        s = self.screen
        names, refusal = split_by_rule(marked, transitions.why_not_kill)
        if not names:
            self.commands.refused(refusal, timeout=4)
            return
        n = len(names)
        running = sum(1 for v in marked if v.record.active)
        listed = ", ".join(names[:8]) + (f" and {n - 8} more" if n > 8 else "")
        grace = format_duration(s.engine.settings.kill_grace_s)
        body = (
            f"{listed}.\n{plural(running, 'running job')} get SIGTERM, then SIGKILL after "
            f"{grace}; {plural(n - running, 'waiting job')} will not run. r runs them again."
        )
        if not await self._confirmed(f"Kill {plural(n, 'job')}?", body):
            return
        with self.commands.told("kill", f"killing {plural(n, 'job')}"):
            await s.engine.kill(names)

    async def _confirmed(self, title: str, body: str) -> bool:
        """Whether the user answers ``y`` (Kill) to the question. One question at a time: an
        ``x`` whose worker starts before the last one's question is on screen asks nothing
        (once shown, the modal question takes the keys itself)."""
        if self._asking:
            return False
        self._asking = True
        try:
            question = ConfirmScreen(title, body, [Choice("y", "Kill", "kill", "error")])
            return await self.screen.app.push_screen_wait(question) == "kill"
        finally:
            self._asking = False

    def make_room(self) -> None:
        """M: make room now for the selected waiting job. The victims are asked of the
        core first (a dry run) and named in the question; nothing is stopped before y."""
        s = self.screen
        view = self.selection.view()
        if view is None:
            return
        name = view.spec.name

        async def ask() -> None:
            try:
                victims = await s.engine.preempt(name, dry_run=True)
            except GtuiError as e:
                self.commands.refused(str(e), timeout=6)
                return
            listed = ", ".join(victims)
            body = (
                f"To start {name}, gtui stops {listed}: each gets its signal and its grace to "
                "save, then SIGTERM / SIGKILL, and goes back to the queue as preempted (no "
                f"retry spent; its next attempt has GTUI_RESUME=1). {name} starts once their "
                "memory is free."
            )

            def chosen(value: str | None) -> None:
                if value == "preempt":
                    self.commands.run(
                        "make room",
                        lambda: s.engine.preempt(name),
                        f"preempting {listed} for {name}",
                    )

            s.app.push_screen(
                ConfirmScreen(
                    f"Preempt {listed} for {name}?",
                    body,
                    [Choice("y", "Preempt", "preempt", "warning")],
                ),
                chosen,
            )

        s.run_worker(ask(), group="commands", exit_on_error=False)

    def retry(self) -> None:
        s = self.screen
        marked = self.selection.marked()
        if marked:
            ended, refusal = split_by_rule(marked, transitions.why_not_retry)
            if not ended:
                self.commands.refused(refusal, timeout=4)
            self.commands.bulk("retry", ended, s.engine.retry, "queued again:")
            return
        view = self.selection.view()
        if view is None:
            return
        name = view.spec.name
        if self.commands.refused(transitions.why_not_retry(view.record), timeout=4):
            return
        self.commands.run("retry", lambda: s.engine.retry([name]), f"{name}: queued again")

    def move(self, where: Literal["up", "down", "top"]) -> None:
        s = self.screen
        marked = self.selection.marked()
        if marked:
            waiting, refusal = split_by_rule(marked, transitions.why_not_move)
            if not waiting:
                self.commands.refused(refusal, timeout=4)
                return
            # up: the first first, so each keeps its place among them; down and top: the last
            # first (the first moved to the top would be passed by the next one).
            order = waiting if where == "up" else list(reversed(waiting))

            async def move_all() -> None:
                for name in order:
                    await s.engine.move(name, where)

            self.commands.run("move", move_all, f"moved {plural(len(waiting), 'job')} {where}")
            return
        view = self.selection.view()
        if view is None or self.commands.refused(transitions.why_not_move(view.record), timeout=4):
            return
        name = view.spec.name
        self.selection.select_after = name
        self.commands.run("move", lambda: s.engine.move(name, where))

    def pause_job(self) -> None:
        """``p``: pause what the core would pause, else resume what it would resume."""
        s = self.screen
        marked = self.selection.marked()
        if marked:
            pausable, refusal = split_by_rule(marked, why_not_pause)
            paused, _ = split_by_rule(marked, why_not_resume)
            if pausable:
                self.commands.bulk("pause", pausable, s.engine.pause, "paused")
            elif paused:
                self.commands.bulk("resume", paused, s.engine.resume, "resumed")
            else:
                self.commands.refused(refusal, timeout=4)
            return
        view = self.selection.view()
        if view is None:
            return
        name, st = view.spec.name, view.record.state
        if why_not_pause(view.record) is None:
            self.commands.run(
                "pause",
                lambda: s.engine.pause([name]),
                f"{name}: {'held' if st == JobState.QUEUED else 'suspended (SIGSTOP)'}",
            )
        elif why_not_resume(view.record) is None:
            self.commands.run("resume", lambda: s.engine.resume([name]), f"{name}: resumed")
        else:
            self.commands.refused(why_not_pause(view.record), timeout=4)

    def pause_queue(self) -> None:
        s = self.screen
        if s.engine.paused:
            self.commands.run("resume queue", s.engine.resume_queue, "queue resumed: dispatch ON")
        else:
            self.commands.run(
                "pause queue",
                s.engine.pause_queue,
                "queue paused: no new job starts; running jobs go on",
            )

    def clear_quarantine(self) -> None:
        """Give back the GPUs a hardware fault took out of placement (asks first)."""
        s = self.screen
        read = s.engine.gpus
        gpus = tuple(read.quarantined) if read is not None else ()
        if not gpus:
            s.notify("no GPU is quarantined", timeout=3, markup=False)
            return
        listed = ",".join(map(str, gpus))

        def chosen(value: str | None) -> None:
            if value == "clear":
                self.commands.run(
                    "clear quarantine",
                    lambda: s.engine.clear_quarantine(None),
                    f"GPU {listed} back in placement",
                )

        s.app.push_screen(
            ConfirmScreen(
                f"Give GPU {listed} back?",
                f"GPU {listed} was taken out of placement after a hardware fault (an "
                "uncorrectable ECC error, an Xid, a GPU fallen off the bus). Give it back only "
                "once it has been checked (nvidia-smi, a reset or a reboot): jobs start there "
                "again at once.",
                [
                    Choice("c", "Give it back", "clear", "warning"),
                    Choice("k", "Keep it out", "keep", "primary"),
                ],
            ),
            chosen,
        )
