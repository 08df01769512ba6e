"""What runs before a job's command: its ``setup`` shell text and its ``env_file``.

A job's own ``setup`` / ``env_file`` replaces the queue's (``[settings]``); an empty job
``setup`` turns the queue's off. ``setup`` runs in the same bash as the command, just before
it, so what it does (``source .venv/bin/activate``, ``conda activate``, ``export``) holds for the
command. A setup that ends with a non-zero status stops the job there: the command does not run,
and the log's last line, ``gtui: setup failed (exit N): ...``, is what the diagnosis names.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from gtui.core.model import JobSpec, Settings
from gtui.core.queue.envfile import read_env_file

SETUP_FAILED = "gtui: setup failed"  # the start of the line a failed setup leaves in the log


def setup_of(spec: JobSpec, settings: Settings) -> str | None:
    """The setup ``spec`` runs: its own, else the queue's (None: none)."""
    setup = settings.setup if spec.setup is None else spec.setup
    return setup if setup and setup.strip() else None


def env_file_of(spec: JobSpec, settings: Settings) -> str | None:
    """The env_file ``spec`` reads: its own, else the queue's (None: none)."""
    return settings.env_file if spec.env_file is None else spec.env_file


def with_setup(cmd: str, setup: str | None) -> str:
    """The shell text a job runs: ``cmd`` alone, or ``setup`` then a check of its status then
    ``cmd``, in one bash. The check names the setup's first line in the log."""
    if setup is None:
        return cmd
    first = setup.strip().splitlines()[0]
    shown = first if len(first) <= 120 else first[:119] + "…"
    say = f"printf '{SETUP_FAILED} (exit %s): %s\\n' \"$gtui_setup_status\" {shlex.quote(shown)}"
    return (
        f"{setup}\n"
        "gtui_setup_status=$?\n"
        f'if [ "$gtui_setup_status" -ne 0 ]; then {say} >&2; exit "$gtui_setup_status"; fi\n'
        "unset gtui_setup_status\n"
        f"{cmd}"
    )


def file_env(spec: JobSpec, settings: Settings, queue_path: Path) -> dict[str, str]:
    """The variables of the job's env_file, read now (each attempt reads it again, so an edit
    applies to the next one); a path is taken from the queue file's folder. EnvFileError
    (a GtuiError: the launch fails with its message) for a missing or unreadable file."""
    name = env_file_of(spec, settings)
    if name is None:
        return {}
    return read_env_file(queue_path.parent / os.path.expanduser(name))
