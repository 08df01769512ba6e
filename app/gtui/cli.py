"""The ``gtui`` command line.

Global options may stand anywhere on the line, before or after the subcommand and the file, up to
a ``--`` (after which everything is the job's command, for ``gtui add``). Shell completion
is argcomplete's: the shell runs ``gtui`` itself with ``_ARGCOMPLETE`` set, and the
parser below, with the completers of ``gtui.commands.completion``, answers; argcomplete is
imported only then, or by ``gtui completion``.

Size: the whole command line is one argparse tree (every command, option, help text and
example), so that ``--help``, the dispatcher and shell completion read the same definition.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence

from gtui import __version__
from gtui.commands.guard import guarded
from gtui.commands.options import GlobalOptions
from gtui.core.errors import GtuiError, did_you_mean

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
    "preempt",
    "log",
    "follow",
    "wait",
    "move",
    "rm",
    "clean",
    "edit",
    "stop",
    "events",
    "quarantine",
    "report",
    "doctor",
    "import",
    "attach",
    "ls",
    "completion",
    "fleet",
)

EXIT_CODES = (
    ("0", "ok: the command did what it said (run, wait, follow: every job ended done)"),
    ("1", "jobs failed (run, wait, follow); doctor: the state database needs a repair"),
    ("2", "bad input: a queue file, an option, a job name (one line says which)"),
    ("3", "another scheduler runs this queue (its pid is named), or is stopped or busy: not done"),
    ("4", "the scheduler took the command and never answered: whether it was done is unknown"),
    ("124", "gtui wait --timeout: the time ran out"),
    ("130", "interrupted: ctrl+c, a signal, or `gtui stop` before every job ended (run)"),
)

NAMES_HELP = (
    "job names; a glob ('train-*', quoted) or a sweep's base name stands for all the jobs it "
    "matches"
)


def split_global_options(argv: Sequence[str]) -> tuple[GlobalOptions, list[str]]:
    """Take ``--fake-gpus SPEC`` and ``--no-tmux`` out of ``argv`` wherever they stand."""
    fake: str | None = os.environ.get("GTUI_FAKE_GPUS") or None
    no_tmux = False
    backend: str | None = None
    rest: list[str] = []
    i = 0
    args = list(argv)
    while i < len(args):
        a = args[i]
        if a == "--":
            rest.extend(args[i:])
            break
        if a == "--backend" or a.startswith("--backend="):
            value = a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
            if value not in ("local", "ray"):
                raise GtuiError("--backend needs local or ray, for example --backend ray")
            backend = value
            i += 1 if "=" in a else 2
            continue
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
    return GlobalOptions(fake_gpus=fake, no_tmux=no_tmux, backend=backend), rest


def _queue_arg(p: argparse.ArgumentParser) -> None:
    _complete(p.add_argument("queue", metavar="QUEUE.toml", help="the queue file"), "queue")


def _complete(action: argparse.Action, what: str) -> argparse.Action:
    """Mark ``action`` for shell completion: ``queue`` (``.toml`` files), ``jobs`` (the names
    in the queue file given before it). The completers live in gtui.commands.completion."""
    from gtui.commands.completion import COMPLETERS

    action.completer = COMPLETERS[what]  # type: ignore[attr-defined]
    return action


def _epilog() -> str:
    codes = "\n".join(f"  {code:<4} {text}" for code, text in EXIT_CODES)
    return (
        "`gtui QUEUE.toml` opens the dashboard (in tmux when it is installed).\n"
        "Global options stand anywhere on the line, before or after the command.\n"
        "NO_COLOR=1 drops colours, a log's own too, into a pipe as well. Into a pipe gtui\n"
        "writes no escape of its own (without NO_COLOR a log goes out as the job wrote it).\n"
        "`gtui completion bash|zsh|fish` prints shell completion.\n\n"
        f"exit codes:\n{codes}\n\n"
        "example:\n  gtui run q.toml --fake-gpus 4x80G"
    )


def _add(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    text: str,
    example: str | None = None,
) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with an example."""
    return sub.add_parser(
        name,
        help=text,
        description=textwrap.fill(text[0].upper() + text[1:] + ".", 79),
        epilog=f"example:\n  {example}" if example else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _lines(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of lines, got {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError("the number of lines cannot be negative")
    return n


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gtui",
        usage="gtui [GLOBAL OPTIONS] COMMAND [ARGS]  |  gtui [GLOBAL OPTIONS] QUEUE.toml",
        description="Run a queue of shell commands on the GPUs of a shared Linux server.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    glob = parser.add_argument_group("global options")
    glob.add_argument("--version", action="version", version=f"gtui {__version__}")
    # Taken off the line by split_global_options before parsing; here for --help and completion.
    glob.add_argument(
        "--fake-gpus",
        metavar="SPEC",
        help="simulated GPUs, e.g. 4x80G or 80G:16G@35,24G (also GTUI_FAKE_GPUS)",
    )
    glob.add_argument(
        "--no-tmux", action="store_true", help="run the dashboard in place, not in tmux"
    )
    glob.add_argument(
        "--backend",
        choices=("local", "ray"),
        help="where jobs run: this machine (default) or a Ray cluster ([cluster] in the file)",
    )
    # prog="gtui": each command's usage line is its own (`gtui run [-h] QUEUE.toml`), not the
    # top usage line with the command's tacked on.
    sub = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND", prog="gtui")

    p = _add(
        sub,
        "run",
        "run the queue headless, printing the event log",
        "nohup gtui run q.toml --stay 1h > q.log 2>&1 &",
    )
    # QUEUE.toml is optional to argparse only so that `gtui run --stay q.toml` parses (the
    # file taken for the duration is put back in commands/run.py); the usage says it as it is.
    p.usage = "gtui run [-h] [--stay [DURATION]] QUEUE.toml"
    _complete(
        p.add_argument("queue", nargs="?", metavar="QUEUE.toml", help="the queue file"), "queue"
    )
    p.add_argument(
        "--stay",
        nargs="?",
        const="until-stopped",
        metavar="DURATION",
        help="once nothing more can run, keep serving (`gtui add` finds this scheduler) until "
        "`gtui stop`, or DURATION (30s, 10m, 2h) after the last job ended",
    )
    # The successor of a dashboard that quits (gtui.core.sched.handover): not for people.
    p.add_argument("--take-over-from", type=int, metavar="PID", help=argparse.SUPPRESS)

    p = _add(
        sub,
        "validate",
        "check a queue file and print its expanded jobs",
        "gtui validate q.toml --fake-gpus 4x80G",
    )
    _queue_arg(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--all", action="store_true", help="list every job (a long queue shows the first 50)"
    )

    p = _add(
        sub,
        "status",
        "jobs and GPUs as the running (or last) scheduler sees them",
        "gtui status q.toml --state failed,waiting --watch",
    )
    _queue_arg(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--state",
        metavar="S,...",
        help="only jobs in these states: queued, held, running, suspended, done, failed, "
        "killed, blocked, unknown, or waiting, active, ended, trouble",
    )
    p.add_argument(
        "--group", metavar="NAME", help="only the jobs of this group (group = NAME, a sweep)"
    )
    p.add_argument("--watch", action="store_true", help="redraw in place, like watch(1)")
    p.add_argument("--interval", default="2s", metavar="DURATION", help="with --watch (default 2s)")

    p = _add(sub, "gpus", "the GPUs, their memory, utilization and processes", "gtui gpus --json")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = _add(
        sub,
        "add",
        "append a job to the queue file",
        "gtui add q.toml --gpus 1 --mem 20G -- python train.py --lr 0.1",
    )
    _queue_arg(p)
    p.add_argument("--name", help="job name (derived from the command if absent)")
    p.add_argument("--gpus", type=int, help="GPUs the job needs (0 = CPU job)")
    p.add_argument("--mem", help="memory per GPU, e.g. 20G")
    p.add_argument("--priority", type=int, help="higher starts first")
    p.add_argument("--after", help="comma-separated names of jobs that must succeed first")
    p.add_argument("--retries", type=int, help="retries on failure (-1 = until it succeeds)")
    p.add_argument("--timeout", help="e.g. 4h")
    p.add_argument("--cwd", help="working directory")
    p.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="add one job per line of FILE ('-': stdin): a command, or a JSON object with cmd, "
        "name, gpus, mem, ...; all in one edit (the options above apply to every line)",
    )
    p.add_argument("cmd", nargs="*", metavar="-- CMD...", help="the command, after --")

    for verb, text, example in (
        ("kill", "kill jobs (SIGTERM, then SIGKILL after kill_grace)", "gtui kill q.toml 'lr*'"),
        (
            "pause",
            "hold waiting jobs / suspend running ones; no NAME: pause the queue",
            "gtui pause q.toml sweep",
        ),
        (
            "resume",
            "release held / continue suspended jobs; no NAME: resume the queue",
            "gtui resume q.toml sweep",
        ),
        (
            "retry",
            "run failed or killed jobs again (a pattern takes those that did not end done); "
            "--all: every ended job, done ones too, to run the whole queue again",
            "gtui retry q.toml 'sweep-*'",
        ),
    ):
        p = _add(sub, verb, text, example)
        _queue_arg(p)
        _complete(
            p.add_argument(
                "names",
                nargs="+" if verb == "kill" else "*",
                metavar="NAME",
                help=NAMES_HELP,
            ),
            "jobs",
        )
        if verb == "retry":
            p.add_argument(
                "--all",
                action="store_true",
                help="every job that has ended, done ones too (a demo, or a queue, seen again)",
            )
        if verb == "kill":
            p.add_argument(
                "--wait",
                action="store_true",
                help="return once the jobs have ended (after kill_grace at most), not once "
                "SIGTERM is sent",
            )

    p = _add(
        sub,
        "log",
        "print a job's log (its latest attempt); safe for the terminal, raw when piped",
        "gtui log q.toml train-lr0.1 --attempt 1 -n 50",
    )
    _queue_arg(p)
    _complete(
        p.add_argument("job", metavar="JOB", help="the job (a pattern must match one)"), "jobs"
    )
    p.add_argument("--attempt", type=int, metavar="N", help="that attempt's log, not the latest")
    p.add_argument("-n", "--lines", type=_lines, metavar="LINES", help="only the last LINES")

    p = _add(
        sub,
        "follow",
        "print a job's log as it grows until the job ends (waits for it to start); "
        "exit 0 if it ended done, 1 otherwise",
        "gtui follow q.toml train-lr0.1 -n 20",
    )
    _queue_arg(p)
    _complete(
        p.add_argument("job", metavar="JOB", help="the job (a pattern must match one)"), "jobs"
    )
    p.add_argument("-n", "--lines", type=_lines, metavar="LINES", help="start at the last LINES")

    p = _add(
        sub,
        "wait",
        "wait until the jobs (no JOB: the whole queue) have ended; exit 0 if all ended done, "
        "1 otherwise (a line for each), 124 on --timeout",
        "gtui wait q.toml 'sweep-*' --timeout 4h && gtui add q.toml -- python eval.py",
    )
    _queue_arg(p)
    _complete(p.add_argument("names", nargs="*", metavar="JOB", help=NAMES_HELP), "jobs")
    p.add_argument("--timeout", metavar="DURATION", help="give up after this long (90s, 4h)")

    p = _add(
        sub,
        "move",
        "reorder a waiting job in the queue file (a matrix entry moves whole)",
        "gtui move q.toml eval --before train-lr0.1",
    )
    _queue_arg(p)
    _complete(p.add_argument("job", metavar="JOB", help="the waiting job to move"), "jobs")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--top", action="store_true", help="to the top of the queue")
    where.add_argument("--bottom", action="store_true", help="to the bottom of the queue")
    _complete(
        where.add_argument("--before", metavar="OTHER", help="right before job OTHER"), "jobs"
    )
    _complete(where.add_argument("--after", metavar="OTHER", help="right after job OTHER"), "jobs")

    p = _add(
        sub,
        "preempt",
        "make room now for a waiting job: stop the preemptible jobs of lower priority it needs",
        "gtui preempt q.toml urgent-eval",
    )
    _queue_arg(p)
    _complete(p.add_argument("job", metavar="JOB", help="the waiting job to make room for"), "jobs")
    p.add_argument("--dry-run", action="store_true", help="only name the jobs it would stop")

    p = _add(
        sub,
        "rm",
        "remove waiting or ended jobs from the queue file (their history is kept)",
        "gtui rm q.toml 'lr0.0*'",
    )
    _queue_arg(p)
    _complete(p.add_argument("names", nargs="+", metavar="JOB", help=NAMES_HELP), "jobs")

    p = _add(
        sub,
        "clean",
        "remove the jobs that ended done from the queue file (--failed: every ended job)",
        "gtui clean q.toml --failed",
    )
    _queue_arg(p)
    p.add_argument(
        "--failed", action="store_true", help="also failed, killed, blocked and unknown jobs"
    )

    p = _add(
        sub,
        "edit",
        "edit a job's table in $EDITOR (then $VISUAL, vi); checked before it is written",
        "EDITOR=nano gtui edit q.toml train-lr0.1",
    )
    _queue_arg(p)
    _complete(
        p.add_argument("job", metavar="JOB", help="the job (a pattern must match one)"), "jobs"
    )

    p = _add(
        sub,
        "stop",
        "stop the queue's scheduler (headless or a dashboard's) and wait until it has exited; "
        "running jobs go on (re-adopted next time) unless --kill",
        "gtui stop q.toml --kill",
    )
    _queue_arg(p)
    p.add_argument("--kill", action="store_true", help="kill the running jobs first")

    p = _add(
        sub,
        "events",
        "print the queue's transitions as JSON lines, one per change, until interrupted",
        "gtui events q.toml | jq -r 'select(.state == \"failed\") | .name'",
    )
    _queue_arg(p)

    p = _add(
        sub,
        "quarantine",
        "list the GPUs taken out of placement after a hardware fault, or give them back",
        "gtui quarantine q.toml --clear 2",
    )
    _queue_arg(p)
    p.add_argument("--clear", metavar="GPU,...|all", help="give these GPUs back to placement")

    p = _add(
        sub,
        "report",
        "what the queue's jobs cost and waited for: GPU-hours, memory asked vs used, waits, "
        "failures, GPUs idle while jobs waited (from the saved state; no scheduler needed)",
        "gtui report q.toml --json | jq .total",
    )
    _queue_arg(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = _add(
        sub,
        "doctor",
        "check the queue's state database against its jobs' logs, exit-status files and "
        "processes; exit 1 if it is damaged or behind them. --repair rebuilds it (from its "
        "backup and those traces; nothing runs again)",
        "gtui doctor q.toml --repair",
    )
    _queue_arg(p)
    p.add_argument(
        "--repair",
        action="store_true",
        help="rebuild it (no scheduler may run: `gtui run` does the same at its start)",
    )

    p = _add(
        sub,
        "import",
        "print a queue.toml made from a bash queue script",
        "gtui import run_all.sh > q.toml",
    )
    p.add_argument("file", metavar="FILE")

    p = _add(sub, "attach", "re-attach to a gtui tmux session", "gtui attach q.toml")
    _complete(p.add_argument("queue", nargs="?", metavar="QUEUE.toml"), "queue")

    _add(sub, "ls", "list gtui tmux sessions", "gtui ls")

    p = _add(
        sub,
        "completion",
        "print the shell completion script for bash, zsh or fish (commands, options, queue "
        "files, job names)",
        "gtui completion bash > ~/.local/share/bash-completion/completions/gtui",
    )
    p.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell")

    p = _add(
        sub,
        "fleet",
        "several servers' queues over ssh: no arguments or HOST:QUEUE... opens one dashboard; "
        "`status [--json]` prints every host's jobs and GPUs (exit 0 only when all answered); "
        "`kill|pause|resume|retry HOST:QUEUE JOB...` acts on one host. Hosts come from the "
        "arguments, else from ~/.config/gtui/fleet.toml",
        "gtui fleet status --json gpu1:~/q.toml gpu2:~/q.toml",
    )
    p.add_argument(
        "words",
        nargs=argparse.REMAINDER,
        metavar="ARGS",
        help="[status|kill|pause|resume|retry] HOST:QUEUE... (options may stand among them)",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output (status)")
    p.add_argument(
        "--remote-gtui",
        metavar="CMD",
        help="the gtui command on hosts that do not set gtui = ... (default: gtui)",
    )
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
        _refuse_unknown_command(rest[0])
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


def _refuse_unknown_command(word: str) -> None:
    """A first word that is no command and no file: a mistyped command, said as such (git's
    "did you mean"), not opened as a queue. A path or a ``.toml`` name goes on to the dashboard,
    which says plainly that the file is missing."""
    if word.startswith("-") or os.path.exists(word) or word.endswith(".toml") or "/" in word:
        return
    hint = did_you_mean(word, SUBCOMMANDS)
    if hint:
        raise GtuiError(f"unknown command `{word}`{hint}")
    raise GtuiError(
        f"`{word}` is neither a command nor a queue file; `gtui --help` lists the commands"
    )


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None and "_ARGCOMPLETE" in os.environ:
        from gtui.commands.completion import complete

        complete(build_parser())  # answers the shell and exits
    return guarded(lambda: dispatch(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    raise SystemExit(main())
