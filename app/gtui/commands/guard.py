"""How the command line ends: a user's error is one line on stderr and its exit status, never
a traceback. Used by gtui.entry (the fast ``gtui add``) and gtui.cli (every other command), so
that both say the same."""

from __future__ import annotations

import sys

from gtui.core.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, GtuiError

TYPE_CHECKING = False  # typing is not imported at run time: ``gtui add`` starts without it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    Code = TypeVar("Code", int, int | None)


def guarded(command: Callable[[], Code]) -> Code | int:
    """Run ``command``; a user's error is one line on stderr and its exit status, never a
    traceback (the one place that turns errors into what the command line says)."""
    try:
        return command()
    except GtuiError as e:
        print(f"gtui: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except OSError as e:
        from gtui.core.errors import os_error_text

        # A file that cannot be read or written: the user's to fix, not a crash.
        print(f"gtui: {os_error_text(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
