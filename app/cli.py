"""The ``gtui`` command line (DESIGN.md 2).

Global options may stand anywhere on the line, before or after the subcommand and the file, up to
a ``--`` (after which everything is the job's command, for ``gtui add``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gtui import __version__
from gtui.commands.options import GlobalOptions
from gtui.core.errors import EXIT_BAD_INPUT, GtuiError

SUBCOMMANDS = (
    "run",
    "validate",
    "status",
    "gpus",
    "add",
    "kill",
    "pause",
    "resume",
    "retry",
    "import",
    "attach",
    "ls",
)


def split_global_options(argv: Sequence[str]) -> tuple[GlobalOptions, list[str]]:
    """Take ``--fake-gpus SPEC`` and ``--no-tmux`` out of ``argv`` wherever they stand."""
    fake: str | None = os.environ.get("GTUI_FAKE_GPUS") or None
    no_tmux = False
    rest: list[str] = []
    i = 0
    args = list(argv)
    while i < len(args):
        a = args[i]
        if a == "--":
            rest.extend(args[i:])
            break
        if a == "--fake-gpus":
            if i + 1 >= len(args):
                raise GtuiError("--fake-gpus needs a SPEC, for example --fake-gpus 4x80G")
            fake = args[i + 1]
            i += 2
            continue
        if a.startswith("--fake-gpus="):
            fake = a.split("=", 1)[1]
        elif a == "--no-tmux":
            no_tmux = True
        else:
            rest.append(a)
        i += 1
    return GlobalOptions(fake_gpus=fake, no_tmux=no_tmux), rest


def _queue_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("queue", metavar="QUEUE.toml", help="the queue file")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gtui",
        description="Run a queue of shell commands on the GPUs of a shared Linux server.",
        epilog="Global options (anywhere on the line): --fake-gpus SPEC (or GTUI_FAKE_GPUS), "
        "--no-tmux, --version. `gtui QUEUE.toml` opens the dashboard.",
    )
    parser.add_argument("--version", action="version", version=f"gtui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="run the queue headless, printing the event log")
    _queue_arg(p)

    p = sub.add_parser("validate", help="check a queue file and print its expanded jobs")
    _queue_arg(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("status", help="jobs and GPUs as the running (or last) scheduler sees them")
    _queue_arg(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("gpus", help="the GPUs, their memory, utilization and processes")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("add", help="append a job to the queue file")
    _queue_arg(p)
    p.add_argument("--name", help="job name (derived from the command if absent)")
    p.add_argument("--gpus", type=int, help="GPUs the job needs (0 = CPU job)")
    p.add_argument("--mem", help="memory per GPU, e.g. 20G")
    p.add_argument("--priority", type=int, help="higher starts first")
    p.add_argument("--after", help="comma-separated names of jobs that must succeed first")
    p.add_argument("--retries", type=int, help="retries on failure (-1 = until it succeeds)")
    p.add_argument("--timeout", help="e.g. 4h")
    p.add_argument("--cwd", help="working directory")
    p.add_argument("cmd", nargs="*", metavar="-- CMD...", help="the command, after --")

    for verb, text in (
        ("kill", "kill jobs (SIGTERM, then SIGKILL after kill_grace)"),
        ("pause", "hold waiting jobs / suspend running ones; no NAME: pause the queue"),
        ("resume", "release held / continue suspended jobs; no NAME: resume the queue"),
        ("retry", "run failed or killed jobs again"),
    ):
        p = sub.add_parser(verb, help=text)
        _queue_arg(p)
        p.add_argument("names", nargs="*" if verb in ("pause", "resume") else "+", metavar="NAME")
        if verb == "kill":
            p.add_argument(
                "--wait",
                action="store_true",
                help="return once the jobs have ended (after kill_grace at most), not once "
                "SIGTERM is sent",
            )

    p = sub.add_parser("import", help="print a queue.toml made from a bash queue script")
    p.add_argument("file", metavar="FILE")

    p = sub.add_parser("attach", help="re-attach to a gtui tmux session")
    p.add_argument("queue", nargs="?", metavar="QUEUE.toml")

    sub.add_parser("ls", help="list gtui tmux sessions")
    return parser


def dispatch(argv: Sequence[str]) -> int:
    opts, rest = split_global_options(argv)
    job_words: list[str] | None = None
    if rest and rest[0] == "add" and "--" in rest:
        # Everything after `--` is the job's command, options and all.
        cut = rest.index("--")
        rest, job_words = rest[:cut], rest[cut + 1 :]
    if not rest or rest[0] in ("-h", "--help", "--version") or rest[0] in SUBCOMMANDS:
        parser = build_parser()
        ns = parser.parse_args(rest)
        if job_words is not None:
            ns.cmd = list(ns.cmd or []) + job_words
        if ns.command is None:
            parser.print_help()
            return 0
    else:
        dash = argparse.ArgumentParser(prog="gtui", description="the dashboard")
        dash.add_argument("queue", metavar="QUEUE.toml")
        ns = dash.parse_args(rest)
        ns.command = "dashboard"

    command: str = ns.command
    if command == "dashboard":
        from gtui.commands import dashboard

        return dashboard.main(ns, opts)
    if command == "import":
        from gtui.commands import importer

        return importer.main(ns, opts)
    module = __import__(f"gtui.commands.{command}", fromlist=["main"])
    result: int = module.main(ns, opts)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return dispatch(sys.argv[1:] if argv is None else argv)
    except GtuiError as e:
        print(f"gtui: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:
        # A file that cannot be read or written: the user's to fix, not a crash.
        print(f"gtui: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    raise SystemExit(main())
