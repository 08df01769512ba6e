"""``cpus`` and ``ram``: the host cores and memory a job asks, checked once for ``[settings]``
(the defaults) and ``[[jobs]]`` (each job's own, over the defaults), and ``fake_host``."""

from __future__ import annotations

from typing import Any

from gtui.core.queue.values import Seen, int_value, size_value, str_value
from gtui.core.queue.where import Where


def cpus_value(w: Where, value: Any) -> int:
    """``cpus = 8``: at least one core."""
    return int_value(w, "cpus", value, 1)


def ram_value(w: Where, value: Any, seen: Seen | None = None) -> tuple[int | None, bool]:
    """``ram = "64G"`` -> (65536, False); ``ram = "auto"`` -> (None, True): from the job's
    recorded host peaks."""
    if value == "auto":
        return None, True
    mib = size_value(w, "ram", value, seen)
    if mib <= 0:
        raise w.error('expected a size above 0 such as "64G", or "auto"', "ram")
    return mib, False


def fake_host_value(w: Where, value: Any) -> str:
    """A simulated host, checked here so a mistake names this file and line."""
    from gtui.core.errors import GtuiError
    from gtui.core.gpus.host import parse_fake_host

    spec = str_value(w, "fake_host", value)
    try:
        parse_fake_host(spec)
    except GtuiError as e:
        raise w.error(str(e), "fake_host") from None
    return spec
