"""User diagnosis patterns under a deadline (issue 14.17): not written yet."""

from __future__ import annotations


class PatternWorker:
    """Placeholder (the test comes first)."""

    def __init__(self, deadline: float = 1.0) -> None:
        self.deadline = deadline

    def search(self, patterns: object, lines: object) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass
