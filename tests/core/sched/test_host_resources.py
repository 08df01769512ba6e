"""Host cores and memory with real processes on a simulated host (``fake_host``): jobs that
ask ``cpus`` / ``ram`` run only as many at a time as the host holds, the waiting reason names
the resource, and a job's thread pools default to its cores."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gtui.core.exec import limits
from gtui.core.model import JobState
from gtui.core.sched.engine import Engine
from gtui.ui.widgets.gpu_panel import host_title as title
from tests.conftest import write_queue
from tests.waiting import until as wait_for


def most_at_once(engine: Engine) -> int:
    """The most jobs whose runs (from start to recorded end) overlapped."""
    edges = []
    for v in engine.jobs():
        rec = v.record
        assert rec.started_at is not None and rec.ended_at is not None
        edges += [(rec.started_at, 1), (rec.ended_at, -1)]
    most = now = 0
    for _, step in sorted(edges):  # an end sorts before a start at the same instant
        now += step
        most = max(most, now)
    return most


def gated_jobs(n: int, ask: str) -> str:
    """``n`` CPU jobs asking ``ask`` each, running until the file ``go`` exists."""
    return "".join(
        f'[[jobs]]\nname = "j{i}"\ngpus = 0\n{ask}\n'
        f'cmd = "while [ ! -e go ]; do sleep 0.05; done"\n\n'
        for i in range(n)
    )


@pytest.mark.parametrize(
    ("ask", "reason"),
    [
        ("cpus = 2", "needs 2 cores: 0 free (j0 2, j1 2)"),
        ('ram = "6G"', "needs 6G RAM: 4G free (j0 6G, j1 6G)"),
    ],
)
async def test_eight_jobs_on_a_small_host_run_two_at_a_time(
    tmp_path: Path, ask: str, reason: str
) -> None:
    q = write_queue(
        tmp_path,
        '[settings]\npoll = "0.1s"\nkill_grace = "2s"\nfake_host = "4c/16G"\n\n'
        + gated_jobs(8, ask),
    )
    engine = Engine(q, fake_gpus="80G")
    task = asyncio.create_task(engine.run(exit_when_idle=True))
    try:

        def two_run_six_wait() -> bool:
            recs = [v.record for v in engine.jobs()]
            waiting = [r for r in recs if r.state == JobState.QUEUED]
            running = [r for r in recs if r.state == JobState.RUNNING]
            return len(running) == 2 and len(waiting) == 6 and all(r.reason for r in waiting)

        await wait_for(two_run_six_wait, timeout=30, what="two running, six waiting")
        waiting = {v.record.reason for v in engine.jobs() if v.record.state == JobState.QUEUED}
        assert waiting == {reason}
        host = engine.status_json()["host"]  # what `gtui status --json` lists
        assert host["cores"] == 4 and host["ram_total_mib"] == 16 * 1024
        assert (host["cores_asked"], host["ram_asked_mib"]) == (
            (4, 0) if "cpus" in ask else (0, 12 * 1024)
        )
        header = (  # the GPU panel's, once a poll has read the host with both running
            " · host (simulated) 4/4 cores asked · RAM 0M/16G used"
            if "cpus" in ask
            else " · host (simulated) 0/4 cores asked · RAM 12G/16G used"
        )
        await wait_for(lambda: title(engine.status_json()["host"]) == header, timeout=30)
        (tmp_path / "go").touch()
        assert await asyncio.wait_for(task, 60) == 0
        assert {v.record.state for v in engine.jobs()} == {JobState.DONE}
        assert most_at_once(engine) == 2
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


async def test_thread_pools_default_to_the_cores_asked(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        fake_host = "8c/16G"

        [[jobs]]
        name = "asks"
        gpus = 0
        cpus = 3
        cmd = "echo omp=$OMP_NUM_THREADS mkl=$MKL_NUM_THREADS"

        [[jobs]]
        name = "own"
        gpus = 0
        cpus = 3
        env = { OMP_NUM_THREADS = "1" }
        cmd = "echo omp=$OMP_NUM_THREADS mkl=$MKL_NUM_THREADS"

        [[jobs]]
        name = "none"
        gpus = 0
        cmd = "echo omp=[$OMP_NUM_THREADS]"
        """,
    )
    engine = Engine(q, fake_gpus="80G")
    assert await asyncio.wait_for(engine.run(exit_when_idle=True), 30) == 0

    def log(name: str) -> str:
        return Path(str(engine.view(name).record.log)).read_text()

    assert "omp=3 mkl=3" in log("asks")
    assert "omp=1 mkl=3" in log("own")
    assert "omp=[]" in log("none")


CAN_LIMIT, WHY_NOT = limits.probe()
ENFORCED = """
[settings]
poll = "0.1s"
enforce = true

[[jobs]]
name = "capped"
gpus = 0
cpus = 1
ram = "256M"
cmd = "cat /sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)/memory.max; echo ran"
"""


@pytest.mark.skipif(not CAN_LIMIT, reason=f"jobs cannot be limited on this machine: {WHY_NOT}")
async def test_enforce_limits_the_job_to_what_it_asked(tmp_path: Path) -> None:
    engine = Engine(write_queue(tmp_path, ENFORCED), fake_gpus="80G")
    assert await asyncio.wait_for(engine.run(exit_when_idle=True), 30) == 0
    log = Path(str(engine.view("capped").record.log)).read_text()
    assert str(256 * 1024 * 1024) in log and "ran" in log


@pytest.mark.skipif(CAN_LIMIT, reason="this machine can limit jobs: nothing to note")
async def test_enforce_where_the_machine_cannot_says_so_in_the_log(tmp_path: Path) -> None:
    engine = Engine(write_queue(tmp_path, ENFORCED), fake_gpus="80G")
    assert await asyncio.wait_for(engine.run(exit_when_idle=True), 30) == 0
    log = Path(str(engine.view("capped").record.log)).read_text()
    first, rest = log.split("\n", 1)
    assert first == f"gtui: enforce = true, but this job runs unlimited here: {WHY_NOT}"
    assert "ran" in rest


@pytest.mark.parametrize(("ask", "read_again"), [("", False), ('ram = "1G"', True)])
async def test_a_jobs_end_reads_the_host_again_only_for_a_job_that_asks_it(
    tmp_path: Path, ask: str, read_again: bool
) -> None:
    """After an end the pass looks at the host only for waiting jobs that ask cores or memory:
    for the others the poll's reading stands (a read of the host at every end was psutil's
    work on the path from one job's end to the next start)."""
    q = write_queue(
        tmp_path,
        '[settings]\npoll = "60s"\nmax_parallel = 1\nfake_host = "4c/16G"\n\n'
        '[[jobs]]\nname = "first"\ngpus = 0\ncmd = "while [ ! -e go ]; do sleep 0.05; done"\n\n'
        f'[[jobs]]\nname = "second"\ngpus = 0\n{ask}\ncmd = "true"\n\n',
    )
    engine = Engine(q, fake_gpus="80G")
    task = asyncio.create_task(engine.run(exit_when_idle=True))
    try:
        await wait_for(lambda: engine.started and engine.view("first").record.pid is not None)
        before = engine.parts.occupancy.host.info
        assert before is not None
        (tmp_path / "go").touch()
        await wait_for(lambda: engine.view("second").record.state == JobState.DONE)
        after = engine.parts.occupancy.host.info
        assert (after is not before) is read_again
    finally:
        (tmp_path / "go").touch()
        await asyncio.wait_for(task, 30)
