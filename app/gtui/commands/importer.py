"""``gtui import FILE``: print a queue.toml made from a bash queue script or a command list.

The queue goes to stdout (``gtui import old.sh > queue.toml``); notes about what could not be
carried over go to stderr. A file that cannot be read or understood exits 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gtui.commands.options import GlobalOptions
from gtui.core.queue.importer import import_file


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    text, notes = import_file(Path(ns.file))
    sys.stdout.write(text)
    for note in notes:
        print(f"gtui import: {note}", file=sys.stderr)
    return 0
