"""Isolation per job (a job without it can spread over every GPU and slow other users' jobs): what a job's processes really see, through a
real `gtui run`, and where a user is told that a job runs unisolated."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import gtui, write_queue


def _env_of(tmp_path: Path, name: str) -> dict[str, str]:
    """The environment the job wrote with `env -0` (unset variables are absent)."""
    raw = (tmp_path / f"{name}.env").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def test_only_the_job_that_passes_gpu_numbers_runs_unisolated(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        fake_gpus = "4x80G"

        [[jobs]]
        name = "passes"
        cmd = "env -0 > passes.env; echo gpu={gpu}"
        mem = "10G"
        isolate = false

        [[jobs]]
        name = "auto"
        cmd = "env -0 > auto.env"
        mem = "10G"
        gpus = 2
        """,
    )
    out = gtui("run", str(q))
    assert out.returncode == 0, out.stdout + out.stderr
    passes, auto = _env_of(tmp_path, "passes"), _env_of(tmp_path, "auto")
    # Both: CUDA numbers GPUs as nvidia-smi does, so `--gpu N` means the same GPU to both.
    assert passes["CUDA_DEVICE_ORDER"] == auto["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert "CUDA_VISIBLE_DEVICES" not in passes
    assert len(auto["CUDA_VISIBLE_DEVICES"].split(",")) == 2
    # The headless log says which job runs unisolated, and only that one.
    starts = [line for line in out.stdout.splitlines() if "] start " in line]
    flagged = [line for line in starts if "unisolated" in line]
    assert len(starts) == 2 and len(flagged) == 1 and "] start passes " in flagged[0], out.stdout
    # ... and the status keeps it on the job.
    status = json.loads(gtui("status", str(q), "--json").stdout)
    warned = {j["name"]: any("unisolated" in w for w in j["warnings"]) for j in status["jobs"]}
    assert warned == {"passes": True, "auto": False}
