"""The keys that rewrite the queue file: add (a), edit (e), remove (d). Whether an edit or a
removal applies is the core's rule (``transitions``, and the queue file's own for a removal),
asked before the form or the dialog opens and said in its words."""

from __future__ import annotations

from textual.widgets import Input

from gtui.core.api import JobView
from gtui.core.queue.writeback import why_not_remove_alone
from gtui.core.sched import transitions
from gtui.ui.forms import changed_fields, fields_from_form, form_from_spec
from gtui.ui.rooms.commands import Commands
from gtui.ui.rooms.selection import Selection
from gtui.ui.rooms.view import MainView
from gtui.ui.screens.confirm import Choice, ConfirmScreen
from gtui.ui.screens.job_form import JobForm


def why_not_remove_from_file(view: JobView, jobs: list[JobView]) -> str | None:
    """Why the queue file's rewrite would refuse to remove this job, in its words (jobs wait
    for it, or it is one combination of a matrix with several keys): asked before the dialog
    rather than said after it."""
    refused = why_not_remove_alone([v.spec for v in jobs], view.spec)
    return refused[1] if refused is not None else None


class QueueEdits:
    """a, e and d: the job form or the dialog, then the engine's edit of the file."""

    def __init__(self, screen: MainView, selection: Selection, commands: Commands) -> None:
        self.screen = screen
        self.selection = selection
        self.commands = commands

    def opens_form(self, key: str) -> bool:
        """Whether ``key``, pressed now, opens the add / edit form (GtuiApp keeps the keys typed
        after it for the form)."""
        if isinstance(self.screen.focused, Input):
            return False  # typed into the filter line
        if key == "a":
            return True
        if key == "e":
            view = self.selection.view(quiet=True)
            return view is not None and transitions.why_not_edit(view.record) is None
        return False

    def add(self) -> None:
        s = self.screen

        async def submit(values: dict[str, str]) -> str:
            fields = fields_from_form(values)
            self.commands.mark_own_edit()
            return await s.engine.add(fields)

        def added(name: str | None) -> None:
            if name:
                self.selection.select_after = name
                s.table.select(name)
                s.notify(f"added {name}", timeout=3, markup=False)

        q = s.engine.queue_path.name
        s.app.push_screen(JobForm(f"Add a job to {q}", submit), added)

    def edit(self) -> None:
        s = self.screen
        view = self.selection.view()
        if view is None or self.commands.refused(transitions.why_not_edit(view.record)):
            return
        name = view.spec.name
        before = form_from_spec(view.spec)
        ended = view.record.final

        async def submit(values: dict[str, str]) -> str:
            fields = changed_fields(before, values)
            self.commands.mark_own_edit()
            if fields:
                await s.engine.edit(name, fields)
            new = fields.get("name")
            return new if isinstance(new, str) and new else name

        def edited(new_name: str | None) -> None:
            if not new_name:
                return
            self.selection.select_after = new_name
            if ended:
                self._offer_run_again(new_name)
            else:
                s.notify(f"saved {new_name}", timeout=3, markup=False)

        s.app.push_screen(JobForm(f"Edit {name}", submit, before, verb="Save"), edited)

    def _offer_run_again(self, name: str) -> None:
        """After the edit of an ended job: run it again with one key (r), as ``r`` would."""
        s = self.screen

        def chosen(value: str | None) -> None:
            if value == "retry":
                self.commands.run("retry", lambda: s.engine.retry([name]), f"{name}: queued again")

        s.app.push_screen(
            ConfirmScreen(
                f"Saved {name}. Run it again?",
                f"{name} has ended; the edit applies when it runs again (r on it later does the "
                "same).",
                [Choice("r", "Run it again", "retry", "primary")],
            ),
            chosen,
        )

    def remove(self) -> None:
        s = self.screen
        view = self.selection.view()
        if view is None:
            return
        name = view.spec.name
        if self.commands.refused(transitions.why_not_remove(view.record)):
            return
        if self.commands.refused(why_not_remove_from_file(view, s.engine.jobs()), timeout=8):
            return
        q = s.engine.queue_path.name

        def chosen(value: str | None) -> None:
            if value == "remove":
                self.commands.run("remove", lambda: s.engine.remove(name), f"removed {name}")

        s.app.push_screen(
            ConfirmScreen(
                f"Remove {name}?",
                f"Its entry is deleted from {q} (the file is rewritten; comments elsewhere stay).",
                [Choice("y", "Remove", "remove", "error")],
            ),
            chosen,
        )
