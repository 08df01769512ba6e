"""``gtui kill QUEUE.toml NAME...``: SIGTERM, SIGKILL after kill_grace; waiting jobs: killed."""

from __future__ import annotations

import argparse

from gtui.cli import GlobalOptions
from gtui.commands import _jobcmd


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    return _jobcmd.main("kill", ns, opts)
