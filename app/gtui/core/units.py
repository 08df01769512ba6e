"""Sizes and durations as people write them in queue files and on the command line.

Sizes are held in MiB (ints) everywhere in gtui; durations in seconds (floats).
"""

from __future__ import annotations

import re

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_SIZE_UNITS_MIB: dict[str, float] = {
    "": 1024.0,  # a bare number is GiB (the bash queue script's "| 35 |")
    "g": 1024.0,
    "gb": 1024.0,
    "gib": 1024.0,
    "gi": 1024.0,
    "mi": 1.0,
    "ti": 1024.0 * 1024.0,
    "m": 1.0,
    "mb": 1.0,
    "mib": 1.0,
    "t": 1024.0 * 1024.0,
    "tb": 1024.0 * 1024.0,
    "tib": 1024.0 * 1024.0,
}
_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)", re.IGNORECASE)
_DURATION_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 job``, ``2 jobs``: counts people read without tripping on "1 jobs" or "job(s)"."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def first_few(names: list[str], n: int = 3) -> str:
    """``a, b, c and 4 more``: a list of job names cut to a readable length."""
    more = f" and {len(names) - n} more" if len(names) > n else ""
    return ", ".join(names[:n]) + more


class UnitError(ValueError):
    """A size or duration that cannot be read; the message says what is expected."""


def parse_size_mib(value: str | int | float) -> int:
    """Read ``35G``, ``35GB``, ``35GiB`` (GiB), ``500M`` / ``500MiB`` or a bare number (GiB)."""
    if isinstance(value, bool):
        raise UnitError(f"expected a size such as 35G or 500M, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise UnitError(f"a size cannot be negative: {value!r}")
        return round(float(value) * 1024)
    m = _SIZE_RE.match(value)
    if not m or m.group(2).lower() not in _SIZE_UNITS_MIB:
        raise UnitError(f"expected a size such as 35G, 35GiB or 500M, got {value!r}")
    return round(float(m.group(1)) * _SIZE_UNITS_MIB[m.group(2).lower()])


def parse_duration_s(value: str | int | float) -> float:
    """Read ``90s``, ``5m``, ``4h``, ``1h30m``, ``250ms`` or a bare number (seconds)."""
    if isinstance(value, bool):
        raise UnitError(f"expected a duration such as 90s, 5m or 1h30m, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise UnitError(f"a duration cannot be negative: {value!r}")
        return float(value)
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if seconds < 0:
            raise UnitError(f"a duration cannot be negative: {value!r}")
        return seconds
    pos = 0
    total = 0.0
    last = float("inf")  # each unit once, largest first: 1h30m, never 1h1h or 30m1h
    for m in _DURATION_PART_RE.finditer(text):
        if m.start() != pos and text[pos : m.start()].strip():
            break
        unit = _DURATION_UNITS_S[m.group(2).lower()]
        if unit >= last:
            raise UnitError(
                f"{value!r}: each unit once, largest first (as in 1h30m or 2d4h), not "
                f"{m.group(2)} after a smaller or equal unit"
            )
        last = unit
        total += float(m.group(1)) * unit
        pos = m.end()
    if pos == 0 or text[pos:].strip():
        raise UnitError(f"expected a duration such as 90s, 5m, 4h or 1h30m, got {value!r}")
    return total


def format_mib(mib: int | float | None) -> str:
    """``36864`` -> ``36G``; ``500`` -> ``500M``; ``None`` -> ``n/a``."""
    if mib is None:
        return "n/a"
    if mib >= 1024:
        g = mib / 1024
        return f"{g:.0f}G" if abs(g - round(g)) < 0.05 or g >= 100 else f"{g:.1f}G"
    return f"{mib:.0f}M"


def format_duration(seconds: float | None) -> str:
    """``3725`` -> ``1:02:05``; ``42`` -> ``0:42``; ``None`` -> ``""``."""
    if seconds is None:
        return ""
    s = max(0, int(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"
