"""The sample queues: each one validates, runs on simulated GPUs, and every command in it really
runs on a machine without GPUs (with the placeholders filled in as the engine would)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from gtui.core.placeholders import placeholders_used, substitute
from gtui.core.queuefile import load_queue
from tests.conftest import gtui

SAMPLES = Path(__file__).resolve().parent.parent / "sample_queues"
QUEUES = sorted(SAMPLES.glob("*.toml"))
# Jobs meant to fail on their first attempt, and what their stderr says.
EXPECTED_FAILURES = {
    ("demo", "eval-ckpt7"): "torch.OutOfMemoryError: CUDA out of memory",
    ("demo", "fetch-data"): "ConnectionResetError",
}


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
    out = gtui("validate", str(path))
    assert out.returncode == 0, out.stderr
    assert "checked against the machine's" in out.stdout  # the pool checks ran


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(path: Path, name: str, attempt: int = 1) -> subprocess.CompletedProcess[str]:
    """Run one job's command as the engine would (bash -c in its cwd, its env), output kept
    byte for byte (carriage returns included)."""
    qf = load_queue(path)
    job = next(j for j in qf.jobs if j.name == name)
    port = _free_port() if "port" in placeholders_used(job.cmd) else None
    cmd = substitute(
        job.cmd,
        gpus=list(range(job.gpus)),
        name=job.name,
        attempt=attempt,
        port=port,
        matrix=job.matrix,
    )
    env = {
        **os.environ,
        **qf.settings.env,
        **job.env,
        "MOCK_TRAIN_SPEED": "0",
        "GTUI_JOB": job.name,
        "GTUI_ATTEMPT": str(attempt),
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(job.gpus)),
    }
    raw = subprocess.run(
        ["bash", "-c", cmd],
        cwd=path.parent / job.cwd,
        env=env,
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return subprocess.CompletedProcess(
        raw.args, raw.returncode, raw.stdout.decode(errors="replace"), raw.stderr.decode()
    )


JOBS = [(p, j.name) for p in QUEUES for j in load_queue(p).jobs]


@pytest.mark.parametrize(("path", "name"), JOBS, ids=[f"{p.stem}:{n}" for p, n in JOBS])
def test_sample_command_runs(path: Path, name: str) -> None:
    out = _run(path, name)
    expected = EXPECTED_FAILURES.get((path.stem, name))
    if expected is None:
        assert out.returncode == 0, (out.stdout, out.stderr)
    else:
        assert out.returncode == 1 and expected in out.stderr
    assert "command not found" not in out.stderr


def test_the_flaky_demo_job_succeeds_on_its_retry() -> None:
    assert _run(SAMPLES / "demo.toml", "fetch-data", attempt=2).returncode == 0


def test_mock_training_prints_progress_like_tqdm() -> None:
    out = _run(SAMPLES / "demo.toml", "train-resnet")
    assert "\r" in out.stdout and "100%|██████████|" in out.stdout
    assert "epoch 3 | lr 0.1 | loss" in out.stdout


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


def test_the_demo_runs_headless_to_the_end(tmp_path: Path) -> None:
    """The whole demo on its fake GPUs, through the real engine (sped up tenfold)."""
    for f in SAMPLES.iterdir():
        if f.is_file():
            (tmp_path / f.name).write_bytes(f.read_bytes())
    env = {**os.environ, "MOCK_TRAIN_SPEED": "0.1"}
    out = gtui("run", str(tmp_path / "demo.toml"), timeout=180, env=env)
    assert out.returncode == 1, out.stdout[-2000:]  # eval-ckpt7 fails, by design
    assert "finished: 8 done, 1 failed, 1 blocked" in out.stdout
