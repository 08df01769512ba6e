"""Job names: the name a job without ``name`` gets from its command, and what a name may hold.

A job's name, when absent, is derived from its command: up to three meaningful words of the
command (interpreters such as ``python``/``bash``, ``VAR=value`` assignments, options and
placeholders skipped; a path gives its file name without extension), slugged, then ``-`` and the
first 6 hex digits of the SHA-1 of the command as written. ``python train.py --lr 0.1`` ->
``train-0.1-3c9a1e``. It only changes when the command changes, so run state survives reloads.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from collections.abc import Collection, Mapping, Sequence

_NAME_BAD = re.compile(r"[\s/\\,{}\"'$*?\[\]<>|;&()`\x00-\x1f\x7f]")


_SLUG_SKIP = frozenset(
    {
        "python",
        "python2",
        "python3",
        "bash",
        "sh",
        "zsh",
        "env",
        "nohup",
        "time",
        "exec",
        "srun",
        "uv",
        "run",
        "poetry",
        "conda",
        "torchrun",
        "accelerate",
        "launch",
        "deepspeed",
        "sudo",
        "nice",
        "ionice",
        "stdbuf",
        "timeout",
        "cd",
        "source",
        ".",
    }
)
_SHELL_OPS = frozenset({"&&", "||", "|", ";", "&", ">", ">>", "<", "2>", "2>&1", "&>"})


# Characters that make shlex's split differ from a split at its whitespace: quotes, an escape,
# a comment. A command without them (nearly all) is split by the regular expression, the same
# words at a twentieth of the cost (``gtui add --from`` names 10,000 commands in one call).
_SHLEX_SPECIAL = re.compile(r"[\"'\\#]")
_SHLEX_SPACE = re.compile(r"[ \t\r\n]+")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
_SCRIPT_SUFFIX = re.compile(r"\.(py|sh|bash|pl|rb|js|jl|R|lua)$")
_NOT_SLUG = re.compile(r"[^\w.+=-]+", re.UNICODE)


def command_words(cmd: str) -> list[str]:
    """The words of a command as ``shlex.split(cmd, comments=True)`` gives them (its whitespace
    split where an unbalanced quote stops shlex)."""
    if _SHLEX_SPECIAL.search(cmd) is None:
        return [t for t in _SHLEX_SPACE.split(cmd) if t]
    try:
        return shlex.split(cmd, comments=True)
    except ValueError:
        return cmd.split()


def cmd_slug(cmd: str, words: int = 3, width: int = 32) -> str:
    """Up to ``words`` meaningful words of a command, slugged (see the module docstring)."""
    picked: list[str] = []
    for tok in command_words(cmd):
        if len(picked) >= words:
            break
        if tok in _SHELL_OPS or tok.lower() in _SLUG_SKIP or tok.startswith("-"):
            continue
        if _ASSIGNMENT.fullmatch(tok) or "{" in tok or "$" in tok:
            continue
        if "/" in tok:
            tok = tok.rstrip("/").rsplit("/", 1)[-1]
        tok = _SCRIPT_SUFFIX.sub("", tok)
        slug = _NOT_SLUG.sub("-", tok).strip("-.")
        if slug:
            picked.append(slug)
    return "-".join(picked)[:width].strip("-.")


def derive_name(cmd: str) -> str:
    """The stable name of a job whose ``name`` is absent: slug of its command + short hash."""
    digest = hashlib.sha1(cmd.encode("utf-8", "surrogatepass")).hexdigest()[:6]
    slug = cmd_slug(cmd)
    return f"{slug}-{digest}" if slug else f"job-{digest}"


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a job name (it is a log file name and a CLI word), or None."""
    if not name:
        return "a job name cannot be empty"
    if len(name) > 128:
        return "a job name must be at most 128 characters"
    bad = _NAME_BAD.search(name)
    if bad:
        shown = repr(bad.group(0)) if bad.group(0).strip() else "a space"
        return f"a job name cannot contain {shown}: use letters, digits and - _ . = + : @"
    if name[0] in "-.":
        return "a job name cannot start with '-' or '.'"
    return None


def name_safe(value: str) -> str:
    """``value`` with every character a job name cannot hold made ``_`` (a matrix value in a
    name)."""
    return _NAME_BAD.sub("_", value) or "_"


def named_apart(
    many: Sequence[Mapping[str, object]], taken: Collection[str]
) -> list[dict[str, object]]:
    """Jobs added together (``gtui add --from``), each without a ``name`` given the name its
    command derives, made distinct with ``-2``, ``-3``, ... where the queue (``taken``) or an
    earlier one of them has it: the same command given twice is two jobs. A name given is
    kept as it is (a clash is then the user's to fix, and refused)."""
    out: list[dict[str, object]] = []
    used: set[str] = set()
    for fields in many:
        job = dict(fields)
        cmd = job.get("cmd")
        if "name" not in job and "matrix" not in job and isinstance(cmd, str):
            base = derive_name(cmd)
            name, n = base, 1
            while name in taken or name in used:
                n += 1
                name = f"{base}-{n}"
            job["name"] = name
        if isinstance(job.get("name"), str):
            used.add(job["name"])  # type: ignore[arg-type]
        out.append(job)
    return out
