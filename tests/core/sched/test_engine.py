"""The engine with real processes on fake GPUs: placement, running, retries, state, events."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from gtui.core.api import Event, GpusRead, JobChanged, Notice
from gtui.core.errors import GtuiError
from gtui.core.model import JobState
from gtui.core.sched.engine import Engine
from tests.conftest import TESTS, write_queue
from tests.waiting import until as wait_for


def states(engine: Engine) -> dict[str, str]:
    return {v.record.name: v.record.state.value for v in engine.jobs()}


class Passes:
    """Counts the scheduling loop's turns: the engine publishes GpusRead once per turn, after
    its placement pass. "Nothing started" is then proven by passes that looked and decided
    the same, not by a sleep."""

    def __init__(self, engine: Engine) -> None:
        self.count = 0
        engine.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        if isinstance(event, GpusRead):
            self.count += 1

    async def more(self, n: int, what: str = "") -> None:
        """Wait until ``n`` more passes have run from now."""
        target = self.count + n
        await wait_for(lambda: self.count >= target, timeout=30, what=what or f"{n} passes")


async def run_to_end(engine: Engine, timeout: float = 30.0) -> int:
    return await asyncio.wait_for(engine.run(exit_when_idle=True), timeout)


def twelve_gig_jobs(mode: str, n: int = 6) -> str:
    jobs = "".join(f'[[jobs]]\nname = "j{i}"\ncmd = "sleep 30"\nmem = "12G"\n\n' for i in range(n))
    return f'[settings]\nmode = "{mode}"\npoll = "0.1s"\nkill_grace = "2s"\n\n{jobs}'


@pytest.mark.parametrize(
    ("mode", "expected", "reason"),
    [
        ("pack", 5, "needs 1 GPU with 12G: none eligible (GPU0 4G < 12G)"),
        ("shared", 1, "needs 1 GPU with 12G: none eligible (GPU0 ours)"),
        (
            "exclusive",
            0,
            "needs 1 GPU idle (exclusive) with 12G: none eligible (GPU0 util 20% mem 20% used)",
        ),
    ],
)
async def test_seed_extreme_mode_example(
    tmp_path: Path, mode: str, expected: int, reason: str
) -> None:
    """The bash script's extreme-mode example: one 80G GPU with 16G used by others, 12G jobs: pack runs five at once,
    shared one, exclusive none (the GPU is not idle)."""
    q = write_queue(tmp_path, twelve_gig_jobs(mode))
    engine = Engine(q, fake_gpus="80G:16G@20")
    passes = Passes(engine)
    task = asyncio.create_task(engine.run())
    try:

        def settled() -> bool:
            waiting = [v.record for v in engine.jobs() if v.record.state == JobState.QUEUED]
            return len(waiting) == 6 - expected and all(r.reason for r in waiting)

        await wait_for(settled, timeout=30, what=f"{expected} running, the rest with a reason")
        await passes.more(3, "three more passes")  # they look again, and start nothing more
        running = [n for n, s in states(engine).items() if s == "running"]
        assert len(running) == expected, states(engine)
        waiting = {v.record.reason for v in engine.jobs() if v.record.state == JobState.QUEUED}
        assert waiting == ({reason} if expected < 6 else set())
        if expected:
            pids = [v.record.pid for v in engine.jobs() if v.record.state == JobState.RUNNING]
            assert all(pid and psutil.pid_exists(pid) for pid in pids)
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


async def test_log_shows_cuda_visible_devices_and_placeholders(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"

        [[jobs]]
        name = "ddp"
        gpus = 2
        mem = "10G"
        cmd = "echo CVD=$CUDA_VISIBLE_DEVICES ORDER=$CUDA_DEVICE_ORDER gpu={gpu} g0={gpu0} g1={gpu1} n={n_gpus} port={port} name={name} attempt={attempt} legacy=${available_gpu_1} job=$GTUI_JOB try=$GTUI_ATTEMPT unbuf=$PYTHONUNBUFFERED; awk 'BEGIN {{ print \\"braces ok\\" }}'"

        [[jobs]]
        name = "cpu"
        gpus = 0
        cmd = "echo cpu CVD=[$CUDA_VISIBLE_DEVICES]"
        """,
    )
    engine = Engine(q, fake_gpus="4x80G")
    code = await run_to_end(engine)
    assert code == 0, states(engine)
    ddp = engine.view("ddp").record
    log = Path(str(ddp.log)).read_text()
    g0, g1 = ddp.gpus
    assert f"CVD={g0},{g1} ORDER=PCI_BUS_ID gpu={g0},{g1} g0={g0} g1={g1} n=2" in log
    port = int(log.split("port=")[1].split()[0])
    assert 1024 < port < 65536
    assert f"name=ddp attempt=1 legacy={g1} job=ddp try=1 unbuf=1" in log
    assert "braces ok" in log
    assert Path(ddp.log or "").name == "ddp.1.log"
    cpu_log = Path(str(engine.view("cpu").record.log)).read_text()
    assert "cpu CVD=[]" in cpu_log


async def test_failing_job_runs_exactly_retries_more_times(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"

        [[jobs]]
        name = "flaky"
        gpus = 0
        retries = 2
        cmd = "echo x >> {counter}; exit 3"

        [[jobs]]
        name = "never"
        gpus = 0
        retries = 0
        cmd = "echo y >> {counter}.never; exit 1"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    code = await run_to_end(engine)
    assert code == 1
    assert counter.read_text().count("x") == 3  # 1 run + 2 retries
    assert Path(f"{counter}.never").read_text().count("y") == 1
    rec = engine.view("flaky").record
    assert rec.state == JobState.FAILED and rec.attempt == 3 and rec.exit_code == 3
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert logs == ["flaky.1.log", "flaky.2.log", "flaky.3.log", "never.1.log"]


async def test_retry_until_success_with_minus_one(tmp_path: Path) -> None:
    marker = tmp_path / "n"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "eventually"
        gpus = 0
        retries = -1
        cmd = "echo . >> {marker}; test $(wc -l < {marker}) -ge 4"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    assert await run_to_end(engine) == 0
    assert engine.view("eventually").record.attempt == 4


async def test_done_jobs_are_not_run_again_when_the_queue_is_reopened(tmp_path: Path) -> None:
    counter = tmp_path / "count"
    q = write_queue(
        tmp_path,
        f"""
        [[jobs]]
        name = "once"
        gpus = 0
        cmd = "echo run >> {counter}"
        """,
    )
    assert await run_to_end(Engine(q, fake_gpus="1x80G")) == 0
    second = Engine(q, fake_gpus="1x80G")
    assert await run_to_end(second) == 0
    assert counter.read_text().count("run") == 1
    assert second.view("once").record.state == JobState.DONE


async def test_after_waits_for_success_and_blocks_on_failure(tmp_path: Path) -> None:
    order = tmp_path / "order"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "train"
        gpus = 1
        mem = "10G"
        after = ["prep"]
        cmd = "echo train >> {order}"
        [[jobs]]
        name = "prep"
        gpus = 0
        cmd = "sleep 0.3; echo prep >> {order}"
        [[jobs]]
        name = "bad"
        gpus = 0
        cmd = "exit 1"
        [[jobs]]
        name = "eval"
        gpus = 0
        after = ["bad"]
        cmd = "echo eval >> {order}"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    assert await run_to_end(engine) == 1
    assert order.read_text().split() == ["prep", "train"]
    assert states(engine) == {"train": "done", "prep": "done", "bad": "failed", "eval": "blocked"}
    assert "bad" in engine.view("eval").record.reason


async def test_kill_leaves_no_process_of_the_tree(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        kill_grace = "1s"
        [[jobs]]
        name = "tree"
        gpus = 1
        mem = "5G"
        cmd = "trap '' TERM; (sleep 60 & sleep 60 & wait) & setsid sleep 60 & sleep 60; wait"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    task = asyncio.create_task(engine.run())
    try:
        await wait_for(lambda: states(engine).get("tree") == "running")
        pid = engine.view("tree").record.pid
        assert pid
        await wait_for(lambda: len(psutil.Process(pid).children(recursive=True)) >= 4)
        tree = [pid] + [c.pid for c in psutil.Process(pid).children(recursive=True)]
        await engine.kill(["tree"])
        await wait_for(lambda: states(engine)["tree"] == "killed")
        alive = [p for p in tree if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
        assert alive == []
        assert engine.view("tree").record.diagnosis is not None
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


async def test_timeout_kills_and_marks_failed(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        kill_grace = "1s"
        [[jobs]]
        name = "slow"
        gpus = 0
        timeout = "0.5s"
        retries = 3
        cmd = "sleep 30"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    assert await run_to_end(engine) == 1
    rec = engine.view("slow").record
    assert rec.state == JobState.FAILED and rec.attempt == 1  # a timeout is not retried
    assert rec.diagnosis is not None and rec.diagnosis.kind == "timeout"


async def test_pause_suspends_and_resume_continues(tmp_path: Path) -> None:
    """Pack mode, so the waiting job could share the GPU if the suspended one's memory were
    not counted: the reason names the memory left, not "ours"."""
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        mode = "pack"
        [[jobs]]
        name = "long"
        gpus = 1
        mem = "60G"
        cmd = "sleep 30"
        [[jobs]]
        name = "next"
        gpus = 1
        mem = "60G"
        cmd = "sleep 30"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    passes = Passes(engine)
    task = asyncio.create_task(engine.run())
    try:
        await wait_for(lambda: states(engine).get("long") == "running")
        pid = engine.view("long").record.pid
        assert pid
        await engine.pause(["long", "next"])
        assert states(engine) == {"long": "suspended", "next": "held"}
        await wait_for(lambda: psutil.Process(pid).status() == psutil.STATUS_STOPPED)
        # Its GPU memory stays counted: the held job, released, still cannot start.
        await engine.resume(["next"])
        await passes.more(2, "passes after the release")
        assert states(engine)["next"] == "queued"
        # (Reasons are worked out at most every 0.5 s: waited for, not read at once.)
        await wait_for(
            lambda: (
                engine.view("next").record.reason
                == "needs 1 GPU with 60G: none eligible (GPU0 20G < 60G)"
            ),
            what="the reason naming the memory left",
        )
        await engine.resume(["long"])
        await wait_for(lambda: psutil.Process(pid).status() != psutil.STATUS_STOPPED)
        assert states(engine)["long"] == "running"
        with pytest.raises(GtuiError, match="no job named"):
            await engine.pause(["nope"])
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


async def test_paused_queue_starts_nothing(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "a"
        gpus = 0
        cmd = "true"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    await engine.start()
    await engine.pause_queue()
    # A paused queue keeps its scheduler: it waits, and says why a waits.
    task = asyncio.create_task(engine.run(exit_when_idle=True))
    await wait_for(lambda: engine.view("a").record.reason == "queue paused", what="the reason")
    assert states(engine) == {"a": "queued"} and not task.done()
    await engine.resume_queue()
    assert await asyncio.wait_for(task, 60) == 0
    assert states(engine) == {"a": "done"}


async def test_on_failure_pause_stops_new_starts_until_resumed(tmp_path: Path) -> None:
    """on_failure = "pause": a job's failure pauses the queue (stored, so a restart keeps it),
    the next job waits with the reason "queue paused" through later passes, and resuming the
    queue starts it."""
    from gtui.core.state.store import Store

    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        on_failure = "pause"
        max_parallel = 1
        [[jobs]]
        name = "bad"
        gpus = 0
        cmd = "exit 3"
        [[jobs]]
        name = "next"
        gpus = 0
        cmd = "echo next ran"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    notices: list[str] = []
    engine.subscribe(lambda e: notices.append(e.text) if isinstance(e, Notice) else None)
    passes = Passes(engine)
    task = asyncio.create_task(engine.run())
    try:
        await wait_for(lambda: states(engine).get("bad") == "failed", 30, "bad failed")
        assert engine.paused
        assert "bad failed: queue paused (on_failure)" in notices
        await passes.more(3, "passes after the failure")
        assert states(engine)["next"] == "queued"
        # (Reasons are worked out at most every 0.5 s: waited for, not read at once.)
        await wait_for(lambda: engine.view("next").record.reason == "queue paused", 30, "reason")
        assert engine.view("next").record.attempt == 0  # never launched
        store = Store(engine.paths.db)
        assert store.get_meta("paused") == "1"
        store.close()
        await engine.resume_queue()
        await wait_for(lambda: states(engine)["next"] == "done", 30, "next done after resume")
        assert not engine.paused
        assert "next ran" in Path(str(engine.view("next").record.log)).read_text()
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


async def test_events_are_committed_before_they_are_published(tmp_path: Path) -> None:
    from gtui.core.state.store import Store

    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "a"
        gpus = 0
        cmd = "true"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    seen: list[tuple[str, str]] = []

    def sink(event: Event) -> None:
        if isinstance(event, JobChanged):
            stored = Store(engine.paths.db).load()["a"]
            seen.append((event.job.record.state.value, stored.state.value))

    engine.subscribe(sink)
    await run_to_end(engine)
    assert ("running", "running") in seen and ("done", "done") in seen
    assert all(published == stored for published, stored in seen)


async def test_oom_retry_asks_for_more_memory(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        oom_grow = 1.5
        [[jobs]]
        name = "oom"
        gpus = 1
        mem = "10G"
        retries = 1
        cmd = "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 3.06 MiB is free.' >&2; exit 1"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    await run_to_end(engine)
    rec = engine.view("oom").record
    assert rec.attempt == 2
    assert rec.diagnosis is not None and rec.diagnosis.kind == "cuda_oom"
    assert rec.mem_mib is not None and rec.mem_mib >= 15 * 1024


async def test_job_starts_within_milliseconds_of_a_gpu_freeing(tmp_path: Path) -> None:
    """Not a timing assertion on speed: it proves the start does not wait for the poll (60 s)."""
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "60s"
        [[jobs]]
        name = "first"
        mem = "70G"
        cmd = "sleep 0.2"
        [[jobs]]
        name = "second"
        mem = "70G"
        cmd = "true"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    assert await run_to_end(engine, timeout=20) == 0
    first, second = engine.view("first").record, engine.view("second").record
    assert first.ended_at and second.started_at
    assert second.started_at - first.ended_at < 5.0


FAKE_PYNVML_DIR = TESTS / "fake_pynvml"


@pytest.mark.parametrize(
    ("driver", "said"),
    [
        # What CI and this machine have: nvidia-ml-py installed, no libnvidia-ml.so.
        ({"init_error": 12}, "no NVIDIA GPU found (NVML: library not found)"),
        ({"init_error": 9}, "no NVIDIA GPU found (NVML: the NVIDIA driver is not loaded)"),
        ({"gpus": []}, "no NVIDIA GPU found (NVML sees 0 GPUs)"),
    ],
    ids=["no-library", "no-driver", "no-gpu"],
)
def test_without_gpus_cpu_jobs_still_run_and_gtui_run_ends(
    tmp_path: Path, driver: dict[str, object], said: str
) -> None:
    """No NVML and no fake GPUs: said plainly, CPU jobs run, and `gtui run` does not wait
    forever for GPUs that will never exist. The machine without GPUs is made here, through the
    fake pynvml first on the path, so this runs everywhere (a real GPU cannot make it skip)."""
    from tests.conftest import gtui

    config = tmp_path / "driver.json"
    config.write_text(json.dumps(driver))
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "cpu"
        gpus = 0
        cmd = "echo on the cpu"
        [[jobs]]
        name = "gpu"
        cmd = "echo never"
        """,
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(FAKE_PYNVML_DIR), os.environ.get("PYTHONPATH", "")]),
        "FAKE_PYNVML_CONFIG": str(config),
    }
    env.pop("GTUI_FAKE_GPUS", None)
    out = gtui("run", str(q), timeout=60, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "done cpu" in out.stdout
    assert said in out.stdout + out.stderr, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert not (tmp_path / "logs" / "gpu.1.log").exists()  # the GPU job never started
    status = json.loads(gtui("status", "--json", str(q)).stdout)
    assert {j["name"]: j["state"] for j in status["jobs"]} == {"cpu": "done", "gpu": "queued"}


def load_fake_pynvml() -> Any:
    """The fake pynvml under the name tests/core/gpus/test_gpus_nvml.py gives it (one shared instance),
    so the real pynvml stays importable beside it."""
    name = "gtui_tests_fake_pynvml"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, FAKE_PYNVML_DIR / "pynvml" / "__init__.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


async def test_gpu_processes_are_matched_to_jobs_through_their_trees(tmp_path: Path) -> None:
    """The isolation check: NVML lists two processes of a job's tree, one on its
    GPU and one on a GPU not assigned to it. The second is a warning on the job; the memory
    seen is its peak, kept when the use drops, and saved with its end."""
    from gtui.core.gpus.nvml import NvmlBackend
    from gtui.core.state.store import Store

    nv = load_fake_pynvml()
    nv.fake_reset([nv.FakeGpu(), nv.FakeGpu()])
    child = "bash -c 'echo $$ > {0}.pid; while [ ! -e release ]; do sleep 0.05; done'"
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "train"
        gpus = 1
        mem = "10G"
        cmd = "{child.format("a")} & {child.format("b")} & wait"
        """,
    )
    engine = Engine(q, backend=NvmlBackend(nvml=nv))
    snapshots: list[Any] = []
    engine.subscribe(lambda e: snapshots.append(e.snapshot) if isinstance(e, GpusRead) else None)
    task = asyncio.create_task(engine.run())

    def seen(gpu: int, pid: int, mib: int) -> bool:
        """The engine has published a reading with ``pid`` using ``mib`` on ``gpu``."""
        return any(
            (pid, mib) in {(p.pid, p.mem_mib) for p in s.by_index()[gpu].processes}
            for s in snapshots
            if gpu in s.by_index()
        )

    try:
        await wait_for(lambda: states(engine).get("train") == "running", 30, "train running")
        pid_files = [tmp_path / "a.pid", tmp_path / "b.pid"]
        await wait_for(lambda: all(f.exists() and f.read_text().strip() for f in pid_files), 30)
        a, b = (int(f.read_text()) for f in pid_files)
        rec = engine.view("train").record
        assert a != rec.pid and b != rec.pid  # children: only the tree walk finds them
        (mine,) = rec.gpus
        other = 1 - mine
        nv.fake_state.gpus[mine].compute = [(a, 6000)]
        nv.fake_state.gpus[other].compute = [(b, 2000)]
        warning = f"process {b} runs on GPU {other}, which is not assigned to it (assigned: {mine})"
        await wait_for(lambda: warning in engine.view("train").record.warnings, 30, warning)
        assert engine.view("train").record.warnings == [warning]  # a, on its GPU, is fine
        await wait_for(lambda: engine.view("train").record.peak_mib == 6000, 30, "peak 6000")
        nv.fake_state.gpus[mine].compute = [(a, 7000)]
        await wait_for(lambda: engine.view("train").record.peak_mib == 7000, 30, "peak 7000")
        nv.fake_state.gpus[mine].compute = [(a, 1000)]
        await wait_for(lambda: seen(mine, a, 1000), 30, "a reading with the use dropped")
        await Passes(engine).more(1)  # and a pass after it
        assert engine.view("train").record.peak_mib == 7000
        assert engine.view("train").record.warnings == [warning]  # said once, not every poll
        nv.fake_state.gpus[mine].compute = []
        nv.fake_state.gpus[other].compute = []
        (tmp_path / "release").touch()
        await wait_for(lambda: states(engine)["train"] == "done", 30, "train done")
        stored = Store(engine.paths.db).load()["train"]
        assert stored.peak_mib == 7000 and stored.warnings == [warning]
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)
        task.cancel()
        nv.fake_reset()


async def test_shutdown_with_kill_records_the_jobs_as_killed(tmp_path: Path) -> None:
    from gtui.core.state.store import Store

    q = write_queue(
        tmp_path,
        """
        [settings]
        kill_grace = "1s"
        [[jobs]]
        name = "long"
        gpus = 0
        cmd = "sleep 30"
        [[jobs]]
        name = "next"
        gpus = 0
        after = ["long"]
        cmd = "true"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    task = asyncio.create_task(engine.run())
    await wait_for(lambda: states(engine).get("long") == "running")
    pid = engine.view("long").record.pid
    await engine.shutdown(kill_jobs=True)
    task.cancel()
    stored = Store(engine.paths.db).load()
    assert stored["long"].state == JobState.KILLED
    assert stored["next"].state != JobState.RUNNING  # nothing started during the shutdown
    assert pid and not (psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie")


async def test_a_job_that_leaves_a_daemon_behind_gets_a_warning(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "server"
        gpus = 0
        cmd = "setsid sleep 30 > /dev/null 2>&1 < /dev/null & echo started"
        [[jobs]]
        name = "clean"
        gpus = 0
        cmd = "echo nothing left"
        """,
    )
    engine = Engine(q, fake_gpus="1x80G")
    try:
        assert await run_to_end(engine) == 0
        await wait_for(lambda: bool(engine.view("server").record.warnings), what="a warning")
        warning = engine.view("server").record.warnings[0]
        assert "left 1 process running" in warning
        assert engine.view("clean").record.warnings == []
    finally:
        from gtui.core.exec import runner

        for pid in runner.processes_with_env("GTUI_TOKEN", str(engine.view("server").record.token)):
            os.kill(pid, 9)
