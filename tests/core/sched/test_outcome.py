"""``outcome.conclude`` alone: a record, its spec, an exit status and the end of
its log in; the record's next state out. No Engine, no executor, no process."""

from __future__ import annotations

import time

from gtui.core.exec.base import ExitStatus
from gtui.core.gpus.fake import FakeBackend
from gtui.core.model import JobRecord, JobSpec, JobState, Settings
from gtui.core.sched.outcome import (
    Rules,
    backoff_reason,
    conclude,
    defer_start,
    ended_in_time,
    retry_left,
)

GIB = 1024
OOM_TAIL = (
    "epoch 3: loss 0.41\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a "
    "total capacity of 79.15 GiB of which 2.00 GiB is free. Including non-PyTorch memory, "
    "this process has 22.00 GiB memory in use.\n"
)
SNAPSHOT = FakeBackend("1x80G").read()
RULES = Rules(Settings())


def running(mem_mib: int | None = 20 * GIB) -> JobRecord:
    return JobRecord(
        name="train",
        state=JobState.RUNNING,
        attempt=1,
        gpus=(0,),
        mem_mib=mem_mib,
        started_at=time.time() - 3600,  # a long run: no retry back-off
    )


def spec(retries: int) -> JobSpec:
    return JobSpec(name="train", cmd="python train.py", mem_mib=20 * GIB, retries=retries)


def test_exit_0_is_done() -> None:
    rec = running()
    conclude(rec, spec(1), ExitStatus(0, None), "all good\n", RULES, SNAPSHOT)
    assert rec.state is JobState.DONE
    assert (rec.exit_code, rec.signal, rec.diagnosis) == (0, None, None)
    assert rec.ended_at is not None and rec.mem_mib == 20 * GIB


def test_a_cuda_oom_fails_with_its_diagnosis_and_retries_with_more_memory() -> None:
    rec = running()
    conclude(rec, spec(1), ExitStatus(1, None), OOM_TAIL, RULES, SNAPSHOT)
    assert rec.diagnosis is not None and rec.diagnosis.kind == "cuda_oom"
    assert "CUDA out of memory" in rec.diagnosis.line
    # A retry is left: queued again, asking what it held plus what it tried (30 GiB) and 10 %,
    # rounded up to a whole GiB (more than mem * oom_grow, 25 GiB).
    assert rec.state is JobState.QUEUED
    assert rec.mem_mib == 33 * GIB
    assert rec.retry_at is None  # it ran an hour: no back-off
    assert any("the retry asks 33792 MiB instead of 20480" in w for w in rec.warnings)


def test_a_cuda_oom_with_no_retry_left_is_failed_as_it_was() -> None:
    rec = running()
    conclude(rec, spec(0), ExitStatus(1, None), OOM_TAIL, RULES, SNAPSHOT)
    assert rec.state is JobState.FAILED
    assert rec.diagnosis is not None and rec.diagnosis.kind == "cuda_oom"
    assert rec.mem_mib == 20 * GIB


def test_no_exit_status_is_unknown_and_a_kill_is_killed() -> None:
    rec = running()
    conclude(rec, spec(1), ExitStatus(None, None), "", RULES, SNAPSHOT, recovered=True)
    assert rec.state is JobState.UNKNOWN  # never failed, never run again silently
    assert "ended while gtui was not running" in rec.warnings
    rec = running()
    conclude(rec, spec(1), ExitStatus(None, 15), "", RULES, SNAPSHOT, killed=True)
    assert rec.state is JobState.KILLED
    assert rec.diagnosis is not None and rec.diagnosis.kind == "killed_by_user"


def test_the_end_is_the_status_files_when_it_says_one() -> None:
    """A scheduler that noticed late (stopped, swapped out) records when the job ended."""
    rec = running()
    ended = time.time() - 600
    conclude(rec, spec(0), ExitStatus(1, None, ended_at=ended), "", RULES, SNAPSHOT)
    assert rec.ended_at == ended


def test_an_end_before_the_deadline_by_the_jobs_own_record_is_no_timeout() -> None:
    deadline = 1000.0
    assert ended_in_time(ExitStatus(1, None, ended_at=deadline - 5), deadline)
    assert not ended_in_time(ExitStatus(None, 15, ended_at=deadline + 0.2), deadline)
    assert not ended_in_time(ExitStatus(1, None), deadline)  # nothing says: the timer decides
    # A file's time may lag the real end by a clock tick: no proof so close to the deadline.
    assert not ended_in_time(ExitStatus(None, 15, ended_at=deadline - 0.001), deadline)


def test_a_start_put_off_for_want_of_a_process_spends_no_retry_and_says_why() -> None:
    """The wrapper ran but could not fork the job (the process limit): queued again after a
    back-off that doubles, with retries = 0 still able to run, and a reason that says why."""
    rec = running()
    defer_start(rec, "its wrapper could not fork it", 0, ran_wrapper=True)
    assert rec.state is JobState.QUEUED
    assert retry_left(spec(0), rec)  # its retry budget is untouched
    assert rec.retry_at is not None
    first = rec.retry_at - time.time()
    assert "could not start it: its wrapper could not fork it" in rec.reason
    assert "no retry spent" in backoff_reason(rec, time.time())
    defer_start(rec, "its wrapper could not fork it", 3, ran_wrapper=False)
    assert rec.first_attempt == 2  # only a start whose wrapper ran used an attempt's number
    assert rec.retry_at - time.time() > first


def test_an_end_that_says_its_job_never_started_is_a_start_put_off() -> None:
    """Read by a command with no scheduler too (gtui kill, status): never failed, never unknown."""
    rec = running()
    not_started = ExitStatus(None, None, not_started="its wrapper could not fork it")
    conclude(rec, spec(0), not_started, "", RULES, SNAPSHOT, recovered=True)
    assert rec.state is JobState.QUEUED and retry_left(spec(0), rec)
    assert rec.diagnosis is not None and rec.diagnosis.kind == "not_started"


def test_a_host_oom_says_how_much_host_memory_the_job_asked_and_used() -> None:
    asked = JobSpec(name="load", cmd="python load.py", gpus=0, ram_mib=6 * GIB)
    rec = JobRecord(name="load", state=JobState.RUNNING, attempt=1, started_at=time.time() - 60)
    rec.host_peak_mib = 7 * GIB + 512
    conclude(rec, asked, ExitStatus(None, 9), "loading shard 7\n", RULES, SNAPSHOT)
    assert rec.diagnosis is not None and rec.diagnosis.kind == "host_oom"
    assert rec.diagnosis.hint.endswith(" It asked for 6G of host RAM (ram) and used up to 7.5G.")
    nothing = JobSpec(name="load", cmd="python load.py", gpus=0)
    rec = JobRecord(name="load", state=JobState.RUNNING, attempt=1, started_at=time.time() - 60)
    conclude(rec, nothing, ExitStatus(None, 9), "loading shard 7\n", RULES, SNAPSHOT)
    assert rec.diagnosis is not None
    assert rec.diagnosis.hint.endswith(
        ' It asked for no host RAM (with ram = "..." jobs wait for memory instead).'
    )
