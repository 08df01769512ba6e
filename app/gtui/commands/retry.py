"""``gtui retry QUEUE.toml NAME...``: queue finished (failed, killed, blocked, done) jobs again."""

from __future__ import annotations

import argparse

from gtui.commands import _jobcmd
from gtui.commands.options import GlobalOptions


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    return _jobcmd.main("retry", ns, opts)
