"""Stops that are not the job's fault, on real processes and fake GPUs: its own requeue_exit
code (a checkpoint-and-continue loop) and its cap, a reboot seen through a changed boot id,
and the warning signal ahead of a time limit. Each requeue spends no retry and tells the next
attempt GTUI_RESUME=1."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from gtui.core.errors import GtuiError
from gtui.core.model import JobState
from gtui.core.sched import requeue
from gtui.core.sched.engine import Engine
from gtui.core.state.history import attempts
from tests.conftest import write_queue
from tests.waiting import until


async def run_to_end(engine: Engine, timeout: float = 60.0) -> int:
    return await asyncio.wait_for(engine.run(exit_when_idle=True), timeout)


def _db(engine: Engine) -> Path:
    return engine.parts.runner.paths.db


async def test_requeue_exit_loops_without_spending_retries(tmp_path: Path) -> None:
    """A job that exits with its requeue_exit code is queued again (no retry: retries = 0),
    each next attempt sees GTUI_RESUME=1, and the loop ends when it exits 0."""
    out = tmp_path / "seen"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "loop"
        gpus = 1
        requeue_exit = 3
        cmd = "echo \\"$GTUI_ATTEMPT:${{GTUI_RESUME:-0}}\\" >> {out}; [ $GTUI_ATTEMPT -ge 3 ] || exit 3"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    assert await run_to_end(engine) == 0
    assert out.read_text().split() == ["1:0", "2:1", "3:1"]
    rec = engine.view("loop").record
    assert rec.state == JobState.DONE and rec.attempt == 3
    assert [a.state for a in attempts(_db(engine), "loop")] == ["requeued", "requeued", "done"]


async def test_requeue_exit_past_its_cap_is_a_failure_that_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(requeue, "REQUEUE_CAP", 2)
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        requeue_exit = 7
        [[jobs]]
        name = "forever"
        gpus = 0
        cmd = "exit 7"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    assert await run_to_end(engine) == 1
    rec = engine.view("forever").record
    assert rec.state == JobState.FAILED and rec.attempt == 3
    assert rec.diagnosis is not None and rec.diagnosis.kind == "requeue_cap"
    assert "the cap is 2" in rec.diagnosis.line


async def test_a_reboot_requeues_running_jobs_as_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler stops with its job running; the 'reboot' kills the job and changes the
    boot id; the next scheduler queues it again as interrupted (no retry spent) and its next
    attempt sees GTUI_RESUME=1."""
    boot = tmp_path / "boot_id"
    boot.write_text("boot-one\n")
    monkeypatch.setenv("GTUI_BOOT_ID_FILE", str(boot))
    out = tmp_path / "seen"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "train"
        gpus = 1
        cmd = "echo \\"$GTUI_ATTEMPT:${{GTUI_RESUME:-0}}\\" >> {out}; [ \\"$GTUI_RESUME\\" = 1 ] || sleep 120"
        """,
    )
    first = Engine(q, fake_gpus="1x80G")
    task = asyncio.create_task(first.run())
    await until(
        lambda: out.exists() and first.view("train").record.pid,
        what="a running job",
        ignoring=(GtuiError,),
    )
    pid = first.view("train").record.pid
    assert pid is not None
    await first.stop()
    await asyncio.wait_for(task, 30)
    _reboot_kills(pid)
    boot.write_text("boot-two\n")
    second = Engine(q, fake_gpus="1x80G")
    assert await run_to_end(second) == 0
    assert out.read_text().split() == ["1:0", "2:1"]
    rec = second.view("train").record
    assert rec.state == JobState.DONE and rec.attempt == 2
    assert [a.state for a in attempts(_db(second), "train")] == ["interrupted", "done"]


async def test_requeue_on_reboot_false_keeps_the_old_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    boot = tmp_path / "boot_id"
    boot.write_text("boot-one\n")
    monkeypatch.setenv("GTUI_BOOT_ID_FILE", str(boot))
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        requeue_on_reboot = false
        [[jobs]]
        name = "train"
        gpus = 1
        cmd = "sleep 120"
        """,
    )
    first = Engine(q, fake_gpus="1x80G")
    task = asyncio.create_task(first.run())
    await until(lambda: first.view("train").record.pid, what="a running job", ignoring=(GtuiError,))
    pid = first.view("train").record.pid
    assert pid is not None
    await first.stop()
    await asyncio.wait_for(task, 30)
    _reboot_kills(pid)
    boot.write_text("boot-two\n")
    second = Engine(q, fake_gpus="1x80G")
    await run_to_end(second)
    assert second.view("train").record.state != JobState.QUEUED
    assert second.view("train").record.attempt == 1


async def test_the_signal_comes_ahead_of_the_time_limit(tmp_path: Path) -> None:
    """``signal = "USR1@..."``: the job traps SIGUSR1 before its timeout, saves and exits
    with its requeue_exit code; its next attempt resumes and finishes."""
    out = tmp_path / "seen"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "long"
        gpus = 0
        timeout = "30s"
        signal = "USR1@29s"
        requeue_exit = 3
        cmd = "if [ \\"$GTUI_RESUME\\" = 1 ]; then echo resumed >> {out}; exit 0; fi; trap 'echo warned >> {out}; exit 3' USR1; while true; do sleep 0.1; done"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    assert await run_to_end(engine) == 0
    assert out.read_text().split() == ["warned", "resumed"]
    assert [a.state for a in attempts(_db(engine), "long")] == ["requeued", "done"]


def _reboot_kills(pid: int) -> None:
    """What a reboot does to a job: nothing of it survives (its wrapper was this test's
    child, the in-process engine's launch: reaped here)."""
    os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
