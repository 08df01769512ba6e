"""Read and check a queue file (DESIGN.md 3): ``[settings]``, ``[[jobs]]``, ``[[diagnose]]``.

Every mistake is a :class:`QueueFileError` naming ``file:line``, the key, and how to fix it. Line
numbers come from :mod:`gtui.core.queue.tomlscan`, since ``tomllib`` keeps none; a plain file
(nearly every queue file) is read, lines included, by the faster
:mod:`gtui.core.queue.plaintoml`, which gives exactly what ``tomllib`` and the
scanner give, or leaves the file to them.

Choices where DESIGN.md is silent (also in the README):

- A job's name, when absent, is derived from its command: up to three meaningful words of the
  command (interpreters such as ``python``/``bash``, ``VAR=value`` assignments, options and
  placeholders skipped; a path gives its file name without extension), slugged, then ``-`` and the
  first 6 hex digits of the SHA-1 of the command as written. ``python train.py --lr 0.1`` ->
  ``train-0.1-3c9a1e``. It only changes when the command changes, so run state survives reloads.
- ``matrix`` expands to one job per combination, the first key varying slowest and values in the
  order written. ``{key}`` is replaced in ``name``, ``cmd``, ``after``, ``cwd`` and ``env`` values.
  Keys the name does not use are appended as ``-key=value`` (in key order) so names stay unique;
  characters a name cannot hold (``/``, spaces...) become ``_``. ``after`` may name a matrix entry
  by its ``name`` as written (e.g. ``"sweep-lr{lr}"``, or ``"sweep"``): it means all its jobs.
- ``after`` may also be a single string; ``settings.gpus`` may also be a string of indices
  (``"0 1 2"``, as in the seed's TARGET_GPUS).
- A CPU job (``gpus = 0``) cannot declare ``mem``.
- Without a machine to check against, only the pool the file itself fixes (a list in
  ``settings.gpus``) is checked; with one, also that listed GPUs exist, that ``gpus`` fits the pool
  and the reserve, and that ``mem`` fits on enough GPUs.

Size: every key of DESIGN.md 3 with its check and its message, in one place so that the
messages stay consistent.
"""

from __future__ import annotations

import difflib
import gc
import hashlib
import itertools
import os
import re
import shlex
import signal
import stat
import tomllib
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gtui.core.errors import QueueFileError
from gtui.core.model import (
    NO_STRINGS,
    NOTIFY_EVENTS,
    DiagnosisRule,
    JobSpec,
    Mode,
    Notify,
    Placement,
    Settings,
    cmd_too_long,
)
from gtui.core.queue.placeholders import (
    gpu_indices_in,
    is_reserved,
    placeholders_used,
    substitute_matrix,
)
from gtui.core.queue.plaintoml import parse_plain
from gtui.core.queue.tomlscan import Entry, Scan, scan
from gtui.core.sched.policy import reserve_allows
from gtui.core.units import UnitError, format_mib, parse_duration_s, parse_size_mib

SETTINGS_KEYS = (
    "gpus",
    "exclude",
    "reserve",
    "reserve_rule",
    "mode",
    "placement",
    "max_parallel",
    "retries",
    "oom_grow",
    "poll",
    "kill_grace",
    "log_dir",
    "isolate",
    "on_failure",
    "env",
    "starve_after",
    "multi_gpu_first",
    "fake_gpus",
    "diagnose",
    "neighbours",
)
JOB_KEYS = (
    "name",
    "cmd",
    "gpus",
    "mem",
    "priority",
    "after",
    "retries",
    "timeout",
    "cwd",
    "env",
    "matrix",
    "isolate",
)
RULE_KEYS = ("kind", "pattern", "hint", "exit_codes", "signals")
_JOB_KEYSET = frozenset(JOB_KEYS)
TOP_KEYS = ("settings", "jobs", "diagnose", "notify", "cluster")
NOTIFY_KEYS = ("command", "apprise", "on", "timeout", "bell", "desktop")
CLUSTER_KEYS = ("backend", "address", "gpus", "exclude", "reserve")
MAX_JOBS_PER_ENTRY = 100_000

_NAME_BAD = re.compile(r"[\s/\\,{}\"'$*?\[\]<>|;&()`\x00-\x1f\x7f]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MATRIX_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SYNTAX_POS = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)\s*$")
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


@dataclass(frozen=True)
class QueueFile:
    """A checked queue file: its settings and its jobs, expanded, in queue (file) order."""

    path: Path
    settings: Settings
    jobs: tuple[JobSpec, ...]
    warnings: tuple[str, ...] = ()  # things that are allowed but probably not meant


# ---------------------------------------------------------------------------------------------
# where: file, line, key


class _Where:
    """A table of the file: which lines its keys are on, and how to name it in messages.

    ``keys`` may be a scanned :class:`Entry`, whose key lines are then looked up only when a
    message asks (a load makes one of these per job; its keys are rarely read)."""

    __slots__ = ("_keys", "line", "path", "section")

    def __init__(
        self, path: str, line: int | None, keys: Mapping[str, int] | Entry, section: str
    ) -> None:
        self.path = path
        self.line = line
        self._keys = keys
        self.section = section

    @property
    def keys(self) -> Mapping[str, int]:
        keys = self._keys
        return keys.keys if isinstance(keys, Entry) else keys

    def line_of(self, key: str | None) -> int | None:
        if key is not None:
            top = key.split(".", 1)[0]
            if top in self.keys:
                return self.keys[top]
        return self.line

    def error(self, message: str, key: str | None = None) -> QueueFileError:
        shown = None if key is None else printable(key)
        return QueueFileError(self.path, printable(message), self.line_of(key), shown)


def printable(text: str) -> str:
    """``text`` with control characters escaped (``\\x1b``, ``\\r``, ``\\n``...): a key or
    value quoted from the file must not move the cursor or restyle the user's terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return f"true/false ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value})"
    if isinstance(value, str):
        shown = value if len(value) <= 30 else value[:27] + "..."
        return f"a string ({shown!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def _unknown(
    w: _Where, key: str, known: Sequence[str], elsewhere: Mapping[str, Sequence[str]]
) -> QueueFileError:
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    if close:
        return w.error(f"unknown key; did you mean `{close[0]}`?", key)
    for place, keys in elsewhere.items():
        if key in keys:
            return w.error(f"unknown key in {w.section}; `{key}` belongs in {place}", key)
    return w.error(f"unknown key in {w.section}; known keys: {', '.join(known)}", key)


def _check_keys(
    w: _Where,
    table: Mapping[str, Any],
    known: Sequence[str],
    elsewhere: Mapping[str, Sequence[str]] | None = None,
) -> None:
    for key in table:
        if key not in known:
            raise _unknown(w, key, known, elsewhere or {})


# ---------------------------------------------------------------------------------------------
# typed values


def _int(w: _Where, key: str, value: Any, minimum: int | None = None, hint: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise w.error(f"expected an integer, got {_kind(value)}", key)
    if minimum is not None and value < minimum:
        raise w.error(f"must be {minimum} or more, got {value}{hint}", key)
    return value


def _float(w: _Where, key: str, value: Any, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise w.error(f"expected a number, got {_kind(value)}", key)
    if minimum is not None and value < minimum:
        raise w.error(f"must be {minimum} or more, got {value}", key)
    return float(value)


def _bool(w: _Where, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise w.error(f"expected true or false, got {_kind(value)}", key)
    return value


_NUL = (
    "contains a NUL character (\\u0000), which no command, path or environment variable can "
    "hold; remove it"
)


def _str(w: _Where, key: str, value: Any, *, empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise w.error(f"expected a string, got {_kind(value)}", key)
    if not empty_ok and not value.strip():
        raise w.error("must not be empty", key)
    if "\0" in value:
        raise w.error(_NUL, key)
    return value


def _choice(w: _Where, key: str, value: Any, choices: Sequence[str], extra: str = "") -> str:
    text = _str(w, key, value)
    if text not in choices:
        options = " | ".join(f'"{c}"' for c in choices)
        close = difflib.get_close_matches(text, choices, n=1, cutoff=0.5)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        raise w.error(f"unknown value {text!r}: expected {options}{hint}{extra}", key)
    return text


_sizes: dict[str, int] = {}  # "35G" -> MiB: a queue's jobs share a few sizes


def _size(w: _Where, key: str, value: Any) -> int:
    if type(value) is str:
        mib = _sizes.get(value)
        if mib is not None:
            return mib
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise w.error(f'expected a size such as "35G" or "500M", got {_kind(value)}', key)
    try:
        mib = parse_size_mib(value)
    except UnitError as e:
        raise w.error(str(e), key) from None
    if type(value) is str and len(_sizes) < 4096:
        _sizes[value] = mib
    return mib


def _duration(w: _Where, key: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise w.error(f'expected a duration such as "90s" or "4h", got {_kind(value)}', key)
    try:
        seconds = parse_duration_s(value)
    except UnitError as e:
        raise w.error(str(e), key) from None
    if positive and seconds <= 0:
        raise w.error(f"must be more than 0, got {value!r}", key)
    return seconds


def scalar_text(value: Any) -> str | None:
    """A TOML scalar as text for a command line or an environment; None if not a scalar."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        return re.sub(r"e([+-])0*(\d)", lambda m: "e" + m.group(1).strip("+") + m.group(2), text)
    if isinstance(value, str):
        return value
    return None


_env_names: set[str] = set()  # names found valid: a queue's jobs share a few


def _env(w: _Where, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise w.error(f'expected a table such as {{ SEED = "1" }}, got {_kind(value)}', key)
    out: dict[str, str] = {}
    for name, v in value.items():
        if name not in _env_names:
            if not _ENV_NAME.fullmatch(name):
                raise w.error(f"{name!r} is not a valid environment variable name", key)
            if len(_env_names) < 4096:
                _env_names.add(name)
        text = v if type(v) is str else scalar_text(v)
        if text is None:
            raise w.error(f"{name}: expected a string or a number, got {_kind(v)}", key)
        if "\0" in text:
            raise w.error(f"{name}: {_NUL}", key)
        if name == "GTUI_FAKE_USE" and "{" not in text:  # fake.FAKE_USE_ENV; a matrix value
            try:  # is read (or, unreadable, ignored) when the job runs
                parse_size_mib(text.strip())
            except UnitError as e:
                raise w.error(f"{name} (what the job uses on simulated GPUs): {e}", key) from None
        out[name] = text
    return out


def _fake_spec(w: _Where, key: str, value: Any) -> str:
    """A simulated-GPU spec, checked here so a mistake names this file and line (an ``@FILE``
    spec is read, and checked, at every poll)."""
    spec = _str(w, key, value)
    if not spec.strip().startswith("@"):
        from gtui.core.errors import GtuiError
        from gtui.core.gpus.fake import parse_fake_spec

        try:
            parse_fake_spec(spec, source=key)
        except GtuiError as e:
            why = str(e).split("\n", 1)[0].removeprefix(f"{key} {spec!r}: ")
            raise w.error(
                f"{spec!r}: {why}; expected entries such as 4x80G or 80G:16G@35,24G", key
            ) from None
    return spec


def _int_list(w: _Where, key: str, value: Any) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        raise w.error(f"expected a list of GPU indices such as [0, 1], got {_kind(value)}", key)
    out: list[int] = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int):
            raise w.error(f"expected GPU indices (integers), got {_kind(v)}", key)
        if v < 0:
            raise w.error(f"a GPU index cannot be negative: {v}", key)
        if v in out:
            raise w.error(f"GPU {v} is listed twice", key)
        out.append(v)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# settings


def _names_and_numbers(
    w: _Where, key: str, value: Any
) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
    """A ``[settings] gpus`` / ``exclude`` list that names a cluster's nodes (issue 23):
    ``["node1", "node2:3", 0]`` -> its numbers and its names (node, node:GPU); None for a
    value with no name in it (numbers alone keep their own checks and messages)."""
    if not isinstance(value, list) or not any(isinstance(v, str) for v in value):
        return None
    numbers: list[int] = []
    names: list[str] = []
    for v in value:
        if isinstance(v, str) and v.strip().isdigit():
            v = int(v)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            if v in numbers:
                raise w.error(f"GPU {v} is listed twice", key)
            numbers.append(v)
        elif isinstance(v, str) and _NODE_GPU.fullmatch(v):
            if v in names:
                raise w.error(f"{v} is listed twice", key)
            names.append(v)
        else:
            shown = f'"{v}"' if isinstance(v, str) else repr(v)
            raise w.error(
                f"{shown} is neither a GPU number nor a node name: write a GPU's index (3), "
                'a node ("node2", its host name) or one GPU of a node ("node2:3")',
                key,
            )
    return tuple(numbers), tuple(names)


def _node_reserve(w: _Where, value: Any) -> tuple[tuple[str, int], ...]:
    """``reserve = { node1 = 1 }``: GPUs kept free of our jobs on each node named."""
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in value.items()
    ):
        raise w.error(
            f"expected GPUs kept free per node, like {{ node1 = 1 }}, got {_kind(value)}",
            "reserve",
        )
    return tuple(sorted(value.items()))


def _merged(first: tuple[Any, ...], more: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys((*first, *more)))


def _gpus_setting(w: _Where, value: Any) -> str | tuple[int, ...]:
    if isinstance(value, str):
        text = value.strip()
        if text == "all":
            return "all"
        words = text.replace(",", " ").split()
        if words and all(word.isdigit() for word in words):
            return _int_list(w, "gpus", [int(word) for word in words])
        raise w.error(
            f'expected "all" or a list of GPU indices such as [0, 1], got {value!r}', "gpus"
        )
    return _int_list(w, "gpus", value)


def _signal_number(w: _Where, value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise w.error(f"a signal number must be positive, got {value}", "signals")
        return value
    if isinstance(value, str):
        name = value.strip().upper()
        name = name if name.startswith("SIG") else "SIG" + name
        try:
            return int(signal.Signals[name])
        except KeyError:
            raise w.error(f'unknown signal {value!r} (e.g. 9 or "SIGKILL")', "signals") from None
    raise w.error(f"expected a signal number or name, got {_kind(value)}", "signals")


def _rule(w: _Where, table: Any) -> DiagnosisRule:
    if not isinstance(table, dict):
        raise w.error(f"expected a table (kind, pattern, hint...), got {_kind(table)}")
    _check_keys(w, table, RULE_KEYS)
    if "kind" not in table:
        raise w.error('a diagnosis rule needs a `kind`, e.g. kind = "dataset missing"', "kind")
    kind = _str(w, "kind", table["kind"])
    hint = _str(w, "hint", table.get("hint", ""), empty_ok=True)
    pattern: str | None = None
    if "pattern" in table:
        pattern = _str(w, "pattern", table["pattern"])
        try:
            re.compile(pattern, re.IGNORECASE)
        except re.error as e:
            raise w.error(f"not a valid regular expression: {e}", "pattern") from None
    codes_raw = table.get("exit_codes", [])
    codes_list = codes_raw if isinstance(codes_raw, list) else [codes_raw]
    codes = tuple(_int(w, "exit_codes", c) for c in codes_list)
    sigs_raw = table.get("signals", [])
    sigs = tuple(
        _signal_number(w, s) for s in (sigs_raw if isinstance(sigs_raw, list) else [sigs_raw])
    )
    if pattern is None and not codes and not sigs:
        raise w.error("a diagnosis rule needs a `pattern`, `exit_codes` or `signals` to match")
    return DiagnosisRule(kind=kind, hint=hint, pattern=pattern, exit_codes=codes, signals=sigs)


def _rules(
    path: str, value: Any, wheres: Sequence[_Where], fallback: _Where
) -> list[DiagnosisRule]:
    if not isinstance(value, list):
        raise fallback.error(
            f"expected [[diagnose]] tables (kind, pattern, hint), got {_kind(value)}", "diagnose"
        )
    out = []
    for i, table in enumerate(value):
        w = wheres[i] if i < len(wheres) else fallback
        out.append(_rule(w, table))
    return out


def parse_settings(
    data: Mapping[str, Any],
    path: str | Path = "<settings>",
    *,
    line: int | None = None,
    lines: Mapping[str, int] | None = None,
    rule_lines: Sequence[tuple[int, Mapping[str, int]]] = (),
) -> Settings:
    """Check a ``[settings]`` table (as ``tomllib`` returns it) and build :class:`Settings`.

    ``lines`` maps each key to its line and ``rule_lines`` gives each ``[[settings.diagnose]]``
    table's line and its keys' lines, for messages; both are optional (``line`` is used for any
    key not in them).
    """
    w = _Where(str(path), line, lines or {}, "[settings]")
    if not isinstance(data, Mapping):
        raise w.error(f"expected a table, got {_kind(data)}", "settings")
    _check_keys(w, data, SETTINGS_KEYS, {"a [[jobs]] table": JOB_KEYS})
    kw: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("gpus", "exclude") and (split := _names_and_numbers(w, key, value)):
            # node names (issue 23) go where [cluster]'s go; numbers stay numbers ("all" if
            # there are none: `gpus = ["node1"]` is every GPU of node1)
            numbers, names = split
            if numbers or key == "exclude":
                kw[key] = numbers
            kw[f"cluster_{key}"] = names
        elif key == "gpus":
            kw["gpus"] = _gpus_setting(w, value)
        elif key == "exclude":
            kw["exclude"] = _int_list(w, key, value)
        elif key == "reserve" and isinstance(value, Mapping):
            kw["cluster_reserve"] = _node_reserve(w, value)
        elif key == "reserve":
            kw["reserve"] = _int(w, key, value, 0)
        elif key == "reserve_rule":
            kw["reserve_rule"] = _choice(w, key, value, ["strict", "seed"])
        elif key == "mode":
            extra = " (the seed's EXTREME_MODE is `pack`)" if value == "extreme" else ""
            kw["mode"] = Mode(_choice(w, key, value, [m.value for m in Mode], extra))
        elif key == "placement":
            # "auto" (the default: best fit in pack mode, most available otherwise) may be
            # written too, so `gtui validate --json`'s settings can be pasted back.
            choices = [p.value for p in Placement]
            kw["placement"] = Placement(_choice(w, key, value, choices))
        elif key == "max_parallel":
            kw["max_parallel"] = _int(w, key, value, 0, " (0 = no limit)")
        elif key == "retries":
            kw["retries"] = _int(w, key, value, -1, " (-1 = until it succeeds)")
        elif key == "oom_grow":
            kw["oom_grow"] = _float(w, key, value, 1.0)
        elif key == "poll":
            kw["poll_s"] = _duration(w, key, value, positive=True)
        elif key == "kill_grace":
            kw["kill_grace_s"] = _duration(w, key, value)
        elif key == "starve_after":
            kw["starve_after_s"] = _duration(w, key, value)
        elif key == "log_dir":
            kw["log_dir"] = _str(w, key, value)
        elif key in ("isolate", "multi_gpu_first", "neighbours"):
            kw[key] = _bool(w, key, value)
        elif key == "on_failure":
            kw["on_failure"] = _choice(w, key, value, ["continue", "pause"])
        elif key == "env":
            kw["env"] = _env(w, key, value)
        elif key == "fake_gpus":
            kw["fake_gpus"] = _fake_spec(w, key, value)
        elif key == "diagnose":
            wheres = [_Where(str(path), ln, ks, "[[settings.diagnose]]") for ln, ks in rule_lines]
            kw["diagnose"] = tuple(_rules(str(path), value, wheres, w))
    return Settings(**kw)


def parse_notify(data: Any, w: _Where) -> Notify:
    """Check a ``[notify]`` table (issue 19.4): every key, with the fix in its message."""
    if not isinstance(data, Mapping):
        raise w.error(f"expected a table ([notify]), got {_kind(data)}", "notify")
    _check_keys(w, data, NOTIFY_KEYS, {"[settings]": SETTINGS_KEYS})
    kw: dict[str, Any] = {}
    for key, value in data.items():
        if key == "command":
            kw["command"] = _str(w, key, value)
        elif key in ("apprise", "on"):
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
                raise w.error(f"expected a list of strings, got {_kind(value)}", key)
            if key == "on":
                for x in items:
                    _choice(w, key, x, NOTIFY_EVENTS)
            elif any("://" not in x for x in items):
                bad = next(x for x in items if "://" not in x)
                raise w.error(
                    f"{printable(bad)!r} is not an Apprise URL (e.g. ntfy://topic, "
                    "mailto://user:pass@example.com, json://host/path)",
                    key,
                )
            kw[key] = tuple(dict.fromkeys(items))
        elif key == "timeout":
            kw["timeout_s"] = _duration(w, key, value, positive=True)
        else:  # bell, desktop
            kw[key] = _bool(w, key, value)
    return Notify(**kw)


# ---------------------------------------------------------------------------------------------
# names


def cmd_slug(cmd: str, words: int = 3, width: int = 32) -> str:
    """Up to ``words`` meaningful words of a command, slugged (see the module docstring)."""
    try:
        tokens = shlex.split(cmd, comments=True)
    except ValueError:
        tokens = cmd.split()
    picked: list[str] = []
    for tok in tokens:
        if len(picked) >= words:
            break
        if tok in _SHELL_OPS or tok.lower() in _SLUG_SKIP or tok.startswith("-"):
            continue
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", tok, re.DOTALL) or "{" in tok or "$" in tok:
            continue
        if "/" in tok:
            tok = tok.rstrip("/").rsplit("/", 1)[-1]
        tok = re.sub(r"\.(py|sh|bash|pl|rb|js|jl|R|lua)$", "", tok)
        slug = re.sub(r"[^\w.+=-]+", "-", tok, flags=re.UNICODE).strip("-.")
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


def _name_safe(value: str) -> str:
    return _NAME_BAD.sub("_", value) or "_"


# ---------------------------------------------------------------------------------------------
# jobs


class _Expanded:
    """One [[jobs]] entry, checked and expanded; ``after`` not yet resolved to names.

    (A plain class with slots: a load makes one per entry, and a frozen dataclass's
    construction cost a microsecond of each job's.)"""

    __slots__ = ("jobs", "notes", "template", "used", "where")

    def __init__(
        self,
        jobs: list[JobSpec],
        template: str | None,  # the matrix entry's name as written (for ``after``), if any
        where: _Where,
        used: set[str] | None = None,  # placeholders_used of the only job's cmd (no matrix)
        notes: list[str] | None = None,  # the entry's own warnings (said once, not per job)
    ) -> None:
        self.jobs = jobs
        self.template = template
        self.where = where
        self.used = used
        self.notes = notes or []


def _matrix(w: _Where, value: Any) -> list[dict[str, str]]:
    if not isinstance(value, dict):
        raise w.error(
            f"expected a table such as {{ lr = [0.1, 0.01] }}, got {_kind(value)}", "matrix"
        )
    if not value:
        raise w.error("an empty matrix expands to no job; remove it or give it keys", "matrix")
    keys: list[str] = []
    columns: list[list[str]] = []
    for key, values in value.items():
        if not _MATRIX_KEY.fullmatch(key):
            raise w.error(f"{key!r} cannot be a matrix key: use letters, digits and _", "matrix")
        if is_reserved(key):
            raise w.error(f"`{key}` is a placeholder gtui fills itself; rename the key", "matrix")
        if not isinstance(values, list) or not values:
            raise w.error(
                f"{key}: expected a non-empty list of values, e.g. {key} = [1, 2]", "matrix"
            )
        col = []
        for v in values:
            text = scalar_text(v)
            if text is None:
                raise w.error(f"{key}: values must be strings or numbers, got {_kind(v)}", "matrix")
            if "\0" in text:
                raise w.error(f"{key}: {_NUL}", "matrix")
            col.append(text)
        keys.append(key)
        columns.append(col)
    total = 1
    for col in columns:
        total *= len(col)
    if total > MAX_JOBS_PER_ENTRY:
        raise w.error(f"expands to {total} jobs, more than {MAX_JOBS_PER_ENTRY}", "matrix")
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*columns)]


_NO_MATRIX: list[dict[str, str]] = [{}]  # (never changed)


def _expand_entry(
    fields: Mapping[str, Any], settings: Settings, w: _Where, entry: int
) -> _Expanded:
    if type(fields) is not dict and not isinstance(fields, Mapping):
        raise w.error(f"expected a table with at least `cmd`, got {_kind(fields)}")
    if not _JOB_KEYSET.issuperset(fields):
        _check_keys(w, fields, JOB_KEYS, {"[settings]": SETTINGS_KEYS})
    if "cmd" not in fields:
        raise w.error('a job needs a `cmd`, e.g. cmd = "python train.py --gpu {gpu}"', "cmd")
    cmd = _str(w, "cmd", fields["cmd"])
    too_long = cmd_too_long(cmd)
    if too_long:
        raise w.error(too_long, "cmd")
    raw_name = _str(w, "name", fields["name"]) if "name" in fields else None
    gpus = _int(w, "gpus", fields.get("gpus", 1), 0)
    mem_mib: int | None = None
    mem_auto = fields.get("mem") == "auto"  # from the runs' peaks (issue 19.2)
    if mem_auto and gpus == 0:
        raise w.error('a CPU job (gpus = 0) takes no GPU memory; remove mem = "auto"', "mem")
    if "mem" in fields and not mem_auto:
        mem_mib = _size(w, "mem", fields["mem"])
        if gpus == 0 and mem_mib:
            raise w.error(
                "a CPU job (gpus = 0) takes no GPU memory; remove `mem` or set gpus", "mem"
            )
        if gpus == 0:
            mem_mib = None
    # (a key left out takes its default without a check: most jobs leave most out)
    priority = _int(w, "priority", fields["priority"]) if "priority" in fields else 0
    after_t: tuple[str, ...] = ()
    if "after" in fields:
        after_raw = fields["after"]
        if isinstance(after_raw, str):
            after_raw = [after_raw]
        if not isinstance(after_raw, list):
            raise w.error(
                f'expected a list of job names such as ["prep"], got {_kind(after_raw)}', "after"
            )
        after_t = tuple(_str(w, "after", a) for a in after_raw) if after_raw else ()
    retries = settings.retries
    if "retries" in fields:
        retries = _int(w, "retries", fields["retries"], -1, " (-1 = until it succeeds)")
    timeout_s = (
        _duration(w, "timeout", fields["timeout"], positive=True) if "timeout" in fields else None
    )
    cwd = _str(w, "cwd", fields["cwd"]) if "cwd" in fields else "."
    env = _env(w, "env", fields["env"]) if "env" in fields else {}
    isolate = _bool(w, "isolate", fields["isolate"]) if "isolate" in fields else None

    used = placeholders_used(cmd)
    if used:
        top = max(gpu_indices_in(used), default=-1)
        if top >= gpus:
            have = f"{{gpu0}}..{{gpu{gpus - 1}}}" if gpus > 1 else ("{gpu0}" if gpus else "none")
            raise w.error(
                f"uses {{gpu{top}}} but the job has gpus = {gpus} (placeholders: {have})", "cmd"
            )

    combos = _matrix(w, fields["matrix"]) if "matrix" in fields else _NO_MATRIX
    if raw_name is not None and "{" in raw_name:
        stray = sorted(placeholders_used(raw_name) - set(combos[0]))
        if stray:
            keys = ", ".join(combos[0]) or "none"
            raise w.error(
                f"uses {{{stray[0]}}}, which is not a matrix key of this job (its keys: {keys})",
                "name",
            )
    base = raw_name if raw_name is not None else derive_name(cmd)
    jobs: list[JobSpec] = []
    if combos is _NO_MATRIX:  # nothing to substitute
        problem = name_problem(base)
        if problem:
            raise w.error(f"{problem} (got {base!r})", "name" if raw_name is not None else "cmd")
        job = JobSpec.make(  # the constructor's, a quarter of the load faster
            base, cmd, gpus, mem_mib, priority, after_t, mem_auto, retries, timeout_s, cwd,
            env, NO_STRINGS, isolate, w.line or 0, entry,
        )  # fmt: skip
        return _Expanded(jobs=[job], template=None, where=w, used=used)
    for combo in combos:
        name = base
        if combo:
            safe = {k: _name_safe(v) for k, v in combo.items()}
            name = substitute_matrix(base, safe, escape=False)
            unused = [k for k in combo if f"{{{k}}}" not in base]
            if unused:
                name += "".join(f"-{k}={safe[k]}" for k in unused)
        problem = name_problem(name)
        if problem:
            raise w.error(f"{problem} (got {name!r})", "name" if raw_name is not None else "cmd")
        jobs.append(
            JobSpec(
                name=name,
                cmd=substitute_matrix(cmd, combo) if combo else cmd,
                gpus=gpus,
                mem_mib=mem_mib,
                mem_auto=mem_auto,
                priority=priority,
                after=tuple(substitute_matrix(a, combo, escape=False) for a in after_t),
                retries=retries,
                timeout_s=timeout_s,
                cwd=substitute_matrix(cwd, combo, escape=False) if combo else cwd,
                env={k: substitute_matrix(v, combo, escape=False) for k, v in env.items()},
                matrix=dict(combo),
                isolate=isolate,
                line=w.line or 0,
                entry=entry,
            )
        )
    notes = _unused_matrix_keys(w, combos[0], used, env, cwd)
    return _Expanded(jobs=jobs, template=raw_name, where=w, notes=notes)


def _unused_matrix_keys(
    w: _Where, combo: dict[str, str], used: set[str], env: dict[str, str], cwd: str
) -> list[str]:
    """A matrix key that neither cmd, env nor cwd uses makes jobs that run the same command
    (only their names differ): a warning, once for the entry."""
    unused = [k for k in combo if k not in used]
    if unused and (env or "{" in cwd):
        elsewhere = placeholders_used(cwd).union(*(placeholders_used(v) for v in env.values()))
        unused = [k for k in unused if k not in elsewhere]
    if not unused:
        return []
    keys = ", ".join(f"`{k}`" for k in unused)
    verb = "is" if len(unused) == 1 else "are"
    line = w.line_of("matrix")
    at = f"{w.path}:{line}" if line else str(w.path)
    return [
        f"{at}: matrix: {keys} {verb} not used by cmd (nor env, cwd): its jobs run identical "
        f"commands; use {{{unused[0]}}} in cmd, or drop the key"
    ]


_CVD_ASSIGN = re.compile(
    r"CUDA_VISIBLE_DEVICES=[\"']?(?:\\?\$\{available_gpu(?:_\d+)?\}|\{gpu\d*\}|,)+[\"']?"
)


def isolated(job: JobSpec, settings: Settings) -> bool:
    """Whether ``job`` runs with CUDA_VISIBLE_DEVICES set to its GPUs (DESIGN.md 4.4): its own
    ``isolate`` if it has one, else the queue's. A CPU job is always isolated (it sees none)."""
    if job.gpus == 0:
        return True
    return settings.isolate if job.isolate is None else job.isolate


def passes_gpu_numbers(cmd: str) -> bool:
    """Whether ``cmd`` hands GPU numbers to the program itself (``--gpu {gpu}``), rather than
    only through ``CUDA_VISIBLE_DEVICES={gpu}``. With isolation those numbers do not match
    what CUDA shows the job (its GPUs numbered from 0)."""
    return _passes_gpu_numbers(cmd, None)


def _passes_gpu_numbers(cmd: str, used: set[str] | None) -> bool:
    """:func:`passes_gpu_numbers`, given ``placeholders_used(cmd)`` when it is known."""
    if "CUDA_VISIBLE_DEVICES" in cmd or used is None:
        used = placeholders_used(_CVD_ASSIGN.sub("", cmd))
    return any(u == "gpu" or re.fullmatch(r"gpu\d+", u) for u in used if u.startswith("gpu"))


def _warnings(
    job: JobSpec, w: _Where, settings: Settings, used: set[str] | None = None
) -> list[str]:
    """What is allowed in ``job`` but probably not meant. ``used`` is
    ``placeholders_used(job.cmd)`` if the caller has it (a load asks for every job's)."""
    if used is None:
        used = placeholders_used(job.cmd)
    out: list[str] = []
    # The line of `cmd` is read only for a warning: finding it costs more than the checks.
    where = "{where}"
    for ident in sorted(used):
        if is_reserved(ident) or ident in job.matrix:
            continue
        out.append(
            f"{where}: cmd: {{{ident}}} is not a placeholder (no matrix key `{ident}`); it reaches "
            f"the shell as written (write {{{{{ident}}}}} to say so)"
        )
    if job.gpus == 0 and used & {"gpu", "gpu0"}:
        out.append(f"{where}: cmd: job {job.name} uses {{gpu}} but gpus = 0: it will be empty")
    elif job.gpus and isolated(job, settings) and _passes_gpu_numbers(job.cmd, used):
        out.append(
            f"{where}: cmd: {{gpu}} gives physical GPU numbers, but with isolate = true the job "
            f"sees its GPUs as 0..{job.gpus - 1}: pass those, or set isolate = false on this job"
        )
    if out:
        at = f"{w.path}:{w.line_of('cmd')}" if w.line_of("cmd") else w.path
        out = [m.replace(where, at, 1) for m in out]
    return out


def _names_nodes(settings: Settings) -> bool:
    """Whether settings name a cluster's nodes: then this machine's GPUs are not the pool."""
    return bool(settings.cluster_gpus or settings.cluster_exclude or settings.cluster_reserve)


def _pool_limits(settings: Settings, pool: Sequence[int | None] | None) -> int | None:
    """How many GPUs the pool has, if known (a listed ``settings.gpus`` fixes an upper bound)."""
    if pool is not None:
        return len(pool)
    if isinstance(settings.gpus, tuple) and not settings.cluster_gpus:
        return len(set(settings.gpus) - set(settings.exclude))
    return None


class _PoolCheck:
    """Can each job ever get its GPUs and memory from the pool? Raises the message saying why
    not. The pool's facts (its size, what the reserve leaves, the largest GPU, how many GPUs
    have a given memory) are worked out once for a load's thousands of jobs."""

    __slots__ = ("_fitting", "known", "largest", "most", "pool", "settings", "size")

    def __init__(self, settings: Settings, pool: Sequence[int | None] | None) -> None:
        self.settings = settings
        self.pool = pool
        self.size = _pool_limits(settings, pool)
        self.most = self.size  # what the reserve lets one job take (the policy's own rule)
        if self.size is not None and settings.mode != Mode.PACK and settings.reserve:
            self.most = reserve_allows(self.size, settings.reserve, settings.reserve_rule)
        known = [t for t in pool if t is not None] if pool is not None else []
        self.largest = max(known) if known else None
        self._fitting: dict[int, int] = {}  # mem_mib -> how many GPUs of the pool have that much

    def __call__(self, job: JobSpec, w: _Where) -> None:
        gpus = job.gpus
        if gpus == 0:
            return
        size, most = self.size, self.most
        if size is not None and gpus > size:
            source = "the pool" if self.pool is not None else "settings gpus (minus exclude)"
            raise w.error(
                f"job {job.name} needs {gpus} GPU{'s' if gpus > 1 else ''} but {source} "
                f"has {size}; lower gpus or widen settings gpus / exclude",
                "gpus",
            )
        if most is not None and gpus > most:
            raise w.error(
                f"job {job.name} needs {gpus} GPUs but with reserve = {self.settings.reserve} "
                f"at most {most} of the {size} GPUs in the pool can be taken; lower gpus or "
                "reserve",
                "gpus",
            )
        mem = job.mem_mib
        if self.pool is None or mem is None or self.largest is None:
            return
        if mem > self.largest:
            raise w.error(
                f"job {job.name} asks {format_mib(mem)} per GPU, more than any GPU has "
                f"(largest: {format_mib(self.largest)}); lower mem",
                "mem",
            )
        fitting = self._fitting.get(mem)
        if fitting is None:
            fitting = self._fitting[mem] = sum(1 for t in self.pool if t is None or t >= mem)
        if fitting < gpus:
            have = f"{fitting} GPUs of the pool have" if fitting != 1 else "1 GPU of the pool has"
            raise w.error(
                f"job {job.name} needs {gpus} GPUs with {format_mib(mem)} each but only "
                f"{have} that much; lower mem or gpus",
                "mem",
            )


def _resolve_after(
    job: JobSpec,
    names: Collection[str],
    templates: Mapping[str, Sequence[str]],
    w: _Where,
) -> JobSpec:
    out: list[str] = []
    for a in job.after:
        if a in names:
            targets: Sequence[str] = [a]
        elif a in templates:
            targets = templates[a]
        else:
            close = difflib.get_close_matches(a, list(names) + list(templates), n=1, cutoff=0.6)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise w.error(f"no job named `{a}`{hint}", "after")
        for t in targets:
            if t == job.name:
                raise w.error(f"job {job.name} cannot wait for itself", "after")
            if t not in out:
                out.append(t)
    if tuple(out) == job.after:
        return job
    return replace(job, after=tuple(out))


def _find_cycle(jobs: Sequence[JobSpec]) -> list[str] | None:
    """A cycle in ``after`` (as a list of names, first == last), or None."""
    # a job waiting for nothing is in no cycle: left out of the walk (most jobs are)
    graph = {j.name: j.after for j in jobs if j.after}
    color: dict[str, int] = {}
    for start in graph:
        if color.get(start):
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[str] = []
        while stack:
            node, i = stack.pop()
            if i == 0:
                color[node] = 1
                path.append(node)
            deps = graph.get(node, ())
            if i < len(deps):
                stack.append((node, i + 1))
                nxt = deps[i]
                if color.get(nxt) == 1:
                    return [*path[path.index(nxt) :], nxt]
                if not color.get(nxt) and nxt in graph:
                    stack.append((nxt, 0))
            else:
                color[node] = 2
                path.pop()
    return None


def job_from_fields(
    fields: Mapping[str, Any],
    settings: Settings,
    path: str | Path,
    line: int | None,
    existing_names: Collection[str],
    *,
    pool: Sequence[int | None] | None = None,
) -> list[JobSpec]:
    """Check one new job (a ``[[jobs]]`` table's fields) exactly as the queue file would.

    For the dashboard's add form and ``gtui add``: ``existing_names`` are the queue's jobs (its
    ``after`` may only name those; its name(s) must differ from them). Returns the job, or the
    jobs its ``matrix`` expands to. Raises :class:`QueueFileError`.
    """
    w = _Where(str(path), line, {}, "[[jobs]]")
    exp = _expand_entry(fields, settings, w, entry=-1)
    mine: set[str] = set()
    for job in exp.jobs:
        if job.name in existing_names or job.name in mine:
            raise w.error(f"a job named `{job.name}` already exists; choose another name", "name")
        mine.add(job.name)
    jobs = [_resolve_after(j, existing_names, {}, w) for j in exp.jobs]
    check_pool = _PoolCheck(settings, pool)
    for job in jobs:
        check_pool(job, w)
    return jobs


# ---------------------------------------------------------------------------------------------
# the file


def _own_group(gid: int) -> bool:
    """Whether ``gid`` is the user's private group (named after them, no other member)."""
    import grp
    import pwd

    try:
        group = grp.getgrgid(gid)
        me = pwd.getpwuid(os.getuid()).pw_name
    except (KeyError, OSError):
        return False
    return gid == os.getgid() and group.gr_name == me and set(group.gr_mem) <= {me}


def check_trusted(path: Path) -> None:
    """Refuse a queue file that someone else could have written, before running its commands:
    whoever can write the file (or replace it in its folder) could make gtui run anything as
    you. As sshd's StrictModes: the file and its folder must belong to you or root and be
    writable by no one else (a group write bit is fine for your own private group; a folder
    with the sticky bit, such as /tmp, is fine too)."""
    me = os.getuid()
    folder = path.parent
    for p in (path, folder):
        try:
            st = p.stat()
        except OSError:
            return  # the reader says why it cannot be read
        what = f"its folder {p}" if p == folder else "it"
        if st.st_uid not in (me, 0):
            raise QueueFileError(
                str(path),
                f"{what} belongs to another user (uid {st.st_uid}), who could make gtui run any "
                "command as you; copy the queue into a folder of yours",
            )
        others = st.st_mode & stat.S_IWOTH or (
            st.st_mode & stat.S_IWGRP and not _own_group(st.st_gid)
        )
        if others and not (p == folder and st.st_mode & stat.S_ISVTX):
            mode = f"{stat.S_IMODE(st.st_mode):04o}"
            raise QueueFileError(
                str(path),
                f"{what} can be written by other users (mode {mode}), who could make gtui run "
                f"any command as you; fix it with: chmod go-w {p}",
            )


# A queue file larger than this is refused: 100,000 jobs take ~10 MB, and a bigger file is far
# more likely a mistake (a log given as the queue) than a queue.
MAX_QUEUE_BYTES = 256 << 20


def read_queue_bytes(path: Path) -> bytes:
    """The file's bytes, or a QueueFileError saying plainly why it cannot be read.

    Opened without blocking and checked to be a regular file first: a FIFO or a device given as
    the queue file would otherwise hang gtui (open waits for a writer, read never ends).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise QueueFileError(str(path), "no such file") from None
    except IsADirectoryError:
        raise QueueFileError(str(path), "is a directory, not a queue file") from None
    except OSError as e:
        raise QueueFileError(str(path), f"cannot read it: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise QueueFileError(str(path), "is a directory, not a queue file")
        if not stat.S_ISREG(st.st_mode):
            kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
            raise QueueFileError(str(path), f"is {kind}, not a regular file; give a queue file")
        if st.st_size > MAX_QUEUE_BYTES:
            raise QueueFileError(
                str(path),
                f"is {st.st_size >> 20} MiB; a queue file may hold at most "
                f"{MAX_QUEUE_BYTES >> 20} MiB (is it really a queue file?)",
            )
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_QUEUE_BYTES:
                raise QueueFileError(str(path), "grew past the size a queue file may have")
        return b"".join(chunks)
    except OSError as e:
        raise QueueFileError(str(path), f"cannot read it: {e.strerror or e}") from None
    finally:
        os.close(fd)


class EncodingProblem(ValueError):
    """Text in an encoding other than UTF-8; ``str()`` names it in one line."""


# UTF-32 first: its little-endian mark begins like UTF-16's.
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def wide_encoding(data: bytes) -> str | None:
    """"UTF-16" or "UTF-32" where ``data`` starts with that encoding's byte-order mark."""
    return next((name for bom, name in _WIDE_BOMS if data.startswith(bom)), None)


def decode_utf8(data: bytes) -> str:
    """``data`` as text: UTF-8, a byte-order mark allowed and dropped (editors on Windows write
    one); else an EncodingProblem saying in one line which encoding it is instead. The queue
    file and ``gtui import`` share it, so both say the same."""
    wide = wide_encoding(data)
    if wide is not None:
        raise EncodingProblem(f"a {wide} text file; save it as UTF-8")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise EncodingProblem(
            f"not a UTF-8 text file (byte {e.start} is not UTF-8; Latin-1 or another legacy "
            "encoding?); save it as UTF-8"
        ) from None


def decode_queue(path: Path, data: bytes) -> str:
    """``data`` as text (:func:`decode_utf8`), or a QueueFileError saying why not."""
    try:
        return decode_utf8(data)
    except EncodingProblem as e:
        raise QueueFileError(str(path), f"{e} (TOML files are UTF-8)") from None


def read_queue_text(path: Path) -> str:
    """The file's text, or a QueueFileError saying plainly why it cannot be read."""
    return decode_queue(path, read_queue_bytes(path))


def _parse_toml(path: str, text: str, sc: Scan) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        m = _SYNTAX_POS.search(message)
        detail = message[: m.start()] if m else message
        line: int | None = None
        key: str | None = None
        if "overwrite" in message or "twice" in message:
            for t in sc.tables:
                if t.repeated:
                    key, line = t.repeated[0]
                    detail = f"{key} is set twice in the same table; keep one"
                    break
        if line is None and m and m.group(1):
            line = int(m.group(1))
            detail += f" (column {m.group(2)})"
        elif line is None:
            line = max(1, len(sc.lines))
        shown = printable(sc.lines[line - 1].strip()) if 0 < line <= len(sc.lines) else ""
        extra = f"\n    {shown}" if shown else ""
        shown_key = printable(key) if key else key
        raise QueueFileError(
            path, f"TOML syntax error: {printable(detail)}{extra}", line, shown_key
        ) from None


def _settings_where(path: str, sc: Scan) -> tuple[int | None, dict[str, int]]:
    t = sc.table("settings")
    if t is not None:
        keys = dict(t.keys)
        for sub in sc.tables:
            if len(sub.path) == 2 and sub.path[0] == "settings":
                keys.setdefault(sub.path[1], sub.line)
        return t.line, keys
    line = sc.tables[0].keys.get("settings")
    return line, {}


_last_expansion: tuple[str, str, Settings, list[tuple[JobSpec, _Where]], list[str]] | None = None


def _expand_jobs(
    shown: str,
    text: str,
    sc: Scan,
    raw_jobs: list[Any],
    settings: Settings,
    jobs_where: _Where,
) -> tuple[list[tuple[JobSpec, _Where]], list[str]]:
    """Every [[jobs]] table expanded, named, checked and its ``after`` resolved, with where it
    was declared; and the warnings. Everything but the checks against the GPUs, which depend on
    the pool: so a second load of the same text (``gtui validate``, the engine's start, first
    without the GPUs and then with them) reuses it. For 10,000 jobs it is 0.35 s of a load.
    """
    global _last_expansion
    last = _last_expansion
    if last is not None and last[0] == shown and last[1] == text and last[2] == settings:
        return last[3], last[4]
    entries = sc.entries("jobs")
    expanded: list[_Expanded] = []
    for i, fields in enumerate(raw_jobs):
        e = entries[i] if i < len(entries) else None
        w = _Where(shown, e.line if e else jobs_where.line, e if e else {}, "[[jobs]]")
        expanded.append(_expand_entry(fields, settings, w, i))

    seen: dict[str, _Expanded] = {}
    templates: dict[str, list[str]] = {}
    for exp in expanded:
        for job in exp.jobs:
            if job.name in seen:
                other = seen[job.name].where.line
                derived = "name" not in raw_jobs[job.entry]
                how = " (derived from cmd)" if derived else ""
                fix = "give one of them a distinct `name`"
                raise exp.where.error(
                    f"`{job.name}`{how} is already the name of the job at line {other}; {fix}",
                    "name" if not derived else "cmd",
                )
            seen[job.name] = exp
        if exp.template is not None:
            templates.setdefault(exp.template, []).extend(j.name for j in exp.jobs)

    jobs: list[JobSpec] = []
    warnings: list[str] = []
    out: list[tuple[JobSpec, _Where]] = []
    for exp in expanded:
        if exp.notes:
            warnings.extend(exp.notes)
        where = exp.where
        for job in exp.jobs:
            # a job that waits for nothing is itself resolved; one whose cmd has no placeholder
            # (nor a CUDA_VISIBLE_DEVICES to read) has no warning: most jobs, 0.2 s of 100,000
            resolved = _resolve_after(job, seen, templates, where) if job.after else job
            if exp.used is None or exp.used or "CUDA_VISIBLE_DEVICES" in job.cmd:
                warnings.extend(_warnings(resolved, where, settings, exp.used))
            jobs.append(resolved)
            out.append((resolved, where))
    cycle = _find_cycle(jobs)
    if cycle:
        where_of = {job.name: where for job, where in out}
        raise where_of[cycle[0]].error(
            f"jobs wait for each other in a cycle: {' -> '.join(cycle)}; remove one of these",
            "after",
        )
    _last_expansion = (shown, text, settings, out, warnings)
    return out, warnings


_last_parse: tuple[str, str, Scan, dict[str, Any]] | None = None


def _scan_and_parse(shown: str, text: str) -> tuple[Scan, dict[str, Any]]:
    """The line scan and the TOML parse of ``text``, reused when the same text is loaded again.

    ``gtui validate`` and the engine's start load a file twice (the second time against the
    GPUs the first load's settings named): for 10,000 jobs the scan and parse are 1.2 s of each
    1.5 s load (benchmarks/validate.py). Nothing downstream mutates the parsed document.
    """
    global _last_parse
    last = _last_parse
    if last is not None and last[0] == shown and last[1] == text:
        return last[2], last[3]
    nested: list[tuple[Any, int]] = []
    plain = parse_plain(text, nested=nested)
    if plain is not None:
        # The plain reader's own arrays and inline tables hold scalars only (depth 5 at most):
        # only what it left to tomllib can nest deeper. Walking all of a 100,000-job document
        # instead cost 0.2 s of each load.
        data, sc = plain
        for value, depth in nested:
            _check_depth(shown, value, depth)
    else:
        sc = scan(text)
        data = _parse_toml(shown, text, sc)
        _check_depth(shown, data)  # once per text, like the parse
    _last_parse = (shown, text, sc, data)
    return sc, data


def forget_cached() -> None:
    """Drop the last parse and expansion. They serve a second load of the same text (the
    engine's start loads twice); kept after it, a 100,000-job file's parse holds ~120 MB."""
    global _last_parse, _last_expansion
    _last_parse = None
    _last_expansion = None


def load_queue(
    path: Path | str,
    *,
    pool: Sequence[int | None] | None = None,
    text: str | None = None,
    machine: Mapping[int, int | None] | None = None,
) -> QueueFile:
    """Read, check and expand a queue file.

    ``pool``: the total memory (MiB, None = unknown) of each GPU of the usable pool, when known;
    or ``machine``: every GPU of the machine (index -> total MiB), from which the pool is worked
    out with ``settings.gpus`` / ``exclude`` (and listed GPUs that do not exist are an error).
    With neither, the checks against the GPUs are skipped. ``text`` is the file's content, when
    the caller has it already (write-back checks a new version before it reaches the disk).
    """
    # A load makes some 100,000 objects that all live on (they hold no cycles): the garbage
    # collector's passes over them while they are made find nothing and cost ~10 % of a
    # 10,000-job load, so it waits until the load is done. Left off if it already was.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_queue(path, pool, text, machine)
    except RecursionError:
        # tomllib reads nested arrays and tables recursively: a file nested some hundreds of
        # levels deep exhausts the stack before _check_depth can see it.
        raise QueueFileError(
            str(path), f"nested too deeply (a queue file needs at most {MAX_NESTING} levels)"
        ) from None
    finally:
        if enabled:
            gc.enable()


# Arrays and tables inside each other: a real queue file uses 3 or 4 ([[jobs]] > env, matrix >
# its list); anything deeper is a mistake or an attack on the reader.
MAX_NESTING = 32


def _check_depth(path: str, data: object, depth: int = 1) -> None:
    """Refuse a document nested deeper than MAX_NESTING (iteratively: no recursion to break);
    ``data`` may be a part of it, at ``depth`` (the root is 1)."""
    stack: list[tuple[object, int]] = [(data, depth)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            raise QueueFileError(
                path, f"nested too deeply (a queue file needs at most {MAX_NESTING} levels)"
            )
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))


def _load_queue(
    path: Path | str,
    pool: Sequence[int | None] | None,
    text: str | None,
    machine: Mapping[int, int | None] | None,
) -> QueueFile:
    p = Path(path)
    shown = str(path)
    if text is None:
        text = read_queue_text(p)
    sc, data = _scan_and_parse(shown, text)
    root = _Where(shown, None, sc.tables[0].keys, "the top level")
    for key in data:
        if key not in TOP_KEYS:
            # A [table] header's line is not a root key's: look both up.
            t = sc.table(key)
            w = _Where(shown, t.line if t else root.line_of(key), {}, "the top level")
            arr = [x for x in sc.tables if x.path == (key,)]
            if arr and t is None:
                w = _Where(shown, arr[0].line, {}, "the top level")
            raise _unknown(
                w, key, TOP_KEYS, {"[settings]": SETTINGS_KEYS, "a [[jobs]] table": JOB_KEYS}
            )

    s_line, s_keys = _settings_where(shown, sc)
    raw_settings = data.get("settings", {})
    rule_lines = [(e.line, e.keys) for e in sc.entries("settings", "diagnose")]
    settings = parse_settings(raw_settings, shown, line=s_line, lines=s_keys, rule_lines=rule_lines)
    if "diagnose" in data:
        entries = sc.entries("diagnose")
        wheres = [_Where(shown, e.line, e.keys, "[[diagnose]]") for e in entries]
        fallback = _Where(shown, root.line_of("diagnose"), {}, "the top level")
        extra = _rules(shown, data["diagnose"], wheres, fallback)
        settings = replace(settings, diagnose=settings.diagnose + tuple(extra))
    if "notify" in data:
        t = sc.table("notify")
        nw = _Where(
            shown, _table_line(t) or root.line_of("notify"), t.keys if t else {}, "[notify]"
        )
        settings = replace(settings, notify=parse_notify(data["notify"], nw))

    if "cluster" in data:
        t = sc.table("cluster")
        line = t.line if t else root.line_of("cluster")
        cw = _Where(shown, line, t.keys if t else {}, "[cluster]")
        settings = _cluster(cw, data["cluster"], settings)

    if machine is not None and pool is None and not _names_nodes(settings):
        pool = _pool_from_machine(settings, machine, _Where(shown, s_line, s_keys, "[settings]"))

    raw_jobs = data.get("jobs", [])
    jobs_where = _Where(
        shown,
        root.line_of("jobs") or _table_line(sc.table("jobs")),
        {},
        "the top level",
    )
    if not isinstance(raw_jobs, list):
        raise jobs_where.error("expected [[jobs]] tables (each with a `cmd`)", "jobs")
    expanded_jobs, warnings = _expand_jobs(shown, text, sc, raw_jobs, settings, jobs_where)
    check_pool = _PoolCheck(settings, pool)
    jobs: list[JobSpec] = []
    for resolved, where in expanded_jobs:
        check_pool(resolved, where)
        jobs.append(resolved)
    return QueueFile(
        path=p, settings=settings, jobs=tuple(jobs), warnings=tuple(dict.fromkeys(warnings))
    )


def _cluster(w: _Where, data: Any, settings: Settings) -> Settings:
    """``[cluster]`` (issue 23): ``backend = "local" | "ray"``, ``address`` ("auto",
    "host:port", "ray://..."), ``gpus`` / ``exclude`` naming nodes ("node2") or a node's
    GPU ("node2:3"), and ``reserve = { node1 = 1 }``: GPUs kept free on a node."""
    if not isinstance(data, Mapping):
        raise w.error(f"expected a table, got {_kind(data)}", "cluster")
    _check_keys(w, data, CLUSTER_KEYS, {"[settings]": SETTINGS_KEYS})
    kw: dict[str, Any] = {}
    if "backend" in data:
        kw["cluster_backend"] = _choice(w, "backend", data["backend"], ["local", "ray"])
    if "address" in data:
        kw["cluster_address"] = _str(w, "address", data["address"])
    if "reserve" in data:  # added to [settings]' own per-node reserve, [cluster] last
        mine = dict(_node_reserve(w, data["reserve"]))
        both = {**dict(settings.cluster_reserve), **mine}
        kw["cluster_reserve"] = tuple(sorted(both.items()))
    for key in ("gpus", "exclude"):
        if key not in data:
            continue
        value = data[key]
        if not isinstance(value, list) or not all(
            isinstance(v, str) and _NODE_GPU.fullmatch(v) for v in value
        ):
            raise w.error(
                f"expected a list of node names or node:GPU, like [\"node2\", \"node3:1\"], "
                f"got {_kind(value)}",
                key,
            )
        kw[f"cluster_{key}"] = _merged(getattr(settings, f"cluster_{key}"), value)
    return replace(settings, **kw)


_NODE_GPU = re.compile(r"[A-Za-z0-9_.-]+(:[0-9]+)?")


def _pool_from_machine(
    settings: Settings, machine: Mapping[int, int | None], w: _Where
) -> list[int | None]:
    """The usable GPUs' totals: ``settings.gpus`` (all, or those listed) minus ``exclude``."""
    if settings.gpus == "all":
        indices = sorted(machine)
    else:
        indices = list(settings.gpus)
        missing = [i for i in indices if i not in machine]
        if missing:
            have = ", ".join(str(i) for i in sorted(machine)) or "none"
            raise w.error(
                f"GPU {missing[0]} does not exist on this machine (its GPUs: {have})", "gpus"
            )
    return [machine[i] for i in indices if i not in settings.exclude]


def pool_from_machine(settings: Settings, machine: Mapping[int, int | None]) -> list[int | None]:
    """Public form of the pool rule, for the engine: which totals the usable pool has."""
    return _pool_from_machine(settings, machine, _Where("<settings>", None, {}, "[settings]"))


# ---------------------------------------------------------------------------------------------
# JSON (gtui validate --json)


def settings_to_json(settings: Settings) -> dict[str, Any]:
    """``settings`` with plain JSON types, keyed by :class:`Settings` field names."""
    out: dict[str, Any] = {}
    for key, value in settings.__dict__.items():
        if key == "diagnose":
            out[key] = [
                {
                    "kind": r.kind,
                    "pattern": r.pattern,
                    "hint": r.hint,
                    "exit_codes": list(r.exit_codes),
                    "signals": list(r.signals),
                }
                for r in value
            ]
        elif isinstance(value, tuple):
            out[key] = list(value)
        elif isinstance(value, dict):
            out[key] = dict(value)
        elif isinstance(value, (Mode, Placement)):
            out[key] = value.value
        elif isinstance(value, Notify):
            out[key] = {k: list(v) if isinstance(v, tuple) else v for k, v in vars(value).items()}
        else:
            out[key] = value
    return out


def job_to_json(job: JobSpec) -> dict[str, Any]:
    """The ``gtui validate --json`` shape of one job."""
    return {
        "name": job.name,
        "cmd": job.cmd,
        "gpus": job.gpus,
        "mem_mib": job.mem_mib,
        "mem_auto": job.mem_auto,
        "priority": job.priority,
        "after": list(job.after),
        "retries": job.retries,
        "timeout_s": job.timeout_s,
        "cwd": job.cwd,
        "env": dict(job.env),
        "isolate": job.isolate,
    }


def _table_line(table: Any) -> int | None:
    """The line of a scanned table, if the scanner found one."""
    return table.line if table is not None else None


def check_new_entry(
    path: Path | str,
    fields: Mapping[str, Any],
    settings: Settings,
    known: Collection[str],
    entry: int,
    pool: Sequence[int | None] | None,
    line: int | None = None,
    keys: Mapping[str, int] | None = None,
) -> tuple[list[JobSpec], list[str]] | None:
    """One new [[jobs]] entry checked as a load of the whole file would check it, against the
    names the file already has: its jobs and warnings. Raises QueueFileError for a mistake;
    None when only a whole load can tell (its ``after`` names a matrix entry by its template).
    ``gtui add`` into a running 100,000-job queue takes this instead of three whole loads."""
    w = _Where(
        str(path), line, keys or {}, "the new [[jobs]] entry" if keys is None else "[[jobs]]"
    )
    exp = _expand_entry(fields, settings, w, entry)
    new_names: set[str] = set()
    for job in exp.jobs:
        if job.name in known or job.name in new_names:
            raise w.error(f"`{job.name}` is already the name of a job; give it a distinct `name`")
        new_names.add(job.name)
    names = _Either(known, new_names)
    check_pool = _PoolCheck(settings, pool)
    jobs: list[JobSpec] = []
    warnings: list[str] = list(exp.notes)
    for job in exp.jobs:
        if any(a not in names for a in job.after):
            return None  # a template or a typo: the whole load says which, with its hint
        resolved = _resolve_after(job, names, {}, w)
        check_pool(resolved, w)
        warnings.extend(_warnings(resolved, w, settings, exp.used))
        jobs.append(resolved)
    return jobs, warnings


class _Either(Collection[str]):
    """Two collections of names seen as one, without copying the 100,000 known ones."""

    def __init__(self, a: Collection[str], b: Collection[str]) -> None:
        self._a, self._b = a, b

    def __contains__(self, name: object) -> bool:
        return name in self._a or name in self._b

    def __iter__(self) -> Iterator[str]:
        yield from self._a
        yield from self._b

    def __len__(self) -> int:
        return len(self._a) + len(self._b)


def refuse_node_names(path: Path | str, settings: Settings) -> None:
    """Node names (issue 23) mean nothing to one server: say so rather than ignore them."""
    for key, names in (
        ("gpus", settings.cluster_gpus),
        ("exclude", settings.cluster_exclude),
        ("reserve", tuple(node for node, _ in settings.cluster_reserve)),
    ):
        if names:
            raise QueueFileError(
                str(path),
                f"{key} names nodes ({', '.join(names)}), which only a cluster has: add "
                '[cluster] backend = "ray" (or run with --backend ray), or name GPUs by number',
            )
