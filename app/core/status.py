"""The ``gtui status --json`` document, built alike by a running engine and from the store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gtui.core.api import JobView


def job_dict(view: JobView) -> dict[str, Any]:
    rec = view.record
    d = rec.diagnosis
    return {
        "name": rec.name,
        "state": rec.state.value,
        "gpus": list(rec.gpus) if rec.active or rec.attempt else [],
        "mem_mib": rec.mem_mib,
        "attempt": rec.attempt,
        "exit_code": rec.exit_code,
        "signal": rec.signal,
        "started_at": rec.started_at,
        "ended_at": rec.ended_at,
        "log": rec.log,
        "reason": rec.reason if rec.waiting or rec.state.value == "blocked" else "",
        "diagnosis": {"kind": d.kind, "line": d.line, "hint": d.hint} if d else None,
        "warnings": list(rec.warnings),
    }


def status_dict(
    queue: Path, paused: bool, gpus: Sequence[dict[str, Any]], jobs: Sequence[JobView]
) -> dict[str, Any]:
    return {
        "queue": str(queue),
        "paused": paused,
        "gpus": list(gpus),
        "jobs": [job_dict(v) for v in jobs],
    }
