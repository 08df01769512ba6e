"""``gtui gpus [--json]`` through the real command line, on fake GPUs and on the fake pynvml."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import TESTS

FAKE_PYNVML_DIR = TESTS / "fake_pynvml"
KEYS = [
    "index",
    "name",
    "uuid",
    "mem_total_mib",
    "mem_used_mib",
    "util",
    "temperature",
    "processes",
]
POWER_KEYS = ["power_w", "power_limit_w"]  # where the GPU reports them (simulated ones do)
PROCESS_KEYS = [
    "pid",
    "mem_mib",
    "user",
    "command",
    "started",
    "running_s",
    "parent_gone",
    "zombie",
    "job",
    "stale",
]


def gtui_gpus(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m gtui gpus ARGS`` with only the environment we mean to give it. A
    PYTHONPATH it gives (the fake pynvml) goes before the one this test runs under, which may
    be what imports the gtui under test (a worktree's)."""
    full = {k: v for k, v in os.environ.items() if k != "GTUI_FAKE_GPUS"}
    env = dict(env or {})
    if "PYTHONPATH" in env and full.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], full["PYTHONPATH"]])
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "gtui", "gpus", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env=full,
    )


def with_fake_pynvml(tmp_path: Path, config: dict[str, object]) -> dict[str, str]:
    """Environment that makes ``import pynvml`` load tests/fake_pynvml with this config, and
    gives the command a claims board of its own: an idle GPU that another test's scheduler
    published on the worker's board would add ``idle_since`` to the document."""
    path = tmp_path / "nvml.json"
    path.write_text(json.dumps(config))
    return {
        "PYTHONPATH": str(FAKE_PYNVML_DIR),
        "FAKE_PYNVML_CONFIG": str(path),
        "GTUI_CLAIMS_DIR": str(tmp_path / "claims"),
    }


def test_table_on_fake_gpus() -> None:
    r = gtui_gpus("--fake-gpus", "80G:16G@35,24G")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "SIMULATED" in lines[0]
    header, row0, row1 = lines[1:4]
    assert header.split() == ["GPU", "NAME", "MEMORY", "UTIL", "TEMP", "POWER", "PROCESSES"]
    assert row0.split()[0] == "0" and "16G / 80G" in row0 and "35%" in row0
    assert row1.split()[0] == "1" and "0M / 24G" in row1
    assert "179 W / 400 W" in row0  # simulated power: the idle floor plus 35 % of the rest
    assert r.stderr == ""


def test_json_shape_exactly() -> None:
    r = gtui_gpus("--json", env={"GTUI_FAKE_GPUS": "2x80G:8G@10"})  # the env var works too
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [list(g) for g in data] == [KEYS + POWER_KEYS, KEYS + POWER_KEYS]
    assert data[0] == {
        "index": 0,
        "name": data[0]["name"],
        "uuid": data[0]["uuid"],
        "mem_total_mib": 81920,
        "mem_used_mib": 8192,
        "util": 10,
        "temperature": data[0]["temperature"],
        "processes": [],
        "power_w": 60.0 + 340.0 * 0.10,  # an 80G card's 400 W: 15 % idle, the rest by util
        "power_limit_w": 400.0,
    }
    assert data[1]["index"] == 1 and data[0]["uuid"] != data[1]["uuid"]


def test_options_anywhere_and_spec_file_relative_to_cwd(tmp_path: Path) -> None:
    (tmp_path / "gpus.txt").write_text("24G:4G\n")
    r = subprocess.run(
        [sys.executable, "-m", "gtui", "--fake-gpus", "@gpus.txt", "gpus", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "GTUI_FAKE_GPUS"},
    )
    assert r.returncode == 0, r.stderr
    assert [g["mem_used_mib"] for g in json.loads(r.stdout)] == [4096]


def test_bad_spec_is_exit_2_without_traceback() -> None:
    r = gtui_gpus("--fake-gpus", "80G:90G")
    assert r.returncode == 2
    assert r.stdout == ""
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) <= 2
    assert "80G:90G" in r.stderr and "[Nx]TOTAL[:USED_BY_OTHERS][@UTIL]" in r.stderr


def test_no_gpu_and_no_fake_is_a_clear_message_and_exit_0(tmp_path: Path) -> None:
    env = with_fake_pynvml(tmp_path, {"init_error": 12})  # NVML_ERROR_LIBRARY_NOT_FOUND
    r = gtui_gpus(env=env)
    assert r.returncode == 0
    assert "no NVIDIA GPU found" in r.stdout and "--fake-gpus" in r.stdout
    assert "Traceback" not in r.stderr
    r = gtui_gpus("--json", env=env)
    assert r.returncode == 0
    assert json.loads(r.stdout) == []
    assert "no NVIDIA GPU found" in r.stderr and "CPU jobs" in r.stderr


def test_nvml_path_end_to_end(tmp_path: Path) -> None:
    config = {
        "driver": "535.104.05",
        "gpus": [
            {
                "name": "NVIDIA A800 80GB PCIe",
                "uuid": "GPU-aaaa",
                "used_mib": 36864,
                "util": 71,
                "temperature": 54,
                "compute": [[4242, 36000], [4343, None]],
            },
            {"name": "NVIDIA T4", "uuid": "GPU-bbbb", "total_mib": 15360, "temperature": None},
        ],
        "missing": ["nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetMemoryInfo_v2"],
    }
    env = with_fake_pynvml(tmp_path, config)
    r = gtui_gpus("--json", env=env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    # Who holds them: named where the process table knows the pid (these are
    # made up, and may or may not name a process on this machine), the same keys for each.
    procs = data[0]["processes"]
    assert [(p["pid"], p["mem_mib"]) for p in procs] == [(4242, 36000), (4343, None)]
    assert all(list(p) == PROCESS_KEYS for p in procs)
    data[0]["processes"] = [{"pid": p["pid"], "mem_mib": p["mem_mib"]} for p in procs]
    assert data == [
        {
            "index": 0,
            "name": "NVIDIA A800 80GB PCIe",
            "uuid": "GPU-aaaa",
            "mem_total_mib": 81920,
            "mem_used_mib": 36864 + 512,  # v1: the driver's reservation counts as used
            "util": 71,
            "temperature": 54,
            "processes": [{"pid": 4242, "mem_mib": 36000}, {"pid": 4343, "mem_mib": None}],
        },
        {
            "index": 1,
            "name": "NVIDIA T4",
            "uuid": "GPU-bbbb",
            "mem_total_mib": 15360,
            "mem_used_mib": 512,
            "util": 0,
            "temperature": None,
            "processes": [],
        },
    ]
    assert r.stderr == ""
    r = gtui_gpus(env=env)
    assert r.returncode == 0, r.stderr
    assert "NVIDIA driver 535.104.05" in r.stdout
    (row1,) = [line for line in r.stdout.splitlines() if "NVIDIA T4" in line]
    assert "n/a" in row1  # the temperature it does not support
    assert "4242 (35.2G)" in r.stdout and "4343 (n/a)" in r.stdout


def test_lost_gpu_is_shown_not_a_crash(tmp_path: Path) -> None:
    env = with_fake_pynvml(tmp_path, {"gpus": [{}, {"lost": True}]})
    r = gtui_gpus(env=env)
    assert r.returncode == 0, r.stderr
    (row1,) = [line for line in r.stdout.splitlines() if line.lstrip().startswith("1 ")]
    assert "LOST" in row1 and "GPU is lost" in row1
    data = json.loads(gtui_gpus("--json", env=env).stdout)
    assert data[1]["mem_used_mib"] is None and data[0]["mem_used_mib"] == 0


def test_the_host_is_listed_under_the_table() -> None:
    r = gtui_gpus("--fake-gpus", "80G", env={"GTUI_FAKE_HOST": "16c/64G"})
    assert r.returncode == 0, r.stderr
    last = r.stdout.splitlines()[-1]
    assert last == "Host (simulated, GTUI_FAKE_HOST): 16 cores, RAM 0M of 64G used"
    real = gtui_gpus("--fake-gpus", "80G").stdout.splitlines()[-1]
    assert real.startswith(f"Host: {os.cpu_count()} cores, RAM ")


def test_power_from_nvml_in_the_table_and_the_json(tmp_path: Path) -> None:
    """A GPU that reports its power shows it; one that does not (NOT_SUPPORTED) reads n/a
    in the table and has no power keys in the document."""
    config = {
        "gpus": [
            {"power_mw": 212_400, "power_limit_mw": 400_000, "energy_mj": 10**9},
            {"name": "NVIDIA T4", "total_mib": 15360},
        ]
    }
    env = with_fake_pynvml(tmp_path, config)
    r = gtui_gpus("--json", env=env)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data[0]["power_w"] == 212.4 and data[0]["power_limit_w"] == 400.0
    assert "power_w" not in data[1] and list(data[1]) == KEYS
    assert "energy_mj" not in data[0]  # the counter moves at every read: not in the document
    r = gtui_gpus(env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    (header,) = [line for line in lines if line.startswith("GPU")]
    assert "POWER" in header.split()
    (row0,) = [line for line in lines if line.lstrip().startswith("0 ")]
    (row1,) = [line for line in lines if "NVIDIA T4" in line]
    assert "212 W / 400 W" in row0 and "n/a" in row1
