"""What jobs really used, turned into requests: ``mem = "auto"`` and the notes on
a ``mem`` far from what a job's last runs used.

``mem = "auto"`` asks for the highest peak of the job's recorded runs plus a margin
(``AUTO_MARGIN``, at least ``AUTO_MIN_EXTRA_MIB`` more), rounded up to a whole GiB and capped at
the GPU. A job with no recorded peak yet (its first run) gets its GPUs to itself, as a job
without ``mem`` does: nothing else is safe to assume, and that run measures the peak.

A declared ``mem`` is pointed out when the last ``RUNS_LOOKED_AT`` runs with a peak say it is
wrong: below what a run used (it ran on memory it had not asked for: a neighbour can take it),
or far above (``FAR_ABOVE`` times the peak and ``FAR_ABOVE_MIN_MIB`` more: GPUs sit idle for it).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gtui.core.model import JobSpec
from gtui.core.state.history import TABLE, Attempt, open_readonly
from gtui.core.units import format_mib

AUTO_MARGIN = 1.2  # mem = "auto": the peak of previous runs times this...
AUTO_MIN_EXTRA_MIB = 1024  # ...and at least this much above it
RUNS_LOOKED_AT = 3  # a mem is judged against this many of the job's latest runs with a peak
FAR_ABOVE = 2.0  # a mem this many times the peak, or more, is far above it...
FAR_ABOVE_MIN_MIB = 4096  # ...when it is also this much more
BELOW_BY = 1.05  # a peak this much above the request: it used more than it asked for


def auto_mem(peaks: Iterable[int | None], gpu_total_mib: int | None = None) -> int | None:
    """The request for ``mem = "auto"`` from previous peaks (None: no peak yet: whole GPU)."""
    top = max((p for p in peaks if p), default=None)
    if top is None:
        return None
    want = max(top * AUTO_MARGIN, top + AUTO_MIN_EXTRA_MIB)
    mib = math.ceil(want / 1024) * 1024
    return min(mib, gpu_total_mib) if gpu_total_mib else mib


def recent_peaks(runs: Sequence[Attempt]) -> list[int]:
    """The peaks of the latest RUNS_LOOKED_AT runs that recorded one, oldest first."""
    return [a.peak_mib for a in runs if a.peak_mib][-RUNS_LOOKED_AT:]


@dataclass(frozen=True)
class MemAdvice:
    """A declared ``mem`` the job's last runs say is wrong (``mem_advice``)."""

    below: bool  # a run used more than it asked for (else: it asked far more than it used)
    asked_mib: int
    peak_mib: int  # the highest peak of the runs looked at
    runs: int  # how many runs with a peak were looked at
    fit_mib: int  # what mem = "auto" would ask

    def text(self) -> str:
        """``mem 40G is far above its last 3 runs' peak 12G; 15G would do (or mem = "auto")``:
        the job detail view's words (``mem_note`` puts the job's name first)."""
        runs = "its last run's" if self.runs == 1 else f"its last {self.runs} runs'"
        asked, top, fit = (format_mib(m) for m in (self.asked_mib, self.peak_mib, self.fit_mib))
        if self.below:
            return f'mem {asked} is below {runs} peak {top}; ask for {fit} (or mem = "auto")'
        return f'mem {asked} is far above {runs} peak {top}; {fit} would do (or mem = "auto")'

    def short(self) -> str:
        """``mem: 15G would do``, ``mem: ask 12G``: the job table's note, where few cells are
        left."""
        fit = format_mib(self.fit_mib)
        return f"mem: ask {fit}" if self.below else f"mem: {fit} would do"


def mem_advice(spec: JobSpec, runs: Sequence[Attempt]) -> MemAdvice | None:
    """What the job's last runs say of its declared ``mem`` (module doc); None when it fits
    them, or nothing can be said (no run with a peak, ``mem = "auto"``, no ``mem``, CPU)."""
    return advice_of_peaks(spec, [a.peak_mib for a in runs if a.peak_mib])


def advice_of_peaks(spec: JobSpec, peaks_in_order: Sequence[int]) -> MemAdvice | None:
    """``mem_advice`` from the peaks of the job's runs, oldest first."""
    if spec.mem_auto or spec.mem_mib is None or spec.gpus == 0:
        return None
    peaks = [p for p in peaks_in_order if p][-RUNS_LOOKED_AT:]
    fit = auto_mem(peaks)
    if not peaks or fit is None:
        return None
    top = max(peaks)
    asked = spec.mem_mib
    if top > asked * BELOW_BY:
        return MemAdvice(True, asked, top, len(peaks), fit)
    if asked >= top * FAR_ABOVE and asked - top >= FAR_ABOVE_MIN_MIB:
        return MemAdvice(False, asked, top, len(peaks), fit)
    return None


def mem_note(spec: JobSpec, runs: Sequence[Attempt]) -> str | None:
    """``a: mem 40G is far above its last 3 runs' peak 12G; 15G would do (or mem = "auto")``,
    or None when the declared mem fits what the runs used (or nothing can be said)."""
    advice = mem_advice(spec, runs)
    return f"{spec.name}: {advice.text()}" if advice is not None else None


def mem_notes(specs: Iterable[JobSpec], history: Mapping[str, Sequence[Attempt]]) -> list[str]:
    """``mem_note`` for every job that has one, in queue order. A job without a recorded run
    has none: with no history at all (a new queue) nothing is looked at, and otherwise only the
    jobs that ran (``gtui validate`` of 100,000 jobs spent 0.3 s asking each)."""
    if not history:
        return []
    out = []
    for spec in specs:
        runs = history.get(spec.name)
        if not runs:
            continue  # mem_advice says nothing without a peak
        note = mem_note(spec, runs)
        if note:
            out.append(note)
    return out


class PeakBook:
    """Every job's recorded peaks, kept up to date from the history a few rows at a time: the
    dashboard asks every few seconds, and turning 100,000 rows into attempts takes most of a
    second (``peaks_by_job``), reading the rows written since the last time a few ms.

    A row written again (the same attempt recorded twice) gets a new rowid, the highest, or
    the one it had when it was the highest: rows are read from the last highest rowid on,
    that one included. Rows are never deleted; a db made anew (fewer rows) is read whole."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.peaks: dict[str, dict[int, int]] = {}  # name -> attempt -> peak
        self._rowid = 0

    def refresh(self) -> None:
        rows = _rows_from(self.db, self._rowid)
        if rows is None:
            return
        if rows and rows[-1][0] < self._rowid:
            self.peaks, self._rowid = {}, 0  # a new db
            rows = _rows_from(self.db, 0) or []
        for rowid, name, attempt, peak in rows:
            runs = self.peaks.setdefault(name, {})
            if peak and peak > 0:
                runs[int(attempt)] = int(peak)
            else:
                runs.pop(int(attempt), None)
            self._rowid = max(self._rowid, int(rowid))

    def advice(self, spec: JobSpec) -> MemAdvice | None:
        runs = self.peaks.get(spec.name)
        if not runs:
            return None
        return advice_of_peaks(spec, [runs[k] for k in sorted(runs)])


def _rows_from(db: Path, rowid: int) -> list[tuple[int, str, int, int | None]] | None:
    """(rowid, name, attempt, peak) of the history rows from ``rowid`` on, in rowid order,
    and the highest row's last even when it is below ``rowid`` (a db made anew); None when
    there is no history to read."""
    if not db.is_file():
        return None
    try:
        conn = open_readonly(db)
    except sqlite3.Error:
        return None
    try:
        top = conn.execute(f"SELECT MAX(rowid) FROM {TABLE}").fetchone()[0]
        if top is None:
            return []
        if top < rowid:
            return [(int(top), "", 0, None)]  # says "a new db" to the caller
        return conn.execute(
            f"SELECT rowid, name, attempt, peak_mib FROM {TABLE} WHERE rowid >= ? ORDER BY rowid",
            (rowid,),
        ).fetchall()
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def peaks_by_job(db: Path) -> dict[str, list[Attempt]]:
    """Every job's recorded attempts that have a peak, oldest first, in one read of the whole
    history (a 100,000-job queue's names do not fit one ``IN (...)``); {} without a history."""
    if not db.is_file():
        return {}
    try:
        conn = open_readonly(db)
    except sqlite3.Error:
        return {}
    try:
        rows = conn.execute(
            f"SELECT name, attempt, state, peak_mib FROM {TABLE} WHERE peak_mib > 0 "
            "ORDER BY name, attempt"
        ).fetchall()
    except sqlite3.Error:
        return {}
    finally:
        conn.close()
    out: dict[str, list[Attempt]] = {}
    for name, attempt, state, peak in rows:
        row = Attempt(
            name=name,
            attempt=int(attempt),
            state=str(state),
            started_at=None,
            ended_at=None,
            exit_code=None,
            signal=None,
            diag_kind=None,
            diag_line=None,
            peak_mib=peak,
            gpus=(),
            log=None,
        )
        out.setdefault(name, []).append(row)
    return out


def ram_asked(spec: JobSpec, host_peak_mib: int | None) -> int | None:
    """The host memory ``spec`` asks for its next run: its ``ram``, or with ``ram = "auto"``
    its last run's recorded host peak with ``auto_mem``'s margin (None before any run: its
    first run asks nothing and measures the peak)."""
    if spec.ram_auto:
        return auto_mem((host_peak_mib,))
    return spec.ram_mib
