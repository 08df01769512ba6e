"""Progress, ETA and start estimates end to end: a real job on a fake GPU prints
its progress; the scheduler reads it from the log and `status --json` carries the estimates."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gtui.core.sched.engine import Engine
from tests.conftest import write_queue
from tests.waiting import until


async def test_running_job_progress_eta_and_the_next_jobs_start(tmp_path: Path) -> None:
    go = tmp_path / "go"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        kill_grace = "2s"

        [[jobs]]
        name = "s{{i}}"
        matrix = {{ i = [0, 1, 2] }}
        mem = "10G"
        cmd = "if [ {{i}} = 0 ]; then sleep 1; exit 0; fi; echo 'gtui:progress 0.25'; while [ ! -e {go} ]; do sleep 0.05; done"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G", control=False)
    task = asyncio.create_task(engine.run())
    try:

        def job(name: str) -> dict[str, object]:
            return next(j for j in engine.status_json()["jobs"] if j["name"] == name)

        await until(
            lambda: any(j["state"] == "done" for j in engine.status_json()["jobs"]),
            timeout=30,
            what="the first job done",
        )
        names = [j["name"] for j in engine.status_json()["jobs"]]
        first, running, waiting = names
        await until(
            lambda: job(running)["progress"] is not None,
            timeout=30,
            what="progress read from the running job's log",
        )
        r = job(running)
        assert r["state"] == "running"
        assert r["progress"] == pytest.approx(0.25)
        assert r["progress_text"] == "0.25"
        assert r["estimate_basis"] == "progress"
        assert isinstance(r["eta_s"], float) and r["eta_s"] >= 0
        w = job(waiting)
        assert w["state"] == "queued"
        # It starts when the running one finishes (one GPU; the file asks 10G, shared mode).
        assert w["starts_at"] == pytest.approx(r["finish_at"], abs=1.0)
        assert w["starts_in_s"] >= 0
        assert w["progress"] is None and w["eta_s"] is None
        assert job(first)["starts_at"] is None and job(first)["eta_s"] is None
        assert r["finish_at"] > time.time() - 1
    finally:
        go.touch()
        await engine.shutdown(kill_jobs=True)
        task.cancel()


async def test_the_last_progress_line_is_read_even_if_the_log_then_stays_quiet(
    tmp_path: Path,
) -> None:
    """Two progress lines within the per-job throttle (2 s), then silence: the second must
    still be read. The size of the log was taken as seen when its read was put off, so the
    scheduler kept 0.25 for ever (seen as a loaded run's flake of the test above, whose one
    line could land while the first, header-only read was under way)."""
    go = tmp_path / "go"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        kill_grace = "2s"

        [[jobs]]
        name = "quiet"
        mem = "10G"
        cmd = "echo 'gtui:progress 0.25'; sleep 1.2; echo 'gtui:progress 0.5'; while [ ! -e {go} ]; do sleep 0.05; done"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G", control=False)
    task = asyncio.create_task(engine.run())
    try:

        def progress() -> object:
            jobs = {j["name"]: j for j in engine.status_json()["jobs"]}
            return jobs["quiet"]["progress"] if "quiet" in jobs else None

        await until(lambda: progress() == 0.5, timeout=30, what="the second progress line read")
    finally:
        go.touch()
        await engine.shutdown(kill_jobs=True)
        task.cancel()


def test_status_text_marks_the_estimates() -> None:
    from gtui.commands.status import _with_estimate

    running = {"progress": 0.42, "progress_text": "420/1000", "eta_s": 2400.0}
    assert _with_estimate("3:10", running) == "3:10 · 42% (420/1000) · ends in ~40 min (estimate)"
    waiting = {"starts_in_s": 600.0}
    assert _with_estimate("needs 1 GPU", waiting) == "needs 1 GPU · starts in ~10 min (estimate)"
    assert _with_estimate("x", {}) == "x"
