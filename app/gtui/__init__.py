"""gtui: run a queue of shell commands on the GPUs of a shared Linux server.

From Python, ``from gtui import add, status, wait, log, kill`` (and ``pause``, ``resume``,
``retry``, ``stop``): functions that take a queue file's path and talk to the scheduler that
runs it, or to its saved state when none does (gtui.scripting). They are imported when first
used, so ``import gtui`` (and every ``gtui`` command) stays as quick as before.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: ``gtui add`` starts without it

__version__ = "0.1.0"

_API = ("GtuiError", "add", "kill", "log", "pause", "resume", "retry", "status", "stop", "wait")

if TYPE_CHECKING:
    from typing import Any

    from gtui.scripting import (
        GtuiError,
        add,
        kill,
        log,
        pause,
        resume,
        retry,
        status,
        stop,
        wait,
    )


def __getattr__(name: str) -> Any:
    if name in _API:
        from gtui import scripting

        return getattr(scripting, name)
    raise AttributeError(f"module 'gtui' has no attribute {name!r}")


__all__ = [
    "GtuiError",
    "__version__",
    "add",
    "kill",
    "log",
    "pause",
    "resume",
    "retry",
    "status",
    "stop",
    "wait",
]
