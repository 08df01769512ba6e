"""The queue file's settings: ``[settings]``, ``[notify]``, ``[cluster]`` and the diagnosis
rules (``[[settings.diagnose]]``, ``[[diagnose]]``), checked into :class:`Settings`; and the pool
of GPUs those settings leave on a machine.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from gtui.core.errors import QueueFileError
from gtui.core.model import (
    NOTIFY_EVENTS,
    DiagnosisRule,
    Mode,
    Notify,
    Placement,
    Resume,
    Settings,
)
from gtui.core.queue.hostreq import cpus_value, fake_host_value, ram_value
from gtui.core.queue.resumekeys import RESUME_KEYS, resume_value
from gtui.core.queue.schema import (
    CLUSTER_KEYS,
    JOB_KEYS,
    NOTIFY_KEYS,
    RULE_KEYS,
    SETTINGS_KEYS,
)
from gtui.core.queue.values import (
    bool_value,
    choice_value,
    duration_value,
    env_value,
    fake_spec_value,
    float_value,
    int_list_value,
    int_value,
    str_value,
)
from gtui.core.queue.where import Where, check_keys, kind_of, printable

_NODE_GPU = re.compile(r"[A-Za-z0-9_.-]+(:[0-9]+)?")


def _names_and_numbers(
    w: Where, key: str, value: Any
) -> tuple[tuple[int, ...], tuple[str, ...]] | None:
    """A ``[settings] gpus`` / ``exclude`` list that names a cluster's nodes :
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


def _node_reserve(w: Where, value: Any) -> tuple[tuple[str, int], ...]:
    """``reserve = { node1 = 1 }``: GPUs kept free of our jobs on each node named."""
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
        for k, v in value.items()
    ):
        raise w.error(
            f"expected GPUs kept free per node, like {{ node1 = 1 }}, got {kind_of(value)}",
            "reserve",
        )
    return tuple(sorted(value.items()))


def _merged(first: tuple[Any, ...], more: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys((*first, *more)))


def _gpus_setting(w: Where, value: Any) -> str | tuple[int, ...]:
    if isinstance(value, str):
        text = value.strip()
        if text == "all":
            return "all"
        words = text.replace(",", " ").split()
        if words and all(word.isdigit() for word in words):
            return int_list_value(w, "gpus", [int(word) for word in words])
        raise w.error(
            f'expected "all" or a list of GPU indices such as [0, 1], got {value!r}', "gpus"
        )
    return int_list_value(w, "gpus", value)


def _signal_number(w: Where, value: Any) -> int:
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
    raise w.error(f"expected a signal number or name, got {kind_of(value)}", "signals")


def _rule(w: Where, table: Any) -> DiagnosisRule:
    if not isinstance(table, dict):
        raise w.error(f"expected a table (kind, pattern, hint...), got {kind_of(table)}")
    check_keys(w, table, RULE_KEYS)
    if "kind" not in table:
        raise w.error('a diagnosis rule needs a `kind`, e.g. kind = "dataset missing"', "kind")
    kind = str_value(w, "kind", table["kind"])
    hint = str_value(w, "hint", table.get("hint", ""), empty_ok=True)
    pattern: str | None = None
    if "pattern" in table:
        pattern = str_value(w, "pattern", table["pattern"])
        try:
            re.compile(pattern, re.IGNORECASE)
        except re.error as e:
            raise w.error(f"not a valid regular expression: {e}", "pattern") from None
    codes_raw = table.get("exit_codes", [])
    codes_list = codes_raw if isinstance(codes_raw, list) else [codes_raw]
    codes = tuple(int_value(w, "exit_codes", c) for c in codes_list)
    sigs_raw = table.get("signals", [])
    sigs = tuple(
        _signal_number(w, s) for s in (sigs_raw if isinstance(sigs_raw, list) else [sigs_raw])
    )
    if pattern is None and not codes and not sigs:
        raise w.error("a diagnosis rule needs a `pattern`, `exit_codes` or `signals` to match")
    return DiagnosisRule(kind=kind, hint=hint, pattern=pattern, exit_codes=codes, signals=sigs)


def parse_rules(
    path: str, value: Any, wheres: Sequence[Where], fallback: Where
) -> list[DiagnosisRule]:
    """Diagnosis rule tables, each checked with its own ``Where`` (``fallback`` past them)."""
    if not isinstance(value, list):
        raise fallback.error(
            f"expected [[diagnose]] tables (kind, pattern, hint), got {kind_of(value)}", "diagnose"
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
    w = Where(str(path), line, lines or {}, "[settings]")
    if not isinstance(data, Mapping):
        raise w.error(f"expected a table, got {kind_of(data)}", "settings")
    check_keys(w, data, SETTINGS_KEYS, {"a [[jobs]] table": JOB_KEYS})
    kw: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("gpus", "exclude") and (split := _names_and_numbers(w, key, value)):
            # node names go where [cluster]'s go; numbers stay numbers ("all" if
            # there are none: `gpus = ["node1"]` is every GPU of node1)
            numbers, names = split
            if numbers or key == "exclude":
                kw[key] = numbers
            kw[f"cluster_{key}"] = names
        elif key == "gpus":
            kw["gpus"] = _gpus_setting(w, value)
        elif key == "exclude":
            kw["exclude"] = int_list_value(w, key, value)
        elif key == "reserve" and isinstance(value, Mapping):
            kw["cluster_reserve"] = _node_reserve(w, value)
        elif key == "reserve":
            kw["reserve"] = int_value(w, key, value, 0)
        elif key == "reserve_rule":
            kw["reserve_rule"] = choice_value(w, key, value, ["strict", "seed"])
        elif key == "mode":
            extra = " (the bash script's EXTREME_MODE is `pack`)" if value == "extreme" else ""
            kw["mode"] = Mode(choice_value(w, key, value, [m.value for m in Mode], extra))
        elif key == "placement":
            # "auto" (the default: best fit in pack mode, most available otherwise) may be
            # written too, so `gtui validate --json`'s settings can be pasted back.
            choices = [p.value for p in Placement]
            kw["placement"] = Placement(choice_value(w, key, value, choices))
        elif key == "max_parallel":
            kw["max_parallel"] = int_value(w, key, value, 0, " (0 = no limit)")
        elif key == "retries":
            kw["retries"] = int_value(w, key, value, -1, " (-1 = until it succeeds)")
        elif key == "oom_grow":
            kw["oom_grow"] = float_value(w, key, value, 1.0)
        elif key == "poll":
            kw["poll_s"] = duration_value(w, key, value, positive=True)
        elif key == "kill_grace":
            kw["kill_grace_s"] = duration_value(w, key, value)
        elif key == "health_recheck":
            off = isinstance(value, str) and value.strip().lower() == "off"
            kw["health_recheck_s"] = None if off else duration_value(w, key, value) or None
        elif key in ("co2_g_per_kwh", "price_per_kwh"):  # what the energy report converts to
            kw[key] = float_value(w, key, value, 0.0)
        elif key == "starve_after":
            kw["starve_after_s"] = duration_value(w, key, value)
        elif key == "log_dir":
            kw["log_dir"] = str_value(w, key, value)
        elif key == "cpus":
            kw["cpus"] = cpus_value(w, value)
        elif key == "ram":
            kw["ram_mib"], kw["ram_auto"] = ram_value(w, value)
        elif key == "fake_host":
            kw["fake_host"] = fake_host_value(w, value)
        elif key in RESUME_KEYS:
            continue  # read together below: `signal` and its warning are one value
        elif key in ("isolate", "multi_gpu_first", "neighbours", "enforce", "requeue_on_reboot"):
            kw[key] = bool_value(w, key, value)
        elif key == "on_failure":
            kw["on_failure"] = choice_value(w, key, value, ["continue", "pause"])
        elif key == "env":
            kw["env"] = env_value(w, key, value)
        elif key == "fake_gpus":
            kw["fake_gpus"] = fake_spec_value(w, key, value)
        elif key == "setup":
            kw["setup"] = str_value(w, key, value, empty_ok=True) or None
        elif key == "env_file":
            kw["env_file"] = str_value(w, key, value)
        elif key == "diagnose":
            wheres = [Where(str(path), ln, ks, "[[settings.diagnose]]") for ln, ks in rule_lines]
            kw["diagnose"] = tuple(parse_rules(str(path), value, wheres, w))
    resume = resume_value(w, data, Resume())
    if resume != Resume():
        kw["resume"] = resume
    return Settings(**kw)


def parse_notify(data: Any, w: Where) -> Notify:
    """Check a ``[notify]`` table: every key, with the fix in its message."""
    if not isinstance(data, Mapping):
        raise w.error(f"expected a table ([notify]), got {kind_of(data)}", "notify")
    check_keys(w, data, NOTIFY_KEYS, {"[settings]": SETTINGS_KEYS})
    kw: dict[str, Any] = {}
    for key, value in data.items():
        if key == "command":
            kw["command"] = str_value(w, key, value)
        elif key in ("apprise", "on"):
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
                raise w.error(f"expected a list of strings, got {kind_of(value)}", key)
            if key == "on":
                for x in items:
                    choice_value(w, key, x, NOTIFY_EVENTS)
            elif any("://" not in x for x in items):
                bad = next(x for x in items if "://" not in x)
                raise w.error(
                    f"{printable(bad)!r} is not an Apprise URL (e.g. ntfy://topic, "
                    "mailto://user:pass@example.com, json://host/path)",
                    key,
                )
            kw[key] = tuple(dict.fromkeys(items))
        elif key == "timeout":
            kw["timeout_s"] = duration_value(w, key, value, positive=True)
        else:  # bell, desktop
            kw[key] = bool_value(w, key, value)
    return Notify(**kw)


def parse_cluster(w: Where, data: Any, settings: Settings) -> Settings:
    """``[cluster]``: ``backend = "local" | "ray"``, ``address`` ("auto",
    "host:port", "ray://..."), ``gpus`` / ``exclude`` naming nodes ("node2") or a node's
    GPU ("node2:3"), and ``reserve = { node1 = 1 }``: GPUs kept free on a node."""
    if not isinstance(data, Mapping):
        raise w.error(f"expected a table, got {kind_of(data)}", "cluster")
    check_keys(w, data, CLUSTER_KEYS, {"[settings]": SETTINGS_KEYS})
    kw: dict[str, Any] = {}
    if "backend" in data:
        kw["cluster_backend"] = choice_value(w, "backend", data["backend"], ["local", "ray"])
    if "address" in data:
        kw["cluster_address"] = str_value(w, "address", data["address"])
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
                f'expected a list of node names or node:GPU, like ["node2", "node3:1"], '
                f"got {kind_of(value)}",
                key,
            )
        kw[f"cluster_{key}"] = _merged(getattr(settings, f"cluster_{key}"), value)
    return replace(settings, **kw)


def names_nodes(settings: Settings) -> bool:
    """Whether settings name a cluster's nodes: then this machine's GPUs are not the pool."""
    return bool(settings.cluster_gpus or settings.cluster_exclude or settings.cluster_reserve)


def pool_from_machine(
    settings: Settings, machine: Mapping[int, int | None], w: Where | None = None
) -> list[int | None]:
    """The usable GPUs' totals: ``settings.gpus`` (all, or those listed) minus ``exclude``.
    ``w``: where ``[settings]`` is, for the message naming a listed GPU the machine lacks."""
    if w is None:
        w = Where("<settings>", None, {}, "[settings]")
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


def refuse_node_names(path: Path | str, settings: Settings) -> None:
    """Node names mean nothing to one server: say so rather than ignore them."""
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
