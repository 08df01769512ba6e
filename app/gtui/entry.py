"""The ``gtui`` command's first step. ``gtui add QUEUE.toml [OPTIONS] -- CMD...`` into a running
queue is served here with only what that request needs imported (the socket, JSON, the queue's
paths): the whole command line (gtui.cli: argparse, every command's options and help) was most
of its time. Every other command line, and an add that needs more (no scheduler runs, --from,
--help, a global option, an option argparse alone reads), goes on to gtui.cli, so what each
prints and exits with is the same either way.
"""

from __future__ import annotations

import os
import sys

from gtui.commands.guard import guarded


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["add"] and "_ARGCOMPLETE" not in os.environ:
        from gtui.commands.add_job import quick

        # None: not served (no scheduler runs, or a command line only gtui.cli reads); an
        # error it raised is the one the whole command line would say.
        code = guarded(lambda: quick(argv))
        if code is not None:
            return code
    from gtui.cli import main as whole

    return whole()
