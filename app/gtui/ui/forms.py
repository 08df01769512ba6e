"""The add / edit form's text fields to queue-file keys, and a job spec back to text.

Only the shape is checked here (a number where a number goes, KEY=VALUE pairs); the meaning
(sizes, durations, names, cycles, GPUs in the pool) is checked by the engine exactly as the queue
file is, and its message is shown in the form.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gtui.core.model import JobSpec

# (key, label, placeholder) in form order
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("name", "name", "derived from the command if empty"),
    # It must pass `gtui validate` with no warning (a test checks): no {gpu}, which with
    # isolation on would hand the job physical numbers it cannot see; it sees cuda:0.
    ("cmd", "cmd", "python train.py --lr 0.1   (it sees its GPU as cuda:0)"),
    ("gpus", "gpus", "1   (0 = CPU job)"),
    ("mem", "mem", "20G per GPU   (empty = the GPUs to itself)"),
    ("priority", "priority", "0   (higher starts first)"),
    ("after", "after", "names of jobs that must succeed first, comma-separated"),
    ("retries", "retries", "0   (-1 = until it succeeds)"),
    ("timeout", "timeout", "4h, 90m   (empty = none)"),
    ("cwd", "cwd", ".   (relative to the queue file)"),
    ("env", "env", "SEED=1 WANDB_MODE=disabled"),
)
INT_FIELDS = {
    "gpus": "a whole number such as 1 (0 = CPU job)",
    "priority": "a whole number such as 0 or 10",
    "retries": "a whole number (0 none, N at most N, -1 until it succeeds)",
}


@dataclass
class FormError(Exception):
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


def parse_env(text: str) -> dict[str, str]:
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise FormError("env", f"{e}; write KEY=VALUE pairs, quoting values with spaces") from e
    env: dict[str, str] = {}
    for w in words:
        key, eq, value = w.partition("=")
        if not eq or not key or not (key[0].isalpha() or key[0] == "_"):
            raise FormError("env", f"{w!r} is not KEY=VALUE; e.g. SEED=1 WANDB_MODE=disabled")
        env[key] = value
    return env


def fields_from_form(values: dict[str, str]) -> dict[str, object]:
    """Text fields -> the keys of a ``[[jobs]]`` table; empty fields are left out."""
    out: dict[str, object] = {}
    for key, _, _ in FIELDS:
        text = values.get(key, "").strip()
        if not text:
            if key == "cmd":
                raise FormError("cmd", "the command is required, e.g. python train.py")
            continue
        if key in INT_FIELDS:
            try:
                out[key] = int(text)
            except ValueError:
                raise FormError(key, f"expected {INT_FIELDS[key]}, got {text!r}") from None
        elif key == "after":
            out[key] = [a for a in text.replace(",", " ").split() if a]
        elif key == "env":
            out[key] = parse_env(text)
        else:
            out[key] = text
    return out


def _duration_text(seconds: float) -> str:
    s = int(seconds)
    if s != seconds:
        return f"{seconds:g}s"
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (sec, "s")) if v) or "0s"


def _mem_text(mib: int) -> str:
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


def _mem_field(spec: JobSpec) -> str:
    """``auto`` stays ``auto``, a size its text, none empty (whole GPUs)."""
    if spec.mem_auto:
        return "auto"
    return _mem_text(spec.mem_mib) if spec.mem_mib is not None else ""


def form_from_spec(spec: JobSpec) -> dict[str, str]:
    """A job's spec as the form's text, for ``e`` (edit)."""
    return {
        "name": spec.name,
        "cmd": spec.cmd,
        "gpus": str(spec.gpus),
        "mem": _mem_field(spec),
        "priority": str(spec.priority),
        "after": ", ".join(spec.after),
        "retries": str(spec.retries),
        "timeout": _duration_text(spec.timeout_s) if spec.timeout_s else "",
        "cwd": spec.cwd,
        "env": " ".join(f"{k}={shlex.quote(v)}" for k, v in spec.env.items()),
    }


def changed_fields(before: dict[str, str], after: dict[str, str]) -> dict[str, object]:
    """For edit: only the keys the person changed. A cleared field is sent as None (unset)."""
    parsed = fields_from_form(after)
    out: dict[str, object] = {}
    for key, _, _ in FIELDS:
        if before.get(key, "").strip() == after.get(key, "").strip():
            continue
        out[key] = parsed.get(key)
    return out
