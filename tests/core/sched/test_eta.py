"""Finish and start estimates: pure, from progress readings and past runtimes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gtui.core.api import JobView
from gtui.core.model import JobRecord, JobSpec, JobState
from gtui.core.progress import Progress
from gtui.core.sched.eta import ProgressBook, estimate, runtimes_by_sweep, short_duration
from tests.waiting import until

NOW = 10_000.0


def _view(
    name: str,
    order: int,
    state: JobState = JobState.QUEUED,
    *,
    gpus: int = 1,
    on: tuple[int, ...] = (),
    started: float | None = None,
    entry: int = 0,
    after: tuple[str, ...] = (),
    priority: int = 0,
) -> JobView:
    spec = JobSpec(name=name, cmd="true", gpus=gpus, entry=entry, after=after, priority=priority)
    rec = JobRecord(
        name=name,
        state=state,
        attempt=1 if state != JobState.QUEUED else 0,
        gpus=on,
        started_at=started,
    )
    return JobView(spec=spec, record=rec, order=order)


def test_done_runtimes_come_from_the_history_db(tmp_path: Path) -> None:
    """history.done_runtimes: one query of the attempts that ended done, as (name, seconds)."""
    from gtui.core.state.history import done_runtimes, record_attempt
    from gtui.core.state.store import Store

    with Store(tmp_path / "s.db") as store:
        for name, state, secs in (("a", JobState.DONE, 30.0), ("b", JobState.FAILED, 5.0)):
            rec = JobRecord(name, state, attempt=1, started_at=100.0, ended_at=100.0 + secs)
            record_attempt(store, rec)
    assert done_runtimes(tmp_path / "s.db") == [("a", 30.0)]
    assert done_runtimes(tmp_path / "none.db") == []


def test_rate_between_two_readings_gives_the_finish() -> None:
    book = ProgressBook()
    book.observe("a", 1, Progress(0.2, "tqdm", "20/100"), NOW - 100)
    book.observe("a", 1, Progress(0.4, "tqdm", "40/100"), NOW)
    # 0.2 in 100 s: 0.6 left takes 300 s.
    assert book.remaining_s("a", 1, NOW - 1000, NOW) == pytest.approx(300)
    # 50 s after the last reading, 250 s are left.
    assert book.remaining_s("a", 1, NOW - 1000, NOW + 50) == pytest.approx(250)


def test_one_reading_uses_the_elapsed_time_and_a_new_bar_resets_the_rate() -> None:
    book = ProgressBook()
    book.observe("a", 1, Progress(0.25, "tqdm", "25/100"), NOW)
    assert book.remaining_s("a", 1, NOW - 60, NOW) == pytest.approx(180)
    book.observe("a", 1, Progress(0.05, "tqdm", "5/100"), NOW + 5)  # went back: a new bar
    assert book.tracks["a"].first == pytest.approx(0.05)
    assert book.remaining_s("a", 2, NOW - 60, NOW) is None  # another attempt: nothing known


def test_waiting_jobs_start_when_running_ones_free_their_gpus() -> None:
    book = ProgressBook()
    book.observe("r0", 1, Progress(0.5, "gtui", "0.5"), NOW)
    views = [
        _view("r0", 0, JobState.RUNNING, on=(0,), started=NOW - 600),  # 600 s more
        _view("r1", 1, JobState.RUNNING, on=(1,), started=NOW - 100, entry=1),  # history: 400
        _view("w0", 2, entry=1),
        _view("w1", 3, entry=1),
        _view("w2", 4, entry=1),
    ]
    runtimes = runtimes_by_sweep([("old-1", 500.0)], {"old-1": 1, "w0": 1})
    est = estimate(views, book, runtimes, NOW)
    assert est["r0"].finish_at == pytest.approx(NOW + 600) and est["r0"].basis == "progress"
    assert est["r1"].finish_at == pytest.approx(NOW + 400) and est["r1"].basis == "history"
    assert est["w0"].start_at == pytest.approx(NOW + 400)  # takes r1's GPU first
    assert est["w1"].start_at == pytest.approx(NOW + 600)  # then r0's
    assert est["w2"].start_at == pytest.approx(NOW + 900)  # after w0 (400 + 500)


def test_an_unknown_runtime_leaves_later_starts_unknown_not_wrong() -> None:
    views = [
        _view("r0", 0, JobState.RUNNING, on=(0,), started=NOW - 10),  # no progress, no history
        _view("w0", 1),
    ]
    est = estimate(views, ProgressBook(), ({}, {}), NOW)
    assert est["r0"].finish_at is None
    assert "w0" not in est


def test_priority_and_dependencies() -> None:
    book = ProgressBook()
    book.observe("r0", 1, Progress(0.5, "gtui", "0.5"), NOW)
    views = [
        _view("r0", 0, JobState.RUNNING, on=(0,), started=NOW - 100),  # 100 s left
        _view("low", 1),
        _view("high", 2, priority=5),
        _view("cpu", 3, gpus=0, after=("r0",)),
    ]
    est = estimate(views, book, ({0: 50.0}, {}), NOW)
    assert est["high"].start_at == pytest.approx(NOW + 100)
    assert est["low"].start_at == pytest.approx(NOW + 150)
    assert est["cpu"].start_at == pytest.approx(NOW + 100)


def test_held_jobs_get_no_start() -> None:
    views = [
        _view("r0", 0, JobState.RUNNING, on=(0,), started=NOW - 10),
        _view("h", 1, JobState.HELD),
    ]
    assert "h" not in estimate(views, ProgressBook(), ({0: 60.0}, {}), NOW)


def test_short_duration_reads_as_an_estimate() -> None:
    assert short_duration(2400) == "~40 min"
    assert short_duration(7800) == "~2 h 10 min"
    assert short_duration(7200) == "~2 h"
    assert short_duration(12) == "~12 s"


def test_a_job_of_unknown_runtime_does_not_hide_the_next_ones_start() -> None:
    """w0's own runtime is unknown: the slot it takes is lost to the estimate, but w1 still
    takes the other GPU's."""
    book = ProgressBook()
    book.observe("r0", 1, Progress(0.5, "gtui", "0.5"), NOW)
    book.observe("r1", 1, Progress(0.5, "gtui", "0.5"), NOW)
    views = [
        _view("r0", 0, JobState.RUNNING, on=(0,), started=NOW - 100),
        _view("r1", 1, JobState.RUNNING, on=(1,), started=NOW - 200),
        _view("w0", 2, entry=7),
        _view("w1", 3, entry=7),
        _view("w2", 4, entry=7),
    ]
    est = estimate(views, book, ({}, {}), NOW)
    assert est["w0"].start_at == pytest.approx(NOW + 100)
    assert est["w1"].start_at == pytest.approx(NOW + 200)
    assert "w2" not in est  # both slots now free at times unknown


def test_only_the_first_waiting_jobs_get_a_start() -> None:
    from gtui.core.sched.eta import MAX_STARTS

    book = ProgressBook()
    book.observe("r0", 1, Progress(0.5, "gtui", "0.5"), NOW)
    views = [_view("r0", 0, JobState.RUNNING, on=(0,), started=NOW - 10)]
    views += [_view(f"w{i}", i + 1) for i in range(MAX_STARTS + 50)]
    est = estimate(views, book, ({0: 1.0}, {}), NOW)
    starts = [n for n, e in est.items() if e.start_at is not None]
    assert len(starts) == MAX_STARTS and "w0" in starts and f"w{MAX_STARTS}" not in starts


def _logs(tmp_path: Path, n: int) -> list[JobView]:
    views = []
    for i in range(n):
        log = tmp_path / f"j{i}.log"
        log.write_text(f" {i}%|#   | {i}/100 [00:01<00:09]\r")
        v = _view(f"j{i}", i, JobState.RUNNING, on=(0,), started=NOW - 10)
        v.record.log = str(log)
        views.append(v)
    return views


async def test_the_dashboard_reads_a_bounded_number_of_logs_per_update(tmp_path: Path) -> None:
    from gtui.ui.forecast import PARSES_PER_UPDATE, UiForecast

    views = _logs(tmp_path, PARSES_PER_UPDATE + 10)
    fc = UiForecast(tmp_path / "none.db")
    fc.update(views, NOW)
    assert not fc.book.tracks  # an update reads no log: that is `read`, in a thread
    await fc.read(now=NOW)  # the running jobs that update listed
    assert len(fc.book.tracks) == PARSES_PER_UPDATE
    await fc.read(now=NOW + 2)  # the ones not read yet come first
    assert len(fc.book.tracks) == PARSES_PER_UPDATE + 10
    assert len(fc.update(views, NOW + 2)) == PARSES_PER_UPDATE + 10


async def test_the_scheduler_parses_a_bounded_number_of_logs_per_second(tmp_path: Path) -> None:
    """The scheduler's forecast, built alone as the engine builds it."""
    from gtui.core.bus import EventBus
    from gtui.core.exec.local import LocalExecutor
    from gtui.core.paths import queue_paths
    from gtui.core.sched.forecast import PARSES_PER_S, Forecast
    from gtui.core.state.book import JobBook
    from gtui.core.state.store import Store

    q = tmp_path / "q.toml"
    q.write_text('[[jobs]]\ncmd = "true"\ngpus = 0\n')
    book = JobBook(Store(tmp_path / "state.db"), EventBus(), q.name)
    forecast = Forecast(book, LocalExecutor(), queue_paths(q))
    views = _logs(tmp_path, PARSES_PER_S + 5)
    for v in views:
        forecast.read_progress(v.spec.name, v.record, os.path.getsize(str(v.record.log)))
    await until(lambda: not forecast._progress_reading, what="the reads, in their threads")
    assert len(forecast._progress.tracks) == PARSES_PER_S
