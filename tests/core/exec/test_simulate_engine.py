"""The simulator's second path: whole workloads through the real scheduler on the in-memory
executor (the executor interface is enough to run a queue with no process).

``benchmarks.simulate.simulate_engine`` builds an ``Engine`` on a real queue file and fake GPUs
whose other users come and go (an ``@FILE`` spec), with ``MemoryExecutor`` in place of processes.
These tests hold it to what the event simulation says, without any timed assertion: every job
runs exactly once, in the memory executor only, and no GPU ever holds more than it has.
"""

from __future__ import annotations

import pytest

from benchmarks import simulate as sim
from gtui.core.exec.local import LocalExecutor
from gtui.core.exec.memory import MemoryExecutor
from gtui.core.model import Mode, Placement, Settings

GIB = 1024


@pytest.fixture(autouse=True)
def _no_real_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real launch here would mean the simulator left the memory executor."""

    def refuse(self: LocalExecutor, req: object) -> None:
        raise AssertionError(f"a real process was launched: {req!r}")

    monkeypatch.setattr(LocalExecutor, "launch", refuse)


def test_a_packed_workload_runs_every_job_once_through_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launched: list[MemoryExecutor] = []
    real_init = MemoryExecutor.__init__

    def keep(self: MemoryExecutor, *a: object, **kw: object) -> None:
        real_init(self, *a, **kw)  # type: ignore[arg-type]
        launched.append(self)

    monkeypatch.setattr(MemoryExecutor, "__init__", keep)
    jobs = [sim.SimJob(f"j{i:02d}", 1, 30 * GIB, 60.0 + 10 * i) for i in range(12)]
    jobs.append(sim.SimJob("two", 2, 50 * GIB, 120.0))
    jobs.append(sim.SimJob("last", 0, None, 30.0, after=("two",)))
    settings = Settings(mode=Mode.PACK, placement=Placement.BEST_FIT)
    # another user takes 40G of GPU 1 a while after the start, and leaves
    others = [(0.0, "2x80G"), (100.0, "80G,80G:40G"), (400.0, "2x80G")]

    result = sim.simulate_engine(jobs, "2x80G", settings, others, real_s_per_sim_s=2e-3)

    assert result.unfinished == 0
    assert len(launched) == 1
    executor = launched[0]
    names = [req.name for req in executor.launched]
    assert sorted(names) == sorted(j.name for j in jobs), "every job ran exactly once"
    assert names.index("last") > names.index("two"), "`after` was kept"
    gpus_of = {req.name: req.env.get("CUDA_VISIBLE_DEVICES") for req in executor.launched}
    assert gpus_of["two"] in ("0,1", "1,0") and gpus_of["last"] == ""
    assert result.makespan_s > 0 and result.ours_gpu_h > 0


def test_the_sample_sweep_gives_the_event_simulations_order_of_starts() -> None:
    """Same policy, same inputs: the scheduler starts the sample sweep's jobs on the GPUs the
    event simulation picks (counts per GPU), and runs them all."""
    jobs, spec, settings = sim.sample_sweep()
    pure = sim.simulate(jobs, spec, settings)
    through = sim.simulate_engine(jobs, spec, settings, real_s_per_sim_s=5e-3)
    assert through.unfinished == 0 and pure.unfinished == 0
    assert sum(pure.starts_per_gpu.values()) == len([j for j in jobs if j.gpus])
    assert through.starts_per_gpu == pure.starts_per_gpu
