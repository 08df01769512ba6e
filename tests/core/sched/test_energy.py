"""Each attempt's GPU energy, measured by the scheduler on simulated GPUs (real jobs, real
processes): the energy counter read at an attempt's start and end, summed over a retried
job's attempts, and an attempt marked shared when another job used its GPU meanwhile."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gtui.core.sched.engine import Engine
from gtui.core.state.history import attempts
from tests.waiting import until

# Each attempt says it started, then runs until the test lets it go; the first one fails.
CMD = (
    'touch "started.$GTUI_JOB.$GTUI_ATTEMPT"; '
    'while [ ! -f "go.$GTUI_JOB.$GTUI_ATTEMPT" ]; do sleep 0.05; done; '
    '[ "$GTUI_ATTEMPT" -gt 1 ]'
)


def state(engine: Engine, name: str) -> str:
    return engine.view(name).record.state.value


async def run_through_polls(engine: Engine, tmp: Path, name: str, attempt: int) -> None:
    """Let attempt ``attempt`` of ``name`` end once the GPUs were read well after it began,
    so its counter has risen between the readings at its start and at its end."""
    await until((tmp / f"started.{name}.{attempt}").exists, what=f"{name} #{attempt} started")
    began = engine.view(name).record.started_at
    assert began is not None
    await until(
        lambda: engine.gpus is not None and engine.gpus.snapshot.taken_at > began + 0.5,
        what="a GPU reading half a second into the attempt",
    )
    (tmp / f"go.{name}.{attempt}").write_text("")


async def test_a_retried_jobs_energy_is_each_attempts_counter_rise(tmp_path: Path) -> None:
    q = tmp_path / "q.toml"
    q.write_text(
        f"""[settings]
fake_gpus = "80G,80G"
poll = "0.1s"

[[jobs]]
name = "train"
gpus = 1
retries = 1
cmd = '{CMD}'
"""
    )
    engine = Engine(q, control=False)
    run = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.started, what="started")
        await run_through_polls(engine, tmp_path, "train", 1)
        await run_through_polls(engine, tmp_path, "train", 2)
        await until(lambda: state(engine, "train") == "done", what="the retry done")
        tries = attempts(engine.paths.db, "train")
        assert [a.state for a in tries] == ["queued", "done"]  # the first failed, retried
        for a in tries:
            assert a.energy_kwh is not None and a.energy_kwh > 0, a
            assert not a.energy_shared  # alone on its GPU
        gpus = engine.gpus
        assert gpus is not None
        power = {g.index: g.power_w for g in gpus.snapshot.gpus}
        assert all(w is not None and w > 0 for w in power.values()), power
    finally:
        await engine.shutdown(kill_jobs=True)
        run.cancel()


async def test_two_jobs_on_one_gpu_each_get_the_gpus_energy_marked_shared(
    tmp_path: Path,
) -> None:
    q = tmp_path / "q.toml"
    body = "".join(
        f"""
[[jobs]]
name = "{name}"
gpus = 1
mem = "10G"
cmd = '{CMD.replace('[ "$GTUI_ATTEMPT" -gt 1 ]', "true")}'
"""
        for name in ("a", "b")
    )
    q.write_text('[settings]\nmode = "pack"\nfake_gpus = "80G"\npoll = "0.1s"\n' + body)
    engine = Engine(q, control=False)
    run = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.started, what="started")
        await until(
            lambda: state(engine, "a") == state(engine, "b") == "running", what="both running"
        )
        await run_through_polls(engine, tmp_path, "a", 1)
        await run_through_polls(engine, tmp_path, "b", 1)
        await until(lambda: state(engine, "a") == state(engine, "b") == "done", what="done")
        for name in ("a", "b"):
            (a,) = attempts(engine.paths.db, name)
            assert a.energy_kwh is not None and a.energy_kwh > 0
            assert a.energy_shared, name
    finally:
        await engine.shutdown(kill_jobs=True)
        run.cancel()
