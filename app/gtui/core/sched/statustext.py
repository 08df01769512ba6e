"""The ``gtui status --json`` document as JSON text, without a dict per job.

At 100,000 waiting jobs, a dict per job (``job_dict``) and one ``json.dumps`` over all of them
were about a second of the scheduler's answer; the client then decoded and encoded the whole
document again. Most jobs of a long sweep have never run, and their documents differ in five
values only (name, state, memory, waiting reason and when it was given, and the start
estimate), so those are written into one text template; every other job still goes through
``job_dict``. The template is made *from* ``job_dict`` at import, so the one definition of a
job's document stays there, and tests/core/sched/test_status_text.py checks that both give the
same text for every kind of record.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from json.encoder import encode_basestring_ascii as _quote  # what json.dumps uses for a str
from typing import Any

from gtui.core.api import JobView
from gtui.core.model import WAITING_STATES, JobRecord, JobState
from gtui.core.sched.eta import Estimate
from gtui.core.sched.forecast import estimate_json
from gtui.core.state.status import job_dict

__all__ = ["dumps", "job_text", "status_chunks", "status_text"]


def dumps(obj: object) -> str:
    """Compact JSON, as the control socket writes it."""
    return json.dumps(obj, separators=(",", ":"), default=str)


# The values that the template leaves open, in the order job_dict writes them.
_OPEN = ("name", "state", "mem_mib", "reason", "reason_at", "starts_at", "starts_in_s")


def _template() -> tuple[str, JobRecord]:
    sample = JobRecord(name="x", state=JobState.QUEUED)
    doc = job_dict(JobView(spec=None, record=sample, order=0))  # type: ignore[arg-type]
    marks = {key: f"@@gtui:{key}@@" for key in _OPEN}
    doc.update(marks)
    text = dumps(doc).replace("%", "%%")
    at = {key: text.index(f'"{mark}"') for key, mark in marks.items()}
    if sorted(at, key=at.__getitem__) != list(_OPEN):
        raise AssertionError("job_dict's key order changed: update statustext._OPEN")
    for mark in marks.values():
        text = text.replace(f'"{mark}"', "%s")
    return text, sample


_FRESH, _SAMPLE = _template()
# What a never-run waiting job has in every field job_dict reads, apart from the open values.
_FRESH_FIELDS = (
    "attempt",
    "gpus",
    "exit_code",
    "signal",
    "started_at",
    "ended_at",
    "log",
    "diagnosis",
    "warnings",
    "peak_mib",
    "peak_gpu_mib",
    "host_peak_mib",
    "node",
    "links",
)
_FRESH_VALUES = tuple(getattr(_SAMPLE, f) for f in _FRESH_FIELDS)


def _fresh(rec: JobRecord) -> bool:
    return (
        rec.state in WAITING_STATES
        and (
            rec.attempt,
            rec.gpus,
            rec.exit_code,
            rec.signal,
            rec.started_at,
            rec.ended_at,
            rec.log,
            rec.diagnosis,
            rec.warnings,
            rec.peak_mib,
            rec.peak_gpu_mib,
            rec.host_peak_mib,
            rec.node,
            rec.links,
        )
        == _FRESH_VALUES
    )


def _num(x: float | int | None) -> str:
    return "null" if x is None else repr(x)


def job_text(view: JobView, est: Estimate | None, now: float, quoted: dict[str, str]) -> str:
    """One job's document, as ``dumps`` of ``job_dict`` with its estimate would write it.
    ``quoted``: JSON strings already made (the same waiting reason for thousands of jobs)."""
    rec = view.record
    if (est is None or (est.progress is None and est.finish_at is None)) and _fresh(rec):
        reason = rec.reason
        q = quoted.get(reason)
        if q is None:
            q = quoted[reason] = _quote(reason)
        start = None if est is None else est.start_at
        return _FRESH % (
            _quote(rec.name),
            _quote(rec.state.value),
            _num(rec.mem_mib),
            q,
            _num(rec.reason_at),
            "null" if start is None else repr(round(start, 1)),
            "null" if start is None else repr(round(max(0.0, start - now), 1)),
        )
    doc = job_dict(view)
    if est is not None:
        estimate_json(doc, est, now)
    return dumps(doc)


def status_chunks(
    head: Mapping[str, Any],
    views: Sequence[JobView],
    tail: Mapping[str, Any],
    estimates: Mapping[str, Estimate],
    now: float,
    size: int = 2000,
) -> Iterator[str]:
    """The whole document in pieces of ``size`` jobs: ``head``'s keys, then ``jobs``, then
    ``tail``'s keys, in order. The control socket sends each piece as it is made, so that a
    100,000-job status neither holds the scheduler's loop for its whole second nor leaves the
    scheduler holding the memory of a 45 MiB string."""
    quoted: dict[str, str] = {}
    get = estimates.get
    yield f'{dumps(dict(head))[:-1]}{"," if head else ""}"jobs":['
    for i in range(0, len(views), size):
        part = ",".join([job_text(v, get(v.record.name), now, quoted) for v in views[i : i + size]])
        yield part if i == 0 else "," + part
    yield f"]{',' if tail else ''}{dumps(dict(tail))[1:]}"


def status_text(
    head: Mapping[str, Any],
    views: Sequence[JobView],
    tail: Mapping[str, Any],
    estimates: Mapping[str, Estimate],
    now: float,
) -> str:
    """The whole document as one string (see ``status_chunks``)."""
    return "".join(status_chunks(head, views, tail, estimates, now))
