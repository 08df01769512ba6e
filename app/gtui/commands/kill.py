"""``gtui kill [--wait] QUEUE.toml NAME...``: SIGTERM, SIGKILL after kill_grace; waiting jobs:
killed. It returns once SIGTERM is sent; ``--wait`` returns once the jobs have ended."""

from __future__ import annotations

import argparse

from gtui.commands import _jobcmd
from gtui.commands.options import GlobalOptions


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    return _jobcmd.main("kill", ns, opts)
