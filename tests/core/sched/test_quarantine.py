"""A GPU hardware fault takes the GPU out of placement until a person clears it.

Real jobs on simulated GPUs: the first attempt of a job prints what a GPU with an uncorrectable
ECC error makes PyTorch print, and fails. Its GPU is quarantined, the job's retry runs on another
GPU, no later job is placed on the bad one, a restarted scheduler remembers it, and clearing it
makes it usable again.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from gtui.core.model import Diagnosis, JobRecord
from gtui.core.sched.engine import Engine
from gtui.core.sched.quarantine import Quarantine, faulty_gpus
from tests.waiting import until

ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"

QUEUE = f"""\
[settings]
mode = "exclusive"

[[jobs]]
name = "hit"
gpus = 1
retries = 1
cmd = '''if [ "$GTUI_ATTEMPT" = 1 ]; then echo "{ECC}"; exit 1; fi; echo ok'''
"""


def state(engine: Engine, name: str) -> str:
    return engine.view(name).record.state.value


async def test_a_gpu_fault_quarantines_the_gpu_and_the_retry_runs_elsewhere(
    tmp_path: Path,
) -> None:
    q = tmp_path / "q.toml"
    q.write_text(QUEUE)
    engine = Engine(q, fake_gpus="2x80G", control=False)
    run = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.started and state(engine, "hit") == "done", what="hit done")
        rec = engine.view("hit").record
        assert rec.attempt == 2
        bad = set(engine.quarantined)
        assert len(bad) == 1, engine.quarantined
        assert set(rec.gpus).isdisjoint(bad), "the retry must run on another GPU"
        # Later jobs never land on it either.
        q.write_text(
            QUEUE
            + "\n".join(
                f'[[jobs]]\nname = "later{i}"\ngpus = 1\ncmd = "echo later"\n' for i in range(3)
            )
        )
        await until(
            lambda: (
                all(
                    state(engine, f"later{i}") == "done"
                    for i in range(3)
                    if f"later{i}" in {v.spec.name for v in engine.jobs()}
                )
                and len(engine.jobs()) == 4
            ),
            what="the later jobs done",
        )
        for i in range(3):
            assert set(engine.view(f"later{i}").record.gpus).isdisjoint(bad)
    finally:
        await engine.shutdown(kill_jobs=True)
        run.cancel()

    # A new scheduler keeps the quarantine; clearing it gives the GPU back.
    again = Engine(q, fake_gpus="2x80G", control=False)
    await again.start()
    try:
        assert set(again.quarantined) == bad
        assert await again.clear_quarantine(None) == sorted(bad)
        assert again.quarantined == {}
    finally:
        await again.shutdown()


def test_the_faulty_gpu_is_the_one_the_log_names() -> None:
    rec = JobRecord(name="ddp", gpus=(4, 6))
    named = Diagnosis("gpu_fault", "CUDA error: uncorrectable ECC error encountered on cuda:1", "")
    # Isolated, the job's device 1 is its second GPU: physical 6.
    assert faulty_gpus(rec, named, isolated=True) == (6,)
    unnamed = Diagnosis("gpu_fault", "GPU has fallen off the bus", "")
    assert faulty_gpus(rec, unnamed, isolated=True) == (4, 6)
    single = JobRecord(name="one", gpus=(2,))
    assert faulty_gpus(single, named, isolated=True) == (2,)


def test_a_quarantine_without_a_store_still_excludes() -> None:
    from gtui.core.model import Settings

    quarantine = Quarantine(None)
    assert quarantine.add([1], "ECC", "hit") == [1]
    assert quarantine.add([1], "ECC", "hit") == []
    # by the pool's own numbers, never the file's exclude (on a cluster a number there is
    # that GPU on every node)
    assert quarantine.apply(Settings(pool_exclude=(3,))).pool_exclude == (3, 1)
    assert quarantine.apply(Settings(exclude=(3,))).exclude == (3,)
    assert quarantine.clear([1]) == [1] and quarantine.apply(Settings()).pool_exclude == ()


def test_gtui_quarantine_lists_and_clears_with_no_scheduler(tmp_path: Path) -> None:
    """The command line, on the saved state: what a scheduler quarantined is listed, and
    --clear gives it back (the next scheduler places on it again)."""
    import subprocess
    import sys

    q = tmp_path / "q.toml"
    q.write_text(QUEUE)

    async def hit() -> None:
        engine = Engine(q, fake_gpus="2x80G", control=False)
        run = asyncio.create_task(engine.run(exit_when_idle=True))
        await until(lambda: engine.started and state(engine, "hit") == "done", what="done")
        await run

    asyncio.run(hit())

    def gtui(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gtui", *args], capture_output=True, text=True, cwd=tmp_path
        )

    listed = gtui("quarantine", "q.toml")
    assert listed.returncode == 0 and "after hit:" in listed.stdout and "ECC" in listed.stdout
    gpu = listed.stdout.split()[1].rstrip(":")
    cleared = gtui("quarantine", "q.toml", "--clear", gpu)
    assert cleared.returncode == 0 and f"GPU {gpu} back in placement" in cleared.stdout
    assert "is quarantined" in gtui("quarantine", "q.toml").stdout
    assert gtui("quarantine", "q.toml", "--clear", "x").returncode == 2


def test_a_quarantined_gpu_says_so_on_its_bar() -> None:
    from gtui.core.gpus.snapshot import GpuInfo
    from gtui.core.model import Settings
    from gtui.ui.format import gpu_line
    from gtui.ui.widgets.gpu_panel import gpu_marks

    gpu = GpuInfo(1, "Fake A800", "GPU-1", 81920, 0, 0, 30)
    marks = gpu_marks(1, Settings(), (), quarantined=(1,))
    assert "QUARANTINED" in gpu_line(gpu, marks=marks).plain
    assert "QUARANTINED" not in gpu_line(gpu, marks=gpu_marks(1, Settings(), ())).plain


async def test_the_dashboard_gives_a_quarantined_gpu_back_after_asking(tmp_path: Path) -> None:
    from gtui.ui.app import GtuiApp
    from gtui.ui.screens.confirm import ConfirmScreen
    from tests.waiting import pilot_until as shown

    q = tmp_path / "q.toml"
    q.write_text(QUEUE)
    first = Engine(q, fake_gpus="2x80G", control=False, dispatch=False)
    await first.start()
    first._quarantine.add([1], ECC, "hit")  # as a hardware fault there would have
    await first.shutdown()

    engine = Engine(q, fake_gpus="2x80G", control=False, dispatch=False)
    app = GtuiApp(engine, host="testhost")
    async with app.run_test(size=(120, 30)) as pilot:
        await shown(pilot, lambda: engine.gpus is not None and engine.gpus.quarantined == (1,))
        app.main.action_clear_quarantine()
        await shown(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the question")
        await pilot.press("c")
        await shown(pilot, lambda: engine.quarantined == {}, what="GPU 1 given back")
        await app.action_quit()
