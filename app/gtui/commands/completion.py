"""``gtui completion bash|zsh|fish``, and the answers to the shell's TAB.

Completion is argcomplete's: the script printed here makes the shell run ``gtui`` with
``_ARGCOMPLETE`` set at each TAB, and ``gtui.cli.main`` hands its parser to :func:`complete`.
That way the job names come from the queue file as it is now, not from a list frozen into the
script when it was printed. argcomplete is imported only on those two paths, never by a plain
``gtui`` command.
"""

from __future__ import annotations

import argparse
import glob
import os
from collections.abc import Callable
from typing import Any

from gtui.commands.options import GlobalOptions


def complete_queue(prefix: str, **_: Any) -> list[str]:
    """Queue files: ``.toml`` files and the folders that may hold one."""
    out: list[str] = []
    for path in sorted(glob.glob(os.path.expanduser(prefix) + "*")):
        if os.path.isdir(path):
            out.append(path + "/")
        elif path.endswith(".toml"):
            out.append(path)
    return out


def complete_jobs(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The job names of the queue named earlier on the line, and its sweeps' base names (what
    the commands accept); nothing when the file cannot be read."""
    queue = getattr(parsed_args, "queue", None)
    if not queue:
        return []
    from gtui.commands._names import sweep_bases
    from gtui.core.errors import GtuiError
    from gtui.core.queue.queuefile import load_queue, read_queue_text

    try:
        text = read_queue_text(queue)
        specs = load_queue(queue, text=text).jobs
        names = [s.name for s in specs] + list(sweep_bases(specs, text))
    except (GtuiError, OSError, ValueError):
        return []
    return [n for n in dict.fromkeys(names) if n.startswith(prefix)]


COMPLETERS: dict[str, Callable[..., list[str]]] = {
    "queue": complete_queue,
    "jobs": complete_jobs,
}


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request for ``parser``'s line and exit. The first word
    may also be a queue file (``gtui QUEUE.toml`` opens the dashboard)."""
    import argcomplete

    class _Finder(argcomplete.CompletionFinder):
        def collect_completions(
            self, active_parsers: list[argparse.ArgumentParser], parsed_args: Any, prefix: str
        ) -> list[str]:
            found: list[str] = super().collect_completions(active_parsers, parsed_args, prefix)
            if len(active_parsers) == 1 and not prefix.startswith("-"):
                found += complete_queue(prefix)
            return found

    _Finder()(
        parser,
        always_complete_options=False,  # options after a `-`, as git and uv do
        default_completer=argcomplete.completers.FilesCompleter(),
    )


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    """Print the script that makes ``ns.shell`` complete gtui's line."""
    import argcomplete

    print(argcomplete.shellcode(["gtui"], shell=ns.shell))
    return 0
