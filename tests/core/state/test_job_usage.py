"""What each job really used: the peak on each GPU, the host memory peak and the
GPU-hours of every attempt, in its record, its history and ``gtui status --json``; a history
table made by an older gtui gains the new columns."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
from pathlib import Path

from gtui.core.model import JobRecord, JobState
from gtui.core.sched.engine import Engine
from gtui.core.state.history import attempts, gpu_hours, record_attempt
from gtui.core.state.store import Store
from tests.conftest import gtui, write_queue
from tests.waiting import until

G = 1024
HOLD = """
import os, sys, time
b = b"x" * (200 * 2**20)  # written, so resident
open("ready", "w").close()
while not os.path.exists("release"):
    time.sleep(0.05)
"""


async def test_peaks_per_gpu_host_peak_and_gpu_hours_are_recorded(tmp_path: Path) -> None:
    (tmp_path / "hold.py").write_text(HOLD)
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "train"
        gpus = 2
        mem = "10G"
        cmd = "{sys.executable} hold.py"
        """,
    )
    engine = Engine(q, fake_gpus="2x80G")  # a job of ours uses its declared memory there
    task = asyncio.create_task(engine.run(exit_when_idle=True))
    try:
        await until(lambda: (tmp_path / "ready").exists(), what="the job holding its memory")
        await until(
            lambda: (engine.view("train").record.host_peak_mib or 0) >= 200,
            what="a host peak of at least the 200 MiB it holds",
        )
        rec = engine.view("train").record
        assert rec.peak_gpu_mib == [10 * G, 10 * G]
        (tmp_path / "release").touch()
        assert await asyncio.wait_for(task, 30) == 0
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)
    (a,) = attempts(engine.paths.db, "train")
    assert a.peak_gpu_mib == (10 * G, 10 * G) and a.peak_mib == 10 * G
    assert a.host_peak_mib is not None and 200 <= a.host_peak_mib < 2000
    assert a.gpu_hours == gpu_hours(2, a.started_at, a.ended_at) and a.gpu_hours
    r = gtui("status", str(q), "--json")
    assert r.returncode == 0, r.stderr
    (job,) = json.loads(r.stdout)["jobs"]
    assert job["peak_mib"] == 10 * G and job["peak_gpu_mib"] == {"0": 10 * G, "1": 10 * G}
    assert job["host_peak_mib"] == a.host_peak_mib and job["gpu_hours"] == round(a.gpu_hours, 4)


def test_an_older_history_table_gains_the_new_columns(tmp_path: Path) -> None:
    db = tmp_path / "q.db"
    with Store(db) as store:
        store.conn.execute(
            "CREATE TABLE attempts (name TEXT NOT NULL, attempt INTEGER NOT NULL, state TEXT "
            "NOT NULL, started_at REAL, ended_at REAL, exit_code INTEGER, signal INTEGER, "
            "diag_kind TEXT, diag_line TEXT, peak_mib INTEGER, gpus TEXT NOT NULL, log TEXT, "
            "PRIMARY KEY (name, attempt))"
        )
        store.conn.execute(
            "INSERT INTO attempts VALUES ('old', 1, 'done', 0, 3600, 0, NULL, NULL, NULL, "
            "5000, '[0]', NULL)"
        )
        (old,) = attempts(db, "old")  # read before the new columns exist: None
        assert old.peak_mib == 5000 and old.host_peak_mib is None and old.gpu_hours is None
        rec = JobRecord(
            name="new",
            state=JobState.DONE,
            attempt=1,
            gpus=(0, 1),
            started_at=0.0,
            ended_at=1800.0,
            peak_mib=7000,
            peak_gpu_mib=[7000, 3000],
            host_peak_mib=900,
        )
        record_attempt(store, rec)
    (new,) = attempts(db, "new")
    assert new.peak_gpu_mib == (7000, 3000) and new.host_peak_mib == 900
    assert new.gpu_hours == 1.0  # two GPUs for half an hour
    assert attempts(db, "old")[0].peak_mib == 5000
    columns = {r[1] for r in sqlite3.connect(db).execute("PRAGMA table_info(attempts)")}
    assert {"peak_gpu_mib", "host_peak_mib", "gpu_hours"} <= columns


def test_the_detail_view_says_what_an_attempt_used() -> None:
    from gtui.ui.detail import usage_text

    assert usage_text((0, 1), [12 * G, 9 * G + 512], 3100, 0.4216) == (
        " · peaks GPU0 12G, GPU1 9.5G · host 3G · 0.42 GPU-h"
    )
    assert usage_text((0,), [12 * G], None, 0.001) == ""  # one GPU: its peak is said already


def test_the_job_table_says_the_peak_where_it_differs_from_the_request() -> None:
    from gtui.core.api import JobView
    from gtui.core.model import JobSpec
    from gtui.ui.format import note_cell

    def view(state: JobState, mem: int | None, peak: int | None) -> JobView:
        rec = JobRecord(name="a", state=state, attempt=1, mem_mib=mem, peak_mib=peak)
        return JobView(JobSpec(name="a", cmd="x", mem_mib=mem), rec, 0)

    assert note_cell(view(JobState.RUNNING, 12 * G, 9 * G + 512)).plain == "peak 9.5G of 12G"
    assert note_cell(view(JobState.RUNNING, None, 30 * G)).plain == "peak 30G of whole GPU"
    assert note_cell(view(JobState.RUNNING, 12 * G, 12 * G)).plain == ""  # as asked
    assert note_cell(view(JobState.RUNNING, 12 * G, None)).plain == ""  # nothing measured
    long = view(JobState.RUNNING, 12 * G, 12 * G)
    long.record.gpus, long.record.started_at = (0, 1), time.time() - 1800
    long.record.host_peak_mib = 3 * G
    assert note_cell(long).plain == "host 3G · 1.00 GPU-h"  # two GPUs for half an hour
    # Once done, the figures are the detail view's: the table's note is for what to act on.
    assert note_cell(view(JobState.DONE, 12 * G, 9 * G + 512)).plain == ""
