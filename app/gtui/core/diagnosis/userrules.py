"""The user's [[diagnose]] rules as a scheduler runs them: in a worker process killed at a
deadline, and a rule that ran over switched off until the scheduler ends."""

from __future__ import annotations

from collections.abc import Sequence

from gtui.core.bus import EventBus
from gtui.core.diagnosis.rulematch import PatternWorker, WorkerFailed
from gtui.core.model import DiagnosisRule


class UserRules:
    def __init__(self, bus: EventBus) -> None:
        self._bus = bus
        self._worker = PatternWorker()
        self._worker_failed = False
        self.off: set[DiagnosisRule] = set()

    def search(self, pattern: str, lines: Sequence[str]) -> tuple[int, int] | None:
        """A user's pattern, run in the worker under its deadline. If no worker runs (the
        system refuses a process), the user rules are skipped, said once."""
        try:
            return self._worker.search(pattern, lines)
        except WorkerFailed as e:
            if not self._worker_failed:
                self._worker_failed = True
                self._bus.notice("warning", f"[[diagnose]] rules skipped: {e}")
            return None

    def overran(self, rule: DiagnosisRule) -> None:
        """A user's rule ran past the deadline: off for this scheduler, and the user told."""
        self.off.add(rule)
        self._bus.notice(
            "warning",
            f"[[diagnose]] rule `{rule.kind}` (pattern {rule.pattern!r}) took longer than "
            f"{self._worker.deadline:g} s on a log and is switched off until gtui "
            "restarts: a nested quantifier such as (a+)+ backtracks without end; simplify "
            "the pattern",
        )

    def close(self) -> None:
        self._worker.close()
