"""How a key's engine command runs: in a worker, its error a toast, and the core's refusals said
in the core's own words."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager

from gtui.core.api import JobView
from gtui.core.errors import GtuiError
from gtui.core.model import JobRecord
from gtui.core.units import plural
from gtui.ui.rooms.view import MainView

OWN_EDIT_S = 3.0  # a reload this soon after our own command is our own edit: no news


def split_by_rule(
    views: Iterable[JobView], why_not: Callable[[JobRecord], str | None]
) -> tuple[list[str], str | None]:
    """The names of ``views`` that the core's rule (a ``transitions.why_not_*``) lets a command
    apply to, and the rule's refusal of the first one it does not (None if it refuses none):
    the sentence the core says when asked for all of them at once."""
    names: list[str] = []
    refusal: str | None = None
    for v in views:
        why = why_not(v.record)
        if why is None:
            names.append(v.spec.name)
        elif refusal is None:
            refusal = why
    return names, refusal


class Commands:
    """Runs the engine's commands for the keys, so that a kill that waits out ``kill_grace``
    never freezes the screen, and remembers when the last one ran (``own_edit``)."""

    def __init__(self, screen: MainView) -> None:
        self.screen = screen
        self._own_edit_until = 0.0

    def mark_own_edit(self) -> None:
        """A command of ours is about to rewrite the queue file: its reload is not news."""
        self._own_edit_until = time.monotonic() + OWN_EDIT_S

    @property
    def own_edit(self) -> bool:
        return time.monotonic() < self._own_edit_until

    def refused(self, why: str | None, timeout: float = 5) -> bool:
        """Say the core's refusal (``transitions.why_not_*`` or the queue file's rule), if any,
        word for word: the dashboard has no rule of its own for what a command applies to."""
        if why is None:
            return False
        self.screen.notify(why, severity="warning", timeout=timeout, markup=False)
        return True

    @contextmanager
    def told(self, label: str, done: str = "") -> Iterator[None]:
        """Around an engine command awaited in a worker: marks our own edit, says the core's
        error (a ``GtuiError``) as a toast titled ``label`` instead of raising it, else
        ``done``. A key that awaits its command itself (``JobKeys.kill``) uses it directly."""
        self.mark_own_edit()
        try:
            yield
        except GtuiError as e:
            self.screen.notify(str(e), title=label, severity="error", timeout=8, markup=False)
            return
        if done:
            self.screen.notify(done, timeout=3, markup=False)

    def run(self, label: str, call: Callable[[], Awaitable[object]], done: str = "") -> None:
        """Run an engine command in a worker: the screen stays live; errors become a toast."""

        async def run() -> None:
            with self.told(label, done):
                await call()

        self.screen.run_worker(run(), group="commands", exit_on_error=False)

    def bulk(
        self,
        label: str,
        names: list[str],
        call: Callable[[list[str]], Awaitable[object]],
        verb: str,
    ) -> None:
        """One command on several jobs at once, and one toast that counts them."""
        if names:
            self.run(label, lambda: call(names), f"{verb} {plural(len(names), 'job')}")
