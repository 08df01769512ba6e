"""MIG: a GPU split into MIG instances shows as its instances, each with its own
memory; jobs are placed on instances by UUID, one job per instance. Simulated layouts in the
fake GPU layer, and the NVML code driven by the fake pynvml module."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from gtui.core.errors import GtuiError
from gtui.core.gpus.fake import FakeBackend
from gtui.core.gpus.nvml import NvmlBackend
from gtui.core.model import Settings
from gtui.core.sched.engine import Engine
from gtui.core.sched.policy import Candidate, place
from tests.commands.test_gpus_cli import gtui_gpus, with_fake_pynvml
from tests.conftest import write_queue
from tests.core.sched.test_engine import load_fake_pynvml, states
from tests.waiting import until

G = 1024
WAIT = "echo $CUDA_VISIBLE_DEVICES > {name}.dev; while [ ! -e release ]; do sleep 0.05; done"


def test_a_fake_gpu_split_into_instances() -> None:
    snap = FakeBackend("80G/40G+20G+10G,24G").read()
    assert [g.index for g in snap.gpus] == [1000, 1001, 1002, 1]
    assert [g.label for g in snap.gpus] == ["0:0", "0:1", "0:2", "1"]
    assert [g.mem_total_mib for g in snap.gpus] == [40 * G, 20 * G, 10 * G, 24 * G]
    mig = snap.gpus[:3]
    assert all(g.mig_parent == 0 and g.uuid.startswith("MIG-") for g in mig)
    assert len({g.uuid for g in mig}) == 3 and snap.gpus[1].util is None  # n/a per instance
    with pytest.raises(GtuiError, match="more than the GPU has"):
        FakeBackend("40G/40G+20G")
    with pytest.raises(GtuiError, match="not on its MIG instances"):
        FakeBackend("80G:10G/40G")


def test_gpus_command_lists_instances() -> None:
    r = gtui_gpus("--fake-gpus", "80G/40G+40G")
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()[2:]
    assert rows[0].split()[0] == "0:0" and "40G" in rows[0] and "MIG" in rows[0]
    data = json.loads(gtui_gpus("--json", "--fake-gpus", "80G/40G+40G").stdout)
    assert [(g["index"], g["mig_parent"]) for g in data] == [(1000, 0), (1001, 0)]


async def test_jobs_go_one_per_instance_by_uuid(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        mode = "pack"
        gpus = [0]   # the MIG GPU, by its index: its instances are the pool
        [[jobs]]
        name = "a"
        mem = "5G"
        cmd = "{WAIT.format(name="a")}"
        [[jobs]]
        name = "b"
        mem = "5G"
        cmd = "{WAIT.format(name="b")}"
        [[jobs]]
        name = "c"
        mem = "5G"
        cmd = "{WAIT.format(name="c")}"
        """,
    )
    engine = Engine(q, fake_gpus="80G/40G+20G,80G")
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: list(states(engine).values()).count("running") == 2, what="2 run")
        words = "none eligible (GPU0:0,0:1 ours (one job per MIG instance))"
        await until(lambda: words in engine.view("c").record.reason, what=words)
        assert states(engine)["c"] == "queued"  # pack mode, memory left: still one per instance
        snap = engine.gpus.snapshot if engine.gpus else None
        assert snap is not None
        uuids = {g.index: g.uuid for g in snap.gpus}
        for name in ("a", "b"):
            rec = engine.view(name).record
            (index,) = rec.gpus
            assert index in (1000, 1001)
            dev = tmp_path / f"{name}.dev"
            await until(lambda dev=dev: dev.exists() and dev.read_text().strip(), what="its env")
            assert dev.read_text().strip() == uuids[index]  # CUDA_VISIBLE_DEVICES=MIG-...
        assert {engine.view(n).record.gpus for n in ("a", "b")} == {(1000,), (1001,)}
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)
        task.cancel()


def test_a_multi_gpu_job_never_takes_mig_instances() -> None:
    snap = FakeBackend("80G/40G+40G,80G/40G+40G").read()
    now = time.time()
    two = Candidate(name="ddp", gpus=2, mem_mib=10 * G, priority=0, order=0, waiting_since=now)
    one = Candidate(name="one", gpus=1, mem_mib=10 * G, priority=0, order=1, waiting_since=now)
    d = place(snap, [two, one], [], Settings(), dep_states={}, running_count=0, now=now)
    assert [s.name for s in d.starts] == ["one"]


def test_nvml_shows_a_mig_gpu_as_its_instances(tmp_path: Path) -> None:
    nv = load_fake_pynvml()
    mig = [
        nv.FakeMig(uuid="MIG-aaaa", used_mib=3000, compute=[(4242, 3000)]),
        nv.FakeMig(name="NVIDIA A100-SXM4-80GB MIG 1g.10gb", uuid="MIG-bbbb", total_mib=9856),
    ]
    nv.fake_reset([nv.FakeGpu(mig=mig), nv.FakeGpu(name="NVIDIA T4", total_mib=15360)])
    try:
        snap = NvmlBackend(nvml=nv).read()
        assert snap.error is None
        a, b, t4 = snap.gpus
        assert (a.index, a.label, a.uuid, a.mig_parent) == (1000, "0:0", "MIG-aaaa", 0)
        assert (a.mem_total_mib, a.mem_used_mib) == (40192, 3000)
        assert [(p.pid, p.mem_mib) for p in a.processes] == [(4242, 3000)]
        assert (b.index, b.mem_total_mib, b.processes) == (1001, 9856, ())
        assert (t4.index, t4.mig_parent, t4.name) == (1, None, "NVIDIA T4")
        assert a.util is None and a.error is None  # n/a per instance, not an error
    finally:
        nv.fake_reset()


def test_gpus_command_on_nvml_mig(tmp_path: Path) -> None:
    config = {"gpus": [{"mig": [{"uuid": "MIG-aaaa"}, {"uuid": "MIG-bbbb", "used_mib": 100}]}]}
    r = gtui_gpus("--json", env=with_fake_pynvml(tmp_path, config))
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [(g["index"], g["uuid"], g["mem_used_mib"]) for g in data] == [
        (1000, "MIG-aaaa", 0),
        (1001, "MIG-bbbb", 100),
    ]


def test_settings_gpus_may_name_a_mig_gpu_by_its_index(tmp_path: Path) -> None:
    """``gpus = [0]`` on a GPU split into instances stands for its instances: validate checks
    a job's mem against the largest of them."""
    from tests.conftest import gtui

    q = write_queue(
        tmp_path,
        '[settings]\ngpus = [0]\n[[jobs]]\nname = "x"\ncmd = "true"\nmem = "30G"\n',
    )
    r = gtui("validate", str(q), "--fake-gpus", "80G/40G+20G")
    assert r.returncode == 0, r.stderr
    big = write_queue(tmp_path, '[settings]\ngpus = [0]\n[[jobs]]\ncmd = "x"\nmem = "50G"\n', "b.toml")
    r = gtui("validate", str(big), "--fake-gpus", "80G/40G+20G")
    assert r.returncode == 2 and "more than any GPU has (largest: 40G)" in r.stderr


def test_instances_that_cannot_be_read_leave_the_whole_gpu_row() -> None:
    """A driver that fails the MIG calls: the GPU is shown whole (never a crash, never
    nothing), and read as instances again once the calls work."""
    nv = load_fake_pynvml()
    nv.fake_reset([nv.FakeGpu(mig=[nv.FakeMig(uuid="MIG-aaaa")])])
    try:
        backend = NvmlBackend(nvml=nv)
        nv.fake_state.failing["nvmlDeviceGetMaxMigDeviceCount"] = nv.NVML_ERROR_UNKNOWN
        (whole,) = backend.read().gpus
        assert (whole.index, whole.mig_parent, whole.lost) == (0, None, False)
        del nv.fake_state.failing["nvmlDeviceGetMaxMigDeviceCount"]
        (instance,) = backend.read().gpus
        assert (instance.index, instance.uuid) == (1000, "MIG-aaaa")
    finally:
        nv.fake_reset()
