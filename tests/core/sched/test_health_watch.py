"""The health watch takes a failing GPU out before it eats the queue.

Real jobs on simulated GPUs whose spec is a file (``fake_gpus = "@gpus.txt"``), rewritten
mid-run to inject a fault: the GPU is quarantined, its job is stopped and queued again with no
retry spent (and ``GTUI_RESUME=1`` on its next attempt), it finishes on the other GPU, and the
other GPU's job is untouched. ``health_recheck`` gives a GPU back once it reads clean.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from gtui.core.api import Event, Notice
from gtui.core.sched.engine import Engine
from gtui.core.state.history import attempts
from tests.waiting import until

# Each job notes its GTUI_RESUME per attempt, then runs until the test lets it end.
CMD = (
    'echo "r=$GTUI_RESUME" > "resume_$GTUI_JOB.$GTUI_ATTEMPT"; '
    "while [ ! -f release ]; do sleep 0.05; done"
)
QUEUE = f"""\
[settings]
mode = "exclusive"
fake_gpus = "@gpus.txt"
poll = "0.1s"
{{extra}}

[[jobs]]
name = "a"
gpus = 1
cmd = '{CMD}'

[[jobs]]
name = "b"
gpus = 1
cmd = '{CMD}'
"""


def state(engine: Engine, name: str) -> str:
    return engine.view(name).record.state.value


async def test_a_fault_injected_mid_run_requeues_its_job_onto_the_other_gpu(
    tmp_path: Path,
) -> None:
    (tmp_path / "gpus.txt").write_text("80G,80G\n")
    q = tmp_path / "q.toml"
    told = tmp_path / "told"
    notify = f'\n[notify]\ncommand = "echo \\"$GTUI_EVENT|$GTUI_MESSAGE\\" >> {told}"\n'
    q.write_text(QUEUE.replace("{extra}", "") + notify)
    engine = Engine(q, control=False)
    notices: list[str] = []

    def sink(event: Event) -> None:
        if isinstance(event, Notice):
            notices.append(event.text)

    run = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.started, what="started")
        engine.subscribe(sink)
        await until(
            lambda: state(engine, "a") == state(engine, "b") == "running", what="both running"
        )
        on = {engine.view(n).record.gpus: n for n in ("a", "b")}
        victim, bystander = on[(0,)], on[(1,)]
        (tmp_path / "gpus.txt").write_text("80G!xid79,80G\n")
        await until(
            lambda: 0 in engine.quarantined and state(engine, victim) == "queued",
            what="GPU 0 quarantined, its job queued again",
        )
        assert state(engine, bystander) == "running"
        assert engine.view(bystander).record.attempt == 1
        words = (
            "GPU 0: Xid 79 (fell off the bus): hardware, not your code; its jobs were queued again"
        )
        assert engine.quarantined[0]["why"] == words
        assert any(words in n for n in notices), notices
        rec = engine.view(victim).record
        assert rec.diagnosis is not None and rec.diagnosis.kind == "gpu_fault"
        (tmp_path / "release").write_text("")
        await until(
            lambda: state(engine, victim) == state(engine, bystander) == "done", what="both done"
        )
        rec = engine.view(victim).record
        assert rec.gpus == (1,) and rec.attempt == 2
        assert rec.attempt - rec.first_attempt == 0, "no retry spent (retries = 0 and it ran)"
        assert engine.view(bystander).record.gpus == (1,)
        assert engine.view(bystander).record.attempt == 1
        assert (tmp_path / f"resume_{victim}.1").read_text().strip() == "r="
        assert (tmp_path / f"resume_{victim}.2").read_text().strip() == "r=1"
        assert (tmp_path / f"resume_{bystander}.1").read_text().strip() == "r="
        first = attempts(engine.paths.db, victim)[0]
        assert first.attempt == 1 and first.diag_kind == "gpu_fault" and first.gpus == (0,)
        status = engine.status_json()
        assert status["quarantined"]["0"]["why"] == words
        assert status["gpus"][0]["health"]["xids"] == [79]
        await until(told.exists, what="the [notify] command run")
        assert told.read_text().splitlines()[0] == f"failure|{words}"
    finally:
        await engine.shutdown(kill_jobs=True)
        run.cancel()

    def gtui(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gtui", *args], capture_output=True, text=True, cwd=tmp_path
        )

    shown = gtui("status", "q.toml")
    assert f"QUARANTINED: {words}" in shown.stdout, shown.stdout + shown.stderr
    listed = gtui("quarantine", "q.toml")
    assert listed.returncode == 0, listed.stderr
    assert "GPU 0:" in listed.stdout and "Xid 79 (fell off the bus)" in listed.stdout
    cleared = gtui("quarantine", "q.toml", "--clear", "0")
    assert "GPU 0 back in placement" in cleared.stdout
    assert "is quarantined" in gtui("quarantine", "q.toml").stdout


async def test_health_recheck_gives_a_gpu_back_once_it_reads_clean(tmp_path: Path) -> None:
    (tmp_path / "gpus.txt").write_text("80G!ecc,80G\n")
    (tmp_path / "release").write_text("")  # jobs end at once
    q = tmp_path / "q.toml"
    q.write_text(QUEUE.replace("{extra}", 'health_recheck = "0.2s"'))
    engine = Engine(q, control=False)
    run = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.started and 0 in engine.quarantined, what="GPU 0 out")
        assert "uncorrectable ECC" in str(engine.quarantined[0]["why"])
        assert "no job of ours was on it" in str(engine.quarantined[0]["why"])
        await until(lambda: state(engine, "a") == state(engine, "b") == "done", what="done")
        # Still failing: not given back, however often it is checked.
        assert 0 in engine.quarantined
        (tmp_path / "gpus.txt").write_text("80G,80G\n")
        await until(lambda: 0 not in engine.quarantined, what="GPU 0 back after a clean check")
    finally:
        await engine.shutdown(kill_jobs=True)
        run.cancel()


async def test_without_health_recheck_a_gpu_stays_out(tmp_path: Path) -> None:
    """Off by default: a clean reading alone gives nothing back (a person clears it)."""
    (tmp_path / "gpus.txt").write_text("80G!lost,80G\n")
    (tmp_path / "release").write_text("")
    q = tmp_path / "q.toml"
    q.write_text(QUEUE.replace("{extra}", ""))
    engine = Engine(q, control=False)
    run = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.started and 0 in engine.quarantined, what="GPU 0 out")
        (tmp_path / "gpus.txt").write_text("80G,80G\n")
        await until(lambda: state(engine, "a") == state(engine, "b") == "done", what="done")
        assert engine.view("a").record.gpus == engine.view("b").record.gpus == (1,)
        assert 0 in engine.quarantined
    finally:
        await engine.shutdown(kill_jobs=True)
        run.cancel()


def test_gtui_gpus_says_a_faulty_gpu_plainly(tmp_path: Path) -> None:
    def gpus(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gtui", "--fake-gpus", "80G!xid79,80G!ecc,80G", "gpus", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
        )

    text = gpus().stdout
    assert "GPU 0: Xid 79 (fell off the bus): hardware, not your code" in text
    assert "GPU 1: 1 uncorrectable ECC errors: hardware, not your code" in text
    assert "GPU 2:" not in text
    doc = json.loads(gpus("--json").stdout)
    assert doc[0]["health"]["xids"] == [79] and doc[1]["health"]["ecc_uncorrected"] == 1
    assert "health" not in doc[2]  # a healthy simulated GPU reads none (n/a)


def test_the_gpu_bar_and_the_alerts_say_it_was_the_hardware() -> None:
    from gtui.core.gpus.health import GpuHealth
    from gtui.core.gpus.snapshot import GpuInfo
    from gtui.ui.alerts import fault_events
    from gtui.ui.format import gpu_line

    sick = GpuInfo(0, "Fake A800", "GPU-0", 81920, 0, 0, 30, health=GpuHealth(xids=(79,)))
    assert "Xid 79 (fell off the bus): hardware, not your code" in gpu_line(sick).plain
    well = GpuInfo(1, "Fake A800", "GPU-1", 81920, 0, 0, 30, health=GpuHealth(xids=(13,)))
    assert "hardware" not in gpu_line(well).plain
    words = "GPU 0: Xid 79 (fell off the bus): hardware, not your code; its jobs were queued again"
    said = [("error", words), ("error", "something else"), ("info", "reloaded")]
    assert fault_events(said, ["failure"]) == [f"gtui: {words}"]
    assert fault_events(said, ["end"]) == []


def test_health_recheck_is_read_as_a_duration_or_off(tmp_path: Path) -> None:
    from gtui.core.errors import GtuiError
    from gtui.core.queue.reader import load_queue

    def recheck(value: str) -> float | None:
        q = tmp_path / "q.toml"
        q.write_text(f'[settings]\nhealth_recheck = {value}\n[[jobs]]\ncmd = "true"\n')
        return load_queue(q).settings.health_recheck_s

    assert recheck('"10m"') == 600.0
    assert recheck('"off"') is None
    assert recheck("0") is None
    try:
        recheck('"soon"')
    except GtuiError as e:
        assert "health_recheck" in str(e)
    else:
        raise AssertionError("a bad duration must be refused")


async def test_on_nvml_not_supported_never_quarantines_and_a_lost_gpu_does(
    tmp_path: Path,
) -> None:
    """The scheduler on the NVML backend (the fake pynvml): every health field NOT_SUPPORTED
    for poll after poll takes nothing out; a GPU lost for a moment neither; one that stays
    lost (GPU_IS_LOST) is quarantined."""
    from gtui.core.api import GpusRead
    from gtui.core.gpus.nvml import LOST_FAULT_S, NvmlBackend
    from tests.core.gpus.test_gpus_nvml import Clock, nv

    nv.fake_reset([nv.FakeGpu(), nv.FakeGpu()])
    for gpu in nv.fake_state.gpus:
        gpu.ecc_uncorrected = gpu.retired_pending = gpu.remap_pending = gpu.clock_reasons = None
        gpu.events = False
    clock = Clock()
    q = tmp_path / "q.toml"
    q.write_text('[settings]\npoll = "0.05s"\n[[jobs]]\nname = "a"\ngpus = 1\ncmd = "true"\n')
    engine = Engine(q, backend=NvmlBackend(nvml=nv, clock=clock, retry_s=1.0), control=False)
    reads: list[GpusRead] = []
    run = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.started, what="started")
        engine.subscribe(lambda e: reads.append(e) if isinstance(e, GpusRead) else None)
        await until(lambda: state(engine, "a") == "done", what="a done")
        mark = len(reads)
        await until(lambda: len(reads) >= mark + 5, what="five more polls")
        assert engine.quarantined == {}, "NOT_SUPPORTED is n/a, never a fault"
        nv.fake_set_lost(1)
        mark = len(reads)
        await until(
            lambda: sum(g.lost for r in reads[mark:] for g in r.snapshot.gpus) >= 3,
            what="three polls with GPU 1 lost",
        )
        assert engine.quarantined == {}, "lost for a moment: retried, not quarantined"
        clock.now += LOST_FAULT_S
        await until(lambda: 1 in engine.quarantined, what="GPU 1 quarantined")
        assert "GPU 1: fell off the bus (GPU is lost): hardware, not your code" in str(
            engine.quarantined[1]["why"]
        )
        assert 0 not in engine.quarantined
    finally:
        await engine.shutdown(kill_jobs=True)
        run.cancel()
        nv.fake_reset()


def test_the_fake_spec_reads_each_fault_and_says_a_bad_one_clearly() -> None:
    from gtui.core.errors import GtuiError
    from gtui.core.gpus.fake import FakeBackend, parse_fake_spec

    gpus = parse_fake_spec("2x80G@35!xid48!ecc,24G/12G+12G!lost,80G")
    assert [g.faults for g in gpus] == [("xid48", "ecc"), ("xid48", "ecc"), ("lost",), ()]
    assert gpus[0].others_util == 35 and gpus[2].mig == (12288, 12288)
    read = FakeBackend("80G!lost,80G/40G+40G!xid79").read().gpus
    assert read[0].lost and read[0].health is not None and read[0].health.lost
    assert [g.health.xids for g in read[1:] if g.health] == [(79,), (79,)]  # each instance
    try:
        parse_fake_spec("80G!boom")
    except GtuiError as e:
        assert "unknown fault !boom (faults are !xidN such as !xid79, !ecc, !lost)" in str(e)
    else:
        raise AssertionError("an unknown fault must be refused")
