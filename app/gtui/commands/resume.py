"""``gtui resume QUEUE.toml [NAME...]``: release held / continue suspended jobs; no NAME: queue."""

from __future__ import annotations

import argparse

from gtui.commands import _jobcmd
from gtui.commands.options import GlobalOptions


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    return _jobcmd.main("resume", ns, opts)
