"""The store is the one source of truth: ended jobs' records live in SQLite, not in the
scheduler. After jobs end, the engine keeps objects only for the live ones
(waiting, held, running, suspended) and the state of each ended one; every screen still sees
every job in full, a retry reads the record back, and a job put back in the file after it
ended and left is still not run again.

The jobs run in the in-memory executor on fake GPUs (no process); the status test asks a real
``gtui status --json`` over the engine's real control socket.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from gtui.core.exec.memory import MemoryExecutor
from gtui.core.model import JobRecord, JobState
from gtui.core.sched.engine import Engine
from gtui.core.state.records import Records
from gtui.core.state.store import Store
from tests.conftest import write_queue
from tests.waiting import until

SETTINGS = '[settings]\npoll = "0.1s"\nkill_grace = "1s"\n\n'
N = 30


def jobs(n: int, start: int = 0, cmd: str = "echo out {i}; exit 0") -> str:
    return "".join(
        f'[[jobs]]\nname = "j{i}"\ncmd = "{cmd.format(i=i)}"\ngpus = 0\n\n'
        for i in range(start, start + n)
    )


def live_names(engine: Engine) -> set[str]:
    return set(engine._book.records.live())


async def test_after_jobs_end_only_the_live_ones_are_objects(tmp_path: Path) -> None:
    q = write_queue(tmp_path, SETTINGS + jobs(N) + jobs(1, N, cmd="sleep 3600"))
    executor = MemoryExecutor()
    engine = Engine(q, fake_gpus="2x80G", executor=executor, control=False)
    task = asyncio.create_task(engine.run())
    try:
        await until(
            lambda: engine.started and sum(v.record.final for v in engine.jobs()) == N,
            what="the short jobs to end",
        )
        # Only the job still running is an object; the N ended ones are a state each.
        assert live_names(engine) == {f"j{N}"}
        assert dict(engine._book.records.ended()) == {f"j{i}": JobState.DONE for i in range(N)}
        # ... and still seen whole by every screen: the views read them back from the store.
        views = {v.spec.name: v.record for v in engine.jobs()}
        assert len(views) == N + 1
        for i in range(N):
            rec = views[f"j{i}"]
            assert rec.state == JobState.DONE and rec.exit_code == 0 and rec.attempt == 1
            assert Path(str(rec.log)).read_text() == f"out {i}\n"
        assert engine._book.counts()["done"] == N
        # Reading them did not bring them back into memory.
        assert live_names(engine) == {f"j{N}"}
        # A retry reads the record back and makes it live again; it runs once more.
        await engine.retry(["j3"])
        assert "j3" in live_names(engine) or engine.view("j3").record.attempt == 2
        await until(
            lambda: engine.view("j3").record.attempt == 2 and engine.view("j3").record.final
        )
        assert engine.view("j3").record.state == JobState.DONE
        assert live_names(engine) == {f"j{N}"}
        assert [r.name for r in executor.launched].count("j3") == 2
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


async def test_status_json_over_the_socket_lists_every_job_in_full(tmp_path: Path) -> None:
    q = write_queue(tmp_path, SETTINGS + jobs(N) + jobs(1, N, cmd="sleep 3600"))
    engine = Engine(q, fake_gpus="2x80G", executor=MemoryExecutor(), control=True)
    task = asyncio.create_task(engine.run())
    try:
        await until(
            lambda: engine.started and sum(v.record.final for v in engine.jobs()) == N,
            what="the short jobs to end",
        )
        assert live_names(engine) == {f"j{N}"}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "gtui", "status", str(q), "--json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        data = json.loads(out)
        by_name = {j["name"]: j for j in data["jobs"]}
        assert len(by_name) == N + 1
        assert all(by_name[f"j{i}"]["state"] == "done" for i in range(N))
        assert by_name[f"j{N}"]["state"] == "running"
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


async def test_a_restart_loads_only_the_live_records(tmp_path: Path) -> None:
    q = write_queue(tmp_path, SETTINGS + jobs(N) + jobs(1, N, cmd="exit 3"))
    first = Engine(q, fake_gpus="2x80G", executor=MemoryExecutor(), control=False)
    assert await asyncio.wait_for(first.run(exit_when_idle=True), 30) == 1
    # Put one job back to waiting in the store, as a scheduler stopped mid-queue leaves it.
    with Store(first.paths.db) as store:
        store.save(JobRecord(name="j0"))
        live, ended = store.load_split()
    assert set(live) == {"j0"} and len(ended) == N
    assert ended[f"j{N}"] == JobState.FAILED
    second = Engine(q, fake_gpus="2x80G", executor=MemoryExecutor(), control=False)
    await second.start()
    try:
        assert live_names(second) == {"j0"}
        assert second.view(f"j{N}").record.exit_code == 3  # read back on demand
    finally:
        await second.shutdown()


async def test_an_ended_job_removed_then_put_back_is_not_run_again(tmp_path: Path) -> None:
    q = write_queue(tmp_path, SETTINGS + jobs(3) + jobs(1, 3, cmd="sleep 3600"))
    executor = MemoryExecutor()
    engine = Engine(q, fake_gpus="2x80G", executor=executor, control=False)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.started and engine.view("j1").record.final)
        await until(lambda: all(engine.view(f"j{i}").record.final for i in range(3)))
        q.write_text(SETTINGS + jobs(1, 3, cmd="sleep 3600"))  # j0..j2 leave the file
        await engine.reload()
        assert engine._book.retired.state("j1") == JobState.DONE
        assert "j1" not in engine._book.retired.live()  # retired as its state only
        q.write_text(SETTINGS + jobs(3) + jobs(1, 3, cmd="sleep 3600"))  # and come back
        await engine.reload()
        assert engine.view("j1").record.state == JobState.DONE
        await engine.reload()  # another pass: nothing starts
        assert [r.name for r in executor.launched].count("j1") == 1
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


def test_records_read_an_ended_job_back_from_the_store(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        rec = JobRecord(name="a", state=JobState.FAILED, exit_code=2, attempt=3)
        store.save(rec)
        records = Records(store)
        records.put(rec)
        records.saved(rec)
        assert "a" not in records.live() and records.state("a") == JobState.FAILED
        for _ in range(300):  # pushed out of the small cache by others
            other = JobRecord(name=f"o{_}", state=JobState.DONE)
            store.save(other)
            records.put(other)
            records.saved(other)
        back = records["a"]
        assert back is not rec and back.exit_code == 2 and back.attempt == 3
        assert len(records) == 301 and records.get("missing") is None
        assert records.get_many(["a", "o5", "missing"]).keys() == {"a", "o5"}
