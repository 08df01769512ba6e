"""Stops that are not the job's fault, on real processes and fake GPUs: its own requeue_exit
code (a checkpoint-and-continue loop) and its cap, a reboot seen through a changed boot id,
and the warning signal ahead of a time limit. Each requeue spends no retry and tells the next
attempt GTUI_RESUME=1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from gtui.core.errors import GtuiError
from gtui.core.model import JobRecord, JobState
from gtui.core.sched import requeue
from gtui.core.sched.engine import Engine
from gtui.core.state.history import attempts
from tests.conftest import write_queue
from tests.waiting import until


async def run_to_end(engine: Engine, timeout: float = 60.0) -> int:
    return await asyncio.wait_for(engine.run(exit_when_idle=True), timeout)


def engine_of(q: Path) -> Engine:
    return Engine(q, fake_gpus="1x80G")


def attempt_states(engine: Engine, name: str) -> list[str]:
    """Each recorded attempt's state, in order (a requeue's cause for a stopped one)."""
    return [a.state for a in attempts(engine.parts.runner.paths.db, name)]


def one_job(tmp_path: Path, settings: str = "", **job: str | int) -> Path:
    """A queue of one job polled every 0.1 s: the job's keys as Python values (a string is
    written as a TOML string, its quotes escaped), ``settings`` more lines of [settings]."""
    keys = "\n".join(f"{k} = {json.dumps(v)}" for k, v in job.items())
    return write_queue(tmp_path, f'[settings]\npoll = "0.1s"\n{settings}\n[[jobs]]\n{keys}\n')


def seen(out: Path) -> str:
    """A job's command part that notes each attempt and whether it was told it resumes, one
    ``ATTEMPT:RESUME`` line per attempt in ``out``."""
    return f'echo "$GTUI_ATTEMPT:${{GTUI_RESUME:-0}}" >> {out}'


@pytest.fixture
def boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The machine's boot id, as a file the test rewrites to 'reboot'."""
    boot = tmp_path / "boot_id"
    boot.write_text("boot-one\n")
    monkeypatch.setenv("GTUI_BOOT_ID_FILE", str(boot))
    return boot


async def reboot_under_its_job(
    q: Path, boot: Path, ready: Callable[[], object] = lambda: True
) -> None:
    """A scheduler runs the queue's job ``train`` until it runs (and ``ready``), stops
    leaving it running; then a 'reboot' kills the job and changes the boot id."""
    first = engine_of(q)
    task = asyncio.create_task(first.run())
    await until(
        lambda: ready() and first.view("train").record.pid,
        what="a running job",
        ignoring=(GtuiError,),
    )
    pid = first.view("train").record.pid
    assert pid is not None
    await first.stop()
    await asyncio.wait_for(task, 30)
    _reboot_kills(pid)
    boot.write_text("boot-two\n")


async def test_requeue_exit_loops_without_spending_retries(tmp_path: Path) -> None:
    """A job that exits with its requeue_exit code is queued again (no retry: retries = 0),
    each next attempt sees GTUI_RESUME=1, and the loop ends when it exits 0."""
    out = tmp_path / "seen"
    q = one_job(
        tmp_path,
        name="loop",
        gpus=1,
        requeue_exit=3,
        cmd=f"{seen(out)}; [ $GTUI_ATTEMPT -ge 3 ] || exit 3",
    )
    engine = engine_of(q)
    assert await run_to_end(engine) == 0
    assert out.read_text().split() == ["1:0", "2:1", "3:1"]
    rec = engine.view("loop").record
    assert rec.state == JobState.DONE and rec.attempt == 3
    assert attempt_states(engine, "loop") == ["requeued", "requeued", "done"]


async def test_requeue_exit_past_its_cap_is_a_failure_that_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(requeue, "REQUEUE_CAP", 2)
    q = one_job(tmp_path, "requeue_exit = 7", name="forever", gpus=0, cmd="exit 7")
    engine = engine_of(q)
    assert await run_to_end(engine) == 1
    rec = engine.view("forever").record
    assert rec.state == JobState.FAILED and rec.attempt == 3
    assert rec.diagnosis is not None and rec.diagnosis.kind == "requeue_cap"
    assert "the cap is 2" in rec.diagnosis.line


async def test_a_reboot_requeues_running_jobs_as_interrupted(tmp_path: Path, boot: Path) -> None:
    """The scheduler stops with its job running; the 'reboot' kills the job and changes the
    boot id; the next scheduler queues it again as interrupted (no retry spent) and its next
    attempt sees GTUI_RESUME=1."""
    out = tmp_path / "seen"
    q = one_job(
        tmp_path, name="train", gpus=1, cmd=f'{seen(out)}; [ "$GTUI_RESUME" = 1 ] || sleep 120'
    )
    await reboot_under_its_job(q, boot, ready=out.exists)
    second = engine_of(q)
    assert await run_to_end(second) == 0
    assert out.read_text().split() == ["1:0", "2:1"]
    rec = second.view("train").record
    assert rec.state == JobState.DONE and rec.attempt == 2
    assert attempt_states(second, "train") == ["interrupted", "done"]


async def test_requeue_on_reboot_false_keeps_the_old_end(tmp_path: Path, boot: Path) -> None:
    q = one_job(tmp_path, "requeue_on_reboot = false", name="train", gpus=1, cmd="sleep 120")
    await reboot_under_its_job(q, boot)
    second = engine_of(q)
    await run_to_end(second)
    assert second.view("train").record.state != JobState.QUEUED
    assert second.view("train").record.attempt == 1


async def test_the_signal_comes_ahead_of_the_time_limit(tmp_path: Path) -> None:
    """``signal = "USR1@..."``: the job traps SIGUSR1 before its timeout, saves and exits
    with its requeue_exit code; its next attempt resumes and finishes."""
    out = tmp_path / "seen"
    q = one_job(
        tmp_path,
        name="long",
        gpus=0,
        timeout="30s",
        signal="USR1@29s",
        requeue_exit=3,
        cmd=f'if [ "$GTUI_RESUME" = 1 ]; then echo resumed >> {out}; exit 0; fi; '
        f"trap 'echo warned >> {out}; exit 3' USR1; while true; do sleep 0.1; done",
    )
    engine = engine_of(q)
    assert await run_to_end(engine) == 0
    assert out.read_text().split() == ["warned", "resumed"]
    assert attempt_states(engine, "long") == ["requeued", "done"]


@pytest.mark.parametrize(
    ("cause", "word", "note"),
    [
        (requeue.Cause.PREEMPTED, "preempted", "preempted by urgent at "),
        (requeue.Cause.REQUEUED, "requeued", "exited 3 (its requeue_exit)"),
        (requeue.Cause.GPU_FAULT, "queued", "requeued: GPU 0 fault"),
    ],
)
def test_a_requeued_job_shows_its_cause_or_waits_as_queued(
    cause: requeue.Cause, word: str, note: str
) -> None:
    """A preempted or requeued job shows that word for its state; one whose GPU failed shows
    ``queued`` like any waiting job (the dashboard, ``gtui status``), its note naming the GPU,
    the diagnosis keeping the health watch's whole sentence."""
    why = "GPU 0: Xid 79 (fell off the bus): hardware, not your code; its jobs were queued again"
    rec = JobRecord("train", state=JobState.RUNNING, attempt=1, exit_code=3, gpus=(0,))
    requeue.requeue(rec, cause, by="urgent", why=why)
    assert requeue.shown_state(rec) == word
    assert requeue.shown_word(rec.state.value, rec.requeued_as) == word  # a status document's
    assert (requeue.requeue_note(rec) or "").startswith(note)
    assert rec.diagnosis is not None and rec.diagnosis.kind == cause.value
    if cause is requeue.Cause.GPU_FAULT:
        assert rec.diagnosis.line == why


def _reboot_kills(pid: int) -> None:
    """What a reboot does to a job: nothing of it survives (its wrapper was this test's
    child, the in-process engine's launch: reaped here)."""
    os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
