"""Simulated GPUs draw power with their utilization and count energy as NVML's counter does."""

from __future__ import annotations

from gtui.core.gpus.fake import FakeBackend
from gtui.core.gpus.fakeenergy import IDLE_SHARE, fake_power_w, fake_tdp_w
from gtui.core.gpus.snapshot import JobUsage


def test_power_is_the_idle_floor_plus_the_tdp_share_of_utilization() -> None:
    assert fake_tdp_w(80 * 1024) == 400.0 and fake_tdp_w(13 * 1024) == 300.0
    assert fake_power_w(400.0, 0) == 400.0 * IDLE_SHARE
    assert fake_power_w(400.0, 100) == 400.0
    assert fake_power_w(400.0, 50) == 400.0 * IDLE_SHARE + 400.0 * (1 - IDLE_SHARE) / 2


def test_a_busy_gpu_draws_more_and_its_counter_only_grows() -> None:
    backend = FakeBackend("80G,80G@35,80G/40G+40G")
    job = JobUsage(pid=4242, gpus=(0,), mem_mib=None, name="train")
    before = backend.read([job])
    after = backend.read([job])
    g0, g1 = after.gpus[0], after.gpus[1]
    assert g0.util == 90 and g0.power_w == fake_power_w(400.0, 90)
    assert g1.power_w == fake_power_w(400.0, 35) and g0.power_limit_w == 400.0
    assert g0.to_json()["power_w"] == g0.power_w
    assert before.gpus[0].energy_mj is not None and g0.energy_mj is not None
    assert g0.energy_mj >= before.gpus[0].energy_mj
    mig = after.gpus[2]  # a MIG instance: NVML reports power for the whole GPU only
    assert mig.mig_parent == 2 and mig.power_w is None and mig.energy_mj is None
