"""Errors meant for a person: one or two lines, no traceback, with an exit code."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: ``gtui add`` starts without it
if TYPE_CHECKING:
    from collections.abc import Iterable

EXIT_OK = 0
EXIT_JOBS_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_LOCKED = 3
# A scheduler took a request and gave no answer: whether it was done is not known.
EXIT_UNKNOWN = 4
EXIT_INTERRUPTED = 130  # stopped by the user (ctrl+c, a signal, `gtui stop`): no job failed


def os_error_text(e: OSError) -> str:
    """A file gtui could not use, in one line naming it and the problem (``Permission denied:
    /path``): the user's to fix, never a traceback."""
    text = e.strerror or str(e)
    if e.filename is not None:
        text += f": {e.filename}"
    return text


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


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``; did you mean `x`?`` for the choice closest to a mistyped ``word``, or "" (one
    wording for commands, job names and keys, as git and cargo do)."""
    import difflib  # only for a mistyped word: every command imports this module

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""
