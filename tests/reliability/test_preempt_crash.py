"""A SIGKILL of the scheduler at each step of a preemption (the intent saved, the signal sent,
the victim's exit seen, its end recorded), then a restart: nothing runs twice, nothing is
lost. The victim checkpoints and resumes once, the preemptor runs once, both end done."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.reliability.helpers import finish, start_run, status, wait_for

TRAINER = REPO / "sample_queues" / "mock_trainer.py"


def _write(q: Path, tmp: Path, *, urgent: bool, steps: int = 200) -> None:
    # The trainer runs ``steps`` x 0.05 s unless stopped (10 s: still running, on a loaded
    # machine, when the urgent job is seen and its stop is signalled).
    text = f"""
[settings]
poll = "0.1s"
kill_grace = "2s"
fake_gpus = "1x80G"

[[jobs]]
name = "train"
cmd = "echo start >> {tmp}/train.runs; exec {sys.executable} {TRAINER} {tmp}/ckpt {steps} 0.05"
mem = "60G"
preemptible = true
grace = "20s"
requeue_exit = 3
"""
    if urgent:
        text += f"""
[[jobs]]
name = "urgent"
cmd = "echo ran >> {tmp}/urgent.runs"
mem = "60G"
priority = 5
"""
    q.write_text(text)


@pytest.mark.parametrize(
    "point",
    ["after_preempt_intent:1", "after_preempt_signal:1", "after_exit:1", "after_finish:1"],
)
def test_a_kill_at_each_step_of_a_preemption_loses_nothing(tmp_path: Path, point: str) -> None:
    q = tmp_path / "q.toml"
    _write(q, tmp_path, urgent=False)
    first = start_run(q, env={"GTUI_CRASH_AT": point})
    wait_for(lambda: (tmp_path / "train.runs").exists(), what="the trainer started")
    _write(q, tmp_path, urgent=True)
    out, _ = first.communicate(timeout=60)
    assert first.returncode == -9, out  # killed at the point
    second = start_run(q)
    finish(second)
    jobs = status(q)
    assert jobs["train"]["state"] == "done" and jobs["urgent"]["state"] == "done"
    assert (tmp_path / "train.runs").read_text().count("start") == 2
    assert (tmp_path / "urgent.runs").read_text().count("ran") == 1
    saved = int((tmp_path / "ckpt").read_text())
    assert f"resumed at step {saved}" in (tmp_path / "logs" / "train.2.log").read_text()


def test_a_run_that_ends_done_before_its_stop_signal_is_done_not_run_again(tmp_path: Path) -> None:
    """The scheduler dies after the stop's intent, before its signal; the trainer finishes by
    itself while no scheduler runs. The restart finds it done: it is not queued again."""
    q = tmp_path / "q.toml"
    _write(q, tmp_path, urgent=False, steps=40)
    first = start_run(q, env={"GTUI_CRASH_AT": "after_preempt_intent:1"})
    wait_for(lambda: (tmp_path / "train.runs").exists(), what="the trainer started")
    _write(q, tmp_path, urgent=True, steps=40)
    out, _ = first.communicate(timeout=60)
    assert first.returncode == -9, out  # killed between the intent and the signal
    log = tmp_path / "logs" / "train.1.log"
    wait_for(lambda: "done at step 40" in log.read_text(), timeout=60, what="the trainer's end")
    second = start_run(q)
    finish(second)
    jobs = status(q)
    assert jobs["train"]["state"] == "done" and jobs["urgent"]["state"] == "done"
    assert (tmp_path / "train.runs").read_text().count("start") == 1
    assert (tmp_path / "urgent.runs").read_text().count("ran") == 1
    assert not (tmp_path / "ckpt").exists()  # never signalled, never saved
