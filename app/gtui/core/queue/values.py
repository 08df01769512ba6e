"""The typed values of a queue file: integers, sizes, durations, environments, GPU lists...

Each check takes the :class:`Where` of its table and raises the message that names the key,
what was expected and what was found.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any

from gtui.core.queue.where import Where, kind_of
from gtui.core.units import UnitError, parse_duration_s, parse_size_mib

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def int_value(w: Where, key: str, value: Any, minimum: int | None = None, hint: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise w.error(f"expected an integer, got {kind_of(value)}", key)
    if minimum is not None and value < minimum:
        raise w.error(f"must be {minimum} or more, got {value}{hint}", key)
    return value


def float_value(w: Where, key: str, value: Any, minimum: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise w.error(f"expected a number, got {kind_of(value)}", key)
    if minimum is not None and value < minimum:
        raise w.error(f"must be {minimum} or more, got {value}", key)
    return float(value)


def bool_value(w: Where, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise w.error(f"expected true or false, got {kind_of(value)}", key)
    return value


NUL_MESSAGE = (
    "contains a NUL character (\\u0000), which no command, path or environment variable can "
    "hold; remove it"
)


def str_value(w: Where, key: str, value: Any, *, empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise w.error(f"expected a string, got {kind_of(value)}", key)
    if not empty_ok and not value.strip():
        raise w.error("must not be empty", key)
    if "\0" in value:
        raise w.error(NUL_MESSAGE, key)
    return value


def choice_value(w: Where, key: str, value: Any, choices: Sequence[str], extra: str = "") -> str:
    text = str_value(w, key, value)
    if text not in choices:
        options = " | ".join(f'"{c}"' for c in choices)
        close = difflib.get_close_matches(text, choices, n=1, cutoff=0.5)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        raise w.error(f"unknown value {text!r}: expected {options}{hint}{extra}", key)
    return text


class Seen:
    """Values one load already found valid: its thousands of jobs share a few sizes and
    environment variable names, so each is parsed and checked once. Made per load (it lives
    no longer than the load does) and shared by its entries."""

    __slots__ = ("env_names", "sizes")

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}  # "35G" -> MiB
        self.env_names: set[str] = set()


def size_value(w: Where, key: str, value: Any, seen: Seen | None = None) -> int:
    sizes = seen.sizes if seen is not None else {}
    if type(value) is str:
        mib = sizes.get(value)
        if mib is not None:
            return mib
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise w.error(f'expected a size such as "35G" or "500M", got {kind_of(value)}', key)
    try:
        mib = parse_size_mib(value)
    except UnitError as e:
        raise w.error(str(e), key) from None
    if type(value) is str and len(sizes) < 4096:
        sizes[value] = mib
    return mib


def duration_value(w: Where, key: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise w.error(f'expected a duration such as "90s" or "4h", got {kind_of(value)}', key)
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


def env_value(w: Where, key: str, value: Any, seen: Seen | None = None) -> dict[str, str]:
    if not isinstance(value, dict):
        raise w.error(f'expected a table such as {{ SEED = "1" }}, got {kind_of(value)}', key)
    env_names = seen.env_names if seen is not None else set()
    out: dict[str, str] = {}
    for name, v in value.items():
        if name not in env_names:
            if not _ENV_NAME.fullmatch(name):
                raise w.error(f"{name!r} is not a valid environment variable name", key)
            if len(env_names) < 4096:
                env_names.add(name)
        text = v if type(v) is str else scalar_text(v)
        if text is None:
            raise w.error(f"{name}: expected a string or a number, got {kind_of(v)}", key)
        if "\0" in text:
            raise w.error(f"{name}: {NUL_MESSAGE}", key)
        if name == "GTUI_FAKE_USE" and "{" not in text:  # fake.FAKE_USE_ENV; a matrix value
            try:  # is read (or, unreadable, ignored) when the job runs
                parse_size_mib(text.strip())
            except UnitError as e:
                raise w.error(f"{name} (what the job uses on simulated GPUs): {e}", key) from None
        out[name] = text
    return out


def fake_spec_value(w: Where, key: str, value: Any) -> str:
    """A simulated-GPU spec, checked here so a mistake names this file and line (an ``@FILE``
    spec is read, and checked, at every poll)."""
    spec = str_value(w, key, value)
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


def int_list_value(w: Where, key: str, value: Any) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        raise w.error(f"expected a list of GPU indices such as [0, 1], got {kind_of(value)}", key)
    out: list[int] = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int):
            raise w.error(f"expected GPU indices (integers), got {kind_of(v)}", key)
        if v < 0:
            raise w.error(f"a GPU index cannot be negative: {v}", key)
        if v in out:
            raise w.error(f"GPU {v} is listed twice", key)
        out.append(v)
    return tuple(out)
