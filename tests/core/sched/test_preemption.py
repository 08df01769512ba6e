"""Preemption on real processes and fake GPUs: a waiting job of higher priority stops a
preemptible one, which traps its signal, saves a checkpoint and resumes from it; a job that
ignores the signal is killed after its grace; the preemptor never starts while its victim's
process lives; a neighbour's memory is never taken for ours to stop."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import psutil

from gtui.commands.status import render
from gtui.core.errors import GtuiError
from gtui.core.model import JobState
from gtui.core.sched.engine import Engine
from gtui.core.state.history import attempts
from gtui.core.state.status import job_dict, status_dict
from tests.conftest import REPO, gtui
from tests.waiting import until

TRAINER = REPO / "sample_queues" / "mock_trainer.py"
# The urgent job's command: which of the victim's processes (pids in the file named) still
# live as it starts ("urgent ran, alive: []" when none).
CHECK = Path(__file__).with_name("victims_alive.py")


def _queue(tmp_path: Path, trainer_cmd: str, *, urgent: bool, fake: str = "1x80G") -> Path:
    q = tmp_path / "q.toml"
    jobs = f"""
[settings]
poll = "0.1s"
kill_grace = "2s"
fake_gpus = "{fake}"

[[jobs]]
name = "train"
cmd = '''{trainer_cmd}'''
mem = "60G"
preemptible = true
grace = "1s"
requeue_exit = 3
"""
    if urgent:
        jobs += f"""
[[jobs]]
name = "urgent"
cmd = "{sys.executable} {CHECK} {tmp_path}/victim.pids >> {tmp_path}/urgent.out"
mem = "60G"
priority = 5
"""
    q.write_text(jobs)
    return q


async def _start_with_trainer(
    tmp_path: Path, cmd: str, fake: str = "1x80G"
) -> tuple[Engine, asyncio.Task[int]]:
    q = _queue(tmp_path, cmd, urgent=False, fake=fake)
    engine = Engine(q)
    task = asyncio.create_task(engine.run(exit_when_idle=True))
    await until(
        lambda: (
            engine.view("train").record.state is JobState.RUNNING
            and (tmp_path / "started").exists()
        ),
        what="the trainer running",
        ignoring=(GtuiError,),
    )
    pid = engine.view("train").record.pid
    assert pid is not None
    pids = {pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))}
    (tmp_path / "victim.pids").write_text(" ".join(map(str, pids)))
    _queue(tmp_path, cmd, urgent=True, fake=fake)  # the urgent job joins the queue
    return engine, task


async def test_the_victim_checkpoints_and_resumes_and_the_preemptor_waits_for_it(
    tmp_path: Path,
) -> None:
    ckpt = tmp_path / "ckpt"
    cmd = f"touch {tmp_path}/started; exec {sys.executable} {TRAINER} {ckpt} 60 0.1"
    engine, task = await _start_with_trainer(tmp_path, cmd)
    assert await asyncio.wait_for(task, 60) == 0
    train = engine.view("train").record
    assert train.state is JobState.DONE and train.attempt == 2
    assert train.preemptions == 1 and train.preempted_by == "urgent"
    assert train.preempted_at is not None
    history = attempts(engine.parts.runner.paths.db, "train")
    assert [a.state for a in history] == ["preempted", "done"]
    second_log = Path(history[1].log or "").read_text()
    saved = int(ckpt.read_text())
    assert f"resumed at step {saved} (preempted 1 times)" in second_log
    assert (tmp_path / "urgent.out").read_text() == "urgent ran, alive: []\n"


async def test_a_job_that_ignores_the_signal_is_killed_after_its_grace(tmp_path: Path) -> None:
    cmd = f"trap '' USR1; touch {tmp_path}/started; sleep 300"
    engine, task = await _start_with_trainer(tmp_path, cmd)
    # While its victim has its grace, the preemptor's reason says whom it stops.
    await until(
        lambda: engine.view("urgent").record.reason.startswith("will preempt train"),
        ignoring=(GtuiError,),
        what="the preemptor's reason",
    )
    await until(lambda: (tmp_path / "urgent.out").exists(), timeout=60, what="the urgent job's run")
    await engine.kill(["train"])
    await asyncio.wait_for(task, 60)
    history = attempts(engine.parts.runner.paths.db, "train")
    assert history[0].state == "preempted"
    assert history[0].signal is not None  # it ended by the kill, not by itself
    assert (tmp_path / "urgent.out").read_text() == "urgent ran, alive: []\n"


async def test_a_neighbours_memory_is_never_ours_to_stop(tmp_path: Path) -> None:
    """GPU 0 is full of another user's memory; ours runs on GPU 1. The urgent job needs 60G:
    stopping ours frees GPU 1, so ours is the one stopped and the urgent job runs on GPU 1;
    the neighbour's memory on GPU 0 stays counted."""
    ckpt = tmp_path / "ckpt"
    cmd = f"touch {tmp_path}/started; exec {sys.executable} {TRAINER} {ckpt} 40 0.1"
    engine, task = await _start_with_trainer(tmp_path, cmd, fake="80G:70G,80G")
    assert await asyncio.wait_for(task, 60) == 0
    urgent = attempts(engine.parts.runner.paths.db, "urgent")
    assert [a.gpus for a in urgent] == [(1,)]
    assert engine.view("train").record.preempted_by == "urgent"


async def test_status_and_report_show_the_preemption(tmp_path: Path) -> None:
    """`gtui status` shows a preempted job as `preempted` (text) with who and when (JSON);
    `gtui report` counts the GPU-hours its stopped attempt held as lost to preemption."""
    ckpt = tmp_path / "ckpt"
    cmd = f"touch {tmp_path}/started; exec {sys.executable} {TRAINER} {ckpt} 60 0.1"
    engine, task = await _start_with_trainer(tmp_path, cmd)
    await until(
        lambda: engine.view("train").record.requeued_as == "preempted",
        timeout=60,
        what="the trainer preempted",
    )
    view = engine.view("train")
    doc = job_dict(view)
    assert doc["requeued_as"] == "preempted" and doc["preempted_by"] == "urgent"
    assert doc["preemptions"] == 1 and doc["preempted_at"] is not None
    if view.record.state is JobState.QUEUED:  # (it may have started again already)
        head = status_dict(tmp_path / "q.toml", False, [], [view])
        (row,) = [line for line in render(head) if line.strip().startswith("train")]
        assert row.split()[1] == "preempted" and "preempted by urgent" in row
    assert await asyncio.wait_for(task, 60) == 0
    out = gtui("report", str(tmp_path / "q.toml"), "--json")
    assert out.returncode == 0, out.stderr
    lost = json.loads(out.stdout)["total"]["lost_gpu_hours"]
    assert set(lost) == {"preempted"} and lost["preempted"] > 0
    text = gtui("report", str(tmp_path / "q.toml")).stdout
    assert "preempted" in text and "no fault of the jobs" in text


async def test_make_room_now_names_the_victims_first_then_stops_them(tmp_path: Path) -> None:
    """The operation behind the dashboard's key and `gtui preempt`: a dry run names the
    victims and stops nothing; then it stops them, even while the queue is paused."""
    ckpt = tmp_path / "ckpt"
    cmd = f"touch {tmp_path}/started; exec {sys.executable} {TRAINER} {ckpt} 100 0.1"
    q = _queue(tmp_path, cmd, urgent=False)
    engine = Engine(q)
    task = asyncio.create_task(engine.run(exit_when_idle=True))
    await until(lambda: (tmp_path / "started").exists(), what="the trainer running")
    await engine.pause_queue()
    (tmp_path / "victim.pids").write_text("")
    _queue(tmp_path, cmd, urgent=True)
    await until(lambda: _known(engine, "urgent"), what="the urgent job taken in")
    assert await engine.preempt("urgent", dry_run=True) == ["train"]
    assert engine.view("train").record.preempt_for is None  # nothing stopped
    assert await engine.preempt("urgent") == ["train"]
    assert engine.view("train").record.preempt_for == "urgent"  # its stop under way
    await engine.resume_queue()
    code = await asyncio.wait_for(task, 60)
    assert code == 0, [(v.record.name, v.record.state, v.record.diagnosis) for v in engine.jobs()]
    assert engine.view("train").record.preempted_by == "urgent"


def _known(engine: Engine, name: str) -> bool:
    try:
        engine.view(name)
    except (GtuiError, KeyError):
        return False
    return True


def test_gtui_preempt_needs_a_running_scheduler(tmp_path: Path) -> None:
    q = _queue(tmp_path, "sleep 1", urgent=True)
    out = gtui("preempt", str(q), "urgent")
    assert out.returncode == 2 and "no scheduler runs q.toml" in out.stderr
