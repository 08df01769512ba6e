"""What an imported script did before its commands, kept as the queue's ``setup``.

A queue script (or a command list) often activates an environment first: ``source
.venv/bin/activate``, ``conda activate vit``, ``export HF_HOME=...``, ``module load cuda``.
Its commands ran in that shell; gtui's jobs do not, so ``gtui import`` keeps those lines as
``setup``, which runs before every job's command in the job's own shell. Only lines of these
kinds are kept (anything else the script did, loops, functions, checks, is not a job's
environment); the script's own settings (``TARGET_GPUS=...``) never are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A line that sets up the shell's environment: what `setup` can do for every job.
_SETUP_LINE = re.compile(
    r"(?:source|\.)\s+\S.*"
    r"|(?:conda|mamba|micromamba)\s+activate\b.*"
    r"|eval\s+\"?\$\((?:conda|mamba|micromamba|pyenv)\b.*"
    r"|pyenv\s+(?:activate|shell)\b.*"
    r"|module\s+(?:load|purge|use)\b.*"
    r"|(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*=\S.*"
)


def is_setup_line(line: str, skip_vars: Iterable[str] = ()) -> bool:
    """Whether ``line`` (stripped) sets the shell's environment up; assignments to
    ``skip_vars`` (the script's own settings) and a bare ``COMMANDS=`` are not."""
    if not _SETUP_LINE.fullmatch(line):
        return False
    m = re.match(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=", line)
    return not (m and (m.group(1) in set(skip_vars) or m.group(1) == "COMMANDS"))


def setup_before(text: str, skip_vars: Iterable[str] = ()) -> list[str]:
    """The setup lines of ``text``, a script's part before its commands, in order
    (comments and other lines left out)."""
    skip = tuple(skip_vars)
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith("#") and is_setup_line(line, skip):
            out.append(line)
    return out


def setup_value(lines: list[str]) -> str | None:
    """The ``setup`` the kept lines make: one shell line, each step after the last succeeded
    (None: nothing to keep)."""
    return " && ".join(lines) if lines else None
