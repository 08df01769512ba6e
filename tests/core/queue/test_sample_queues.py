"""The sample queues: each one validates, and runs to the end through the real scheduler
(`gtui run` on the sample's own simulated GPUs), every command unchanged, on a machine
without GPUs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gtui.core.queue.placeholders import placeholders_used
from gtui.core.queue.queuefile import load_queue
from tests.conftest import REPO, gtui, gtui_here

SAMPLES = REPO / "sample_queues"
QUEUES = sorted(SAMPLES.glob("*.toml"))
# Jobs meant to fail on their first attempt, and what their stderr says.
EXPECTED_FAILURES = {
    ("demo", "eval-ckpt7"): "torch.OutOfMemoryError: CUDA out of memory",
    ("demo", "fetch-data"): "ConnectionResetError",
}
# Of those, the ones with no retry that gets through: they end failed.
FAILED_FOR_GOOD = {("demo", "eval-ckpt7")}


def test_every_scenario_has_its_sample() -> None:
    names = {p.stem for p in QUEUES}
    assert {
        "demo",
        "shared_polite",
        "exclusive_training",
        "pack_evals",
        "sweep",
        "ddp",
        "pipeline",
    } <= names


@pytest.mark.parametrize("path", QUEUES, ids=lambda p: p.stem)
def test_sample_validates_on_its_own_fake_gpus(path: Path) -> None:
    qf = load_queue(path)
    assert qf.settings.fake_gpus, "samples must run anywhere"
    assert qf.jobs and not qf.warnings
    out = gtui_here("validate", str(path))  # `gtui validate` itself: tests/ui/test_daily_use.py
    assert out.returncode == 0, out.stderr
    assert "checked against the machine's" in out.stdout  # the pool checks ran


# Mock-training speed per sample (MOCK_TRAIN_SPEED; 0 = no sleeping, the commands are unchanged).
# The demo keeps a tenth of its pace: its jobs overlap as they do on screen.
SPEED = {"demo": "0.1"}
# GPUs no job of a sample may take: too busy for its mode, as its comment says.
AVOIDED_GPUS = {
    "shared_polite": {0, 1},  # 72G and 66G of 80G used by others: no room for 20G
    "exclusive_training": {1},  # someone else's small job: not idle
}


@pytest.fixture(scope="module")
def sample_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], SampleRun]:
    """Every sample queue run once by the real scheduler (`gtui run`, its own fake GPUs), in a
    copy of sample_queues/; the tests of one sample share its run. The runs go all at once, on
    the first look: each spends most of its time waiting on its jobs, so side by side they take
    about as long as the longest alone. Each has its own folder (its state, its logs) and its
    own board of claims, so none sees another's jobs as a neighbour's."""
    folders: dict[str, Path] = {}
    running: dict[str, subprocess.Popen[str]] = {}
    for path in QUEUES:
        folder = folders[path.stem] = tmp_path_factory.mktemp(path.stem)
        for f in SAMPLES.iterdir():
            if f.is_file():
                (folder / f.name).write_bytes(f.read_bytes())
        env = {
            **os.environ,
            "MOCK_TRAIN_SPEED": SPEED.get(path.stem, "0"),
            "GTUI_CLAIMS_DIR": str(folder / "claims"),
        }
        with (folder / "run.out").open("w") as out, (folder / "run.err").open("w") as err:
            running[path.stem] = subprocess.Popen(
                [sys.executable, "-m", "gtui", "run", str(folder / path.name)],
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                text=True,
                env=env,
            )
    done: dict[str, SampleRun | str] = {}  # a run, or why its status could not be read
    try:
        for stem, proc in running.items():
            code = proc.wait(timeout=240)
            folder = folders[stem]
            out = subprocess.CompletedProcess(
                proc.args, code, (folder / "run.out").read_text(), (folder / "run.err").read_text()
            )
            status = gtui("status", "--json", str(folder / f"{stem}.toml"))
            if status.returncode != 0:
                done[stem] = f"gtui status failed: {status.stderr}"
                continue
            jobs = {j["name"]: j for j in json.loads(status.stdout)["jobs"]}
            done[stem] = SampleRun(folder, out, jobs)
    finally:
        for proc in running.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def run(stem: str) -> SampleRun:
        found = done[stem]
        if isinstance(found, str):
            pytest.fail(found)
        return found

    return run


class SampleRun:
    """A finished `gtui run` of one sample: its folder, its event log, its jobs' records."""

    def __init__(
        self, folder: Path, out: subprocess.CompletedProcess[str], jobs: dict[str, Any]
    ) -> None:
        self.folder = folder
        self.out = out
        self.jobs = jobs

    def log(self, name: str, attempt: int | None = None) -> str:
        """A job's log, byte for byte (carriage returns kept): its last attempt by default."""
        path = Path(self.jobs[name]["log"])
        if attempt is not None:
            path = path.with_name(f"{name}.{attempt}.log")
        return path.read_bytes().decode(errors="replace")


@pytest.mark.parametrize("path", QUEUES, ids=lambda p: p.stem)
def test_sample_runs_to_the_end_through_the_scheduler(
    path: Path, sample_runs: Callable[[str], SampleRun]
) -> None:
    """Every job of the sample runs, unchanged, as the engine launches it: done, except the
    ones meant to fail (and the jobs after them, blocked); the GPUs it was given are the ones
    the command saw; `after` is kept; no GPU its comment rules out is taken."""
    run = sample_runs(path.stem)
    qf = load_queue(path)
    failing = {name for (stem, name) in FAILED_FOR_GOOD if stem == path.stem}
    blocked = {j.name for j in qf.jobs if set(j.after) & failing}
    expected = {
        j.name: "failed" if j.name in failing else "blocked" if j.name in blocked else "done"
        for j in qf.jobs
    }
    assert {n: j["state"] for n, j in run.jobs.items()} == expected, run.out.stdout[-3000:]
    assert run.out.returncode == (1 if failing else 0), run.out.stdout[-3000:]
    counts = [
        f"{n} {s}" for s in ("done", "failed", "blocked") if (n := list(expected.values()).count(s))
    ]
    assert f"finished: {', '.join(counts)}" in run.out.stdout
    assert "Traceback" not in run.out.stdout + run.out.stderr
    for job in qf.jobs:
        rec = run.jobs[job.name]
        if rec["state"] == "blocked":
            assert rec["attempt"] == 0 and rec["log"] is None
            continue
        log = run.log(job.name)
        assert "command not found" not in log, (job.name, log)
        assert len(rec["gpus"]) == job.gpus, rec
        assert not set(rec["gpus"]) & AVOIDED_GPUS.get(path.stem, set()), (job.name, rec["gpus"])
        if "mock_train.py" in job.cmd:
            visible = ",".join(map(str, rec["gpus"]))
            assert "] stage=" in log and f"CUDA_VISIBLE_DEVICES={visible}\n" in log, log[:300]
        for dep in job.after:
            assert run.jobs[dep]["ended_at"] <= rec["started_at"], (dep, job.name)
        expected_error = EXPECTED_FAILURES.get((path.stem, job.name))
        if expected_error is not None:
            assert expected_error in run.log(job.name, attempt=1), job.name


def test_the_flaky_demo_job_succeeds_on_its_retry(
    sample_runs: Callable[[str], SampleRun],
) -> None:
    run = sample_runs("demo")
    fetch = run.jobs["fetch-data"]
    assert fetch["state"] == "done" and fetch["attempt"] == 2
    assert "retry fetch-data (exit 1: network:" in run.out.stdout  # the sample's own rule
    assert "ConnectionResetError" not in run.log("fetch-data")


def test_the_oom_demo_job_is_diagnosed(sample_runs: Callable[[str], SampleRun]) -> None:
    eval_ckpt7 = sample_runs("demo").jobs["eval-ckpt7"]
    assert eval_ckpt7["attempt"] == 1  # retries = 0
    assert eval_ckpt7["diagnosis"]["kind"] == "cuda_oom"


def test_mock_training_prints_progress_like_tqdm(sample_runs: Callable[[str], SampleRun]) -> None:
    log = sample_runs("demo").log("train-resnet")
    assert "\r" in log and "100%|██████████|" in log
    assert "epoch 3 | lr 0.1 | loss" in log


def test_ddp_jobs_get_their_own_port(sample_runs: Callable[[str], SampleRun]) -> None:
    """{port} is a free port per job: the two DDP runs hold theirs at once without a clash."""
    run = sample_runs("ddp")
    ports = []
    for name in ("ddp-conservative", "ddp-balanced"):
        log = run.log(name)
        found = re.findall(r"rank 1/2: MASTER_ADDR=127\.0\.0\.1 MASTER_PORT=(\d+)", log)
        assert len(found) == 1, log[:500]
        ports.append(found[0])
    assert ports[0] != ports[1]


def test_the_sweep_summary_runs_after_every_sweep_job(
    sample_runs: Callable[[str], SampleRun],
) -> None:
    log = sample_runs("sweep").log("sweep-summary")
    for lr in ("0.1", "0.01", "0.001"):
        for seed in (1, 2):
            assert f"sweep-lr{lr}-s{seed}.1.log" in log, log


def test_the_demo_shows_every_state() -> None:
    """Statically: a failing job with a dependant (blocked), retries, a CPU job, a matrix, DDP
    with a port, and a job too big to start at once (waiting)."""
    qf = load_queue(SAMPLES / "demo.toml")
    jobs = {j.name: j for j in qf.jobs}
    failing = {name for (stem, name) in EXPECTED_FAILURES if stem == "demo"}
    assert any(set(j.after) & failing for j in jobs.values())
    assert jobs["fetch-data"].retries >= 1 and jobs["eval-ckpt7"].retries == 0
    assert any(j.gpus == 0 for j in jobs.values()) and any(j.matrix for j in jobs.values())
    assert any("port" in placeholders_used(j.cmd) for j in jobs.values())
    assert jobs["train-vit"].gpus == 2 and (jobs["train-vit"].mem_mib or 0) >= 70 * 1024
