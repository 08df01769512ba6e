"""`gtui report`: the figures from records and history (pure), and the command on a
queue that really ran (real processes, fake GPUs), text and --json, with no scheduler."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gtui.core.errors import GtuiError
from gtui.core.model import Diagnosis, JobRecord, JobSpec, JobState
from gtui.core.state.history import Attempt
from gtui.core.state.report import build, over_asked, to_json
from tests.conftest import gtui, jobs_of, write_queue
from tests.waiting import wait_for

H = 3600.0


def _attempt(
    name: str,
    n: int,
    state: str,
    start: float,
    end: float,
    gpus: tuple[int, ...],
    peak: int | None = None,
    diag: str | None = None,
) -> Attempt:
    return Attempt(
        name, n, state, start, end, 0 if state == "done" else 1, None, diag, None, peak, gpus, None
    )


def test_gpu_hours_waits_failures_and_idle_while_waiting() -> None:
    # GPU 0: `a` runs 0-1 h, then `b` 1-2 h. `b` waited 0-1 h while GPU 1 held none of ours.
    recs = {
        "a": JobRecord(
            "a", JobState.DONE, attempt=1, queued_since=0.0, started_at=0.0, ended_at=H, gpus=(0,)
        ),
        "b": JobRecord(
            "b", JobState.DONE, attempt=1, queued_since=0.0, started_at=H, ended_at=2 * H, gpus=(0,)
        ),
        "c": JobRecord(
            "c",
            JobState.FAILED,
            attempt=2,
            queued_since=H,
            started_at=H + 60,
            ended_at=H + 120,
            gpus=(0, 1),
            diagnosis=Diagnosis("cuda_oom", "CUDA out of memory", ""),
        ),
    }
    hist = [
        _attempt("a", 1, "done", 0.0, H, (0,), peak=10 * 1024),
        _attempt("b", 1, "done", H, 2 * H, (0,), peak=30 * 1024),
        _attempt("c", 1, "queued", 2 * H, 2 * H + 60, (0, 1), diag="cuda_oom"),
        _attempt("c", 2, "failed", 2 * H + 120, 2 * H + 180, (0, 1), diag="cuda_oom"),
    ]
    specs = {
        "a": JobSpec("a", "true", mem_mib=40 * 1024),
        "b": JobSpec("b", "true", mem_mib=60 * 1024),
        "c": JobSpec("c", "true", gpus=2, mem_mib=20 * 1024),
    }
    r = build("q.toml", recs, hist, specs, now=3 * H)
    by = {j.name: j for j in r.jobs}
    assert by["a"].gpu_hours == pytest.approx(1.0)
    assert by["c"].gpu_hours == pytest.approx(2 * 120 / H)  # two GPUs, two 60 s attempts
    assert by["b"].wait_s == pytest.approx(H)
    assert by["c"].wait_s == pytest.approx(60)  # the retry waited 60 s after attempt 1
    assert by["c"].failures == {"cuda_oom": 2}
    assert r.failures == {"cuda_oom": ["c", "c"]}
    assert by["b"].mem_asked_mib == 60 * 1024 and by["b"].peak_mib == 30 * 1024
    assert over_asked(r.jobs) == pytest.approx(3.0)  # 4x, 2x -> median 3x
    # In total, memory over time: a held 40G for 1 h using 10G, b 60G for 1 h using 30G.
    assert by["a"].asked_gib_h == pytest.approx(40) and by["a"].peak_gib_h == pytest.approx(10)
    assert sum(j.asked_gib_h for j in r.jobs) == pytest.approx(100)
    assert sum(j.peak_gib_h for j in r.jobs) == pytest.approx(40)
    gpus = {g.index: g for g in r.gpus}
    assert gpus[0].busy_h == pytest.approx(2 + 120 / H)
    # c's retry waited 60 s (its back-off) with both GPUs free of ours; b waited an hour while
    # GPU 1 held none of ours.
    assert gpus[0].idle_waiting_h == pytest.approx(60 / H)
    assert gpus[1].idle_waiting_h == pytest.approx(1.0 + 60 / H)
    assert "█" in gpus[0].timeline and "░" in gpus[1].timeline
    doc = to_json(r)
    assert doc["total"]["idle_gpu_hours_while_waiting"] == pytest.approx(1.0 + 120 / H, abs=1e-3)  # type: ignore[index]


def test_a_job_waiting_for_its_dependency_is_not_waiting_for_a_gpu() -> None:
    recs = {
        "a": JobRecord(
            "a", JobState.DONE, attempt=1, queued_since=0.0, started_at=0.0, ended_at=H, gpus=(0,)
        ),
        "b": JobRecord(
            "b", JobState.DONE, attempt=1, queued_since=0.0, started_at=H, ended_at=2 * H, gpus=(1,)
        ),
    }
    hist = [_attempt("a", 1, "done", 0.0, H, (0,)), _attempt("b", 1, "done", H, 2 * H, (1,))]
    specs = {"a": JobSpec("a", "true"), "b": JobSpec("b", "true", after=("a",))}
    r = build("q.toml", recs, hist, specs, now=2 * H)
    assert {g.index: g.idle_waiting_h for g in r.gpus} == {0: 0.0, 1: 0.0}
    assert {j.name: j.wait_s for j in r.jobs}["b"] == pytest.approx(H)  # it did wait, though


def test_report_of_a_queue_that_ran_text_and_json(tmp_path: Path) -> None:
    """GPU 1 is nearly full of another user's memory: `second` (60G) waits for GPU 0 while
    GPU 1 holds none of ours. That idle time is what the report calls the cost of asking."""
    go = tmp_path / "go"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        gpus = [0, 1]
        poll = "0.1s"
        mode = "shared"

        [[jobs]]
        name = "first"
        mem = "60G"
        cmd = "while [ ! -e {go} ]; do sleep 0.05; done; sleep 1"  # GPU-hours past 4 decimals

        [[jobs]]
        name = "second"
        mem = "60G"
        cmd = "true"

        [[jobs]]
        name = "oom"
        gpus = 0
        cmd = "echo 'torch.OutOfMemoryError: CUDA out of memory.'; exit 1"
        """,
    )
    assert "nothing to report" in gtui("report", str(q)).stdout
    run = subprocess.Popen(
        [sys.executable, "-m", "gtui", "run", str(q), "--fake-gpus", "80G,80G:75G"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:

        def second_waits() -> bool:
            jobs = jobs_of(q)
            return jobs["first"]["state"] == "running" and bool(jobs["second"]["reason"])

        wait_for(
            second_waits, what="first running, second waiting with a reason", ignoring=(GtuiError,)
        )
        go.touch()
        assert run.wait(timeout=120) == 1  # `oom` failed
    finally:
        go.touch()
        if run.poll() is None:
            run.kill()
            run.wait()
    out = gtui("report", str(q), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    jobs = {j["name"]: j for j in doc["jobs"]}
    assert jobs["first"]["gpu_hours"] > 0 and jobs["second"]["wait_s"] > 0
    assert jobs["first"]["mem_asked_mib"] == 60 * 1024
    assert doc["failures"] == {"cuda_oom": {"count": 1, "jobs": ["oom"]}}
    gpus = {g["index"]: g for g in doc["gpus"]}
    assert gpus[1]["busy_hours"] == 0 and gpus[1]["idle_hours_while_waiting"] > 0
    assert doc["total"]["idle_gpu_hours_while_waiting"] >= gpus[1]["idle_hours_while_waiting"]
    text = gtui("report", str(q))
    assert text.returncode == 0, text.stderr
    assert "failures by diagnosis" in text.stdout and "cuda_oom" in text.stdout
    assert "GPU 1 " in text.stdout and "░" in text.stdout
    assert "GPUs idle while our jobs waited" in text.stdout


def test_report_says_plainly_what_is_wrong(tmp_path: Path) -> None:
    out = gtui("report", str(tmp_path / "nope.toml"))
    assert out.returncode == 2 and "no such queue file" in out.stderr
    assert "Traceback" not in out.stderr
