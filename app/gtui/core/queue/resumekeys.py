"""The keys that say how a job is stopped when the stop is not its fault: ``preemptible``,
``signal``, ``grace``, ``requeue_exit``, read the same way in ``[settings]`` (the queue's
defaults) and in a ``[[jobs]]`` table (that job's own, over the queue's)."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from gtui.core.model import Resume
from gtui.core.queue.values import bool_value, duration_value, int_value
from gtui.core.queue.where import Where, kind_of

RESUME_KEYS = ("preemptible", "signal", "grace", "requeue_exit")
_SIGNAL_HINT = 'e.g. "USR1", "TERM", or "USR1@5m" (also 5 minutes before `timeout`)'


def signal_value(w: Where, value: Any) -> tuple[int, float | None]:
    """``signal``: a name ("USR1", "SIGTERM") or number, optionally ``@DURATION``: the signal
    and how long before the time limit it is also sent (None: only when stopped)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0 or value >= signal.NSIG:
            raise w.error(f"not a signal number: {value} ({_SIGNAL_HINT})", "signal")
        return value, None
    if not isinstance(value, str):
        raise w.error(f"expected a signal name, got {kind_of(value)} ({_SIGNAL_HINT})", "signal")
    name, at, before = value.strip().partition("@")
    warn: float | None = None
    if at:
        warn = duration_value(w, "signal", before.strip(), positive=True)
    name = name.strip().upper()
    if name.isdigit():
        return signal_value(w, int(name))[0], warn
    name = name if name.startswith("SIG") else "SIG" + name
    try:
        number = int(signal.Signals[name])
    except KeyError:
        raise w.error(f"unknown signal {value!r} ({_SIGNAL_HINT})", "signal") from None
    if number in (signal.SIGKILL, signal.SIGSTOP):
        raise w.error(f"{name} cannot be caught: a job could not save on it", "signal")
    return number, warn


def resume_value(w: Where, fields: Mapping[str, Any], base: Resume) -> Resume:
    """``base`` with the resume keys ``fields`` gives (``base`` itself when it gives none)."""
    kw: dict[str, Any] = {}
    if "preemptible" in fields:
        kw["preemptible"] = bool_value(w, "preemptible", fields["preemptible"])
    if "signal" in fields:
        kw["signal"], kw["warn_before_s"] = signal_value(w, fields["signal"])
    if "grace" in fields:
        kw["grace_s"] = duration_value(w, "grace", fields["grace"])
    if "requeue_exit" in fields:
        code = int_value(w, "requeue_exit", fields["requeue_exit"], 1, " (an exit code, 1-255)")
        if code > 255:
            raise w.error(f"an exit code is 1-255, got {code}", "requeue_exit")
        kw["requeue_exit"] = code
    return replace(base, **kw) if kw else base
