"""``gtui pause QUEUE.toml [NAME...]``: hold waiting / suspend running jobs; no NAME: the queue."""

from __future__ import annotations

import argparse

from gtui.commands import _jobcmd
from gtui.commands.options import GlobalOptions


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    return _jobcmd.main("pause", ns, opts)
