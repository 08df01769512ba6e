"""Errors meant for a person: one or two lines, no traceback, with an exit code (DESIGN.md 2)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_JOBS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_LOCKED = 3


class GtuiError(Exception):
    """A user-facing error. ``str(e)`` is what gtui prints; ``exit_code`` what it exits with."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class QueueFileError(GtuiError):
    """A queue file that cannot be used: names the file, the line and the key."""

    def __init__(
        self, path: str, message: str, line: int | None = None, key: str | None = None
    ) -> None:
        where = f"{path}:{line}" if line else path
        what = f"{key}: " if key else ""
        super().__init__(f"{where}: {what}{message}")
        self.path = path
        self.line = line
        self.key = key
        self.detail = message


class LockedError(GtuiError):
    """Another scheduler already runs this queue."""

    exit_code = EXIT_LOCKED
