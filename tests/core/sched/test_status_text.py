"""The status document as text (sched/statustext.py) is exactly what ``json.dumps`` of the
dict form gives, for every kind of record; and a status of any size crosses the socket.

At 100,000 jobs the scheduler writes the document without a dict per never-run job,
and ``gtui status --json`` into a pipe passes the scheduler's bytes through. Both shortcuts
must never change one byte of what a user's script reads.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gtui.core.api import JobView
from gtui.core.control import rpc
from gtui.core.exec.memory import MemoryExecutor
from gtui.core.model import Diagnosis, JobRecord, JobState
from gtui.core.progress import Progress
from gtui.core.sched.engine import Engine
from gtui.core.sched.eta import Estimate
from gtui.core.sched.forecast import estimate_json
from gtui.core.sched.statustext import dumps, job_text, status_chunks, status_text
from gtui.core.state.status import job_dict
from tests.conftest import write_queue
from tests.waiting import until

NOW = 1_800_000_000.25


def records() -> list[JobRecord]:
    diag = Diagnosis(kind="oom", line='CUDA out of memory "x" é', hint="ask for more: 40%")
    return [
        JobRecord(name="fresh"),
        JobRecord(name="held", state=JobState.HELD, mem_mib=40960, reason="held by you"),
        JobRecord(
            name='odd "name" % é\t',
            mem_mib=1,
            reason='needs 40G, best GPU has 31G % "free"',
            reason_at=NOW - 3.5,
        ),
        JobRecord(name="no-reason-time", reason="waits", reason_at=None),
        JobRecord(name="warned", warnings=["mem far above its last runs"]),
        JobRecord(
            name="retried",
            attempt=1,
            gpus=(2,),
            exit_code=1,
            started_at=NOW - 100,
            ended_at=NOW - 50,
            log="/tmp/x.log",
            diagnosis=diag,
            peak_mib=30000,
            peak_gpu_mib=[30000],
            host_peak_mib=1200,
            reason="back-off",
        ),
        JobRecord(
            name="running",
            state=JobState.RUNNING,
            attempt=2,
            gpus=(0, 1),
            started_at=NOW - 60,
            log="/tmp/r.log",
            peak_mib=100,
            peak_gpu_mib=[100, 90],
            node="node2",
        ),
        JobRecord(
            name="done",
            state=JobState.DONE,
            attempt=1,
            exit_code=0,
            started_at=NOW - 9,
            ended_at=NOW - 1,
            log="/tmp/d.log",
        ),
        JobRecord(name="failed", state=JobState.FAILED, attempt=3, signal=9, diagnosis=diag),
        JobRecord(name="on-node", node="node1", reason="waits"),
        JobRecord(name="cpu", mem_mib=None, reason="max_parallel 2 reached", reason_at=NOW),
    ]


ESTIMATES = [
    None,
    Estimate(start_at=NOW + 1234.56),
    Estimate(start_at=NOW - 5.0),  # overdue: starts_in_s is 0, not negative
    Estimate(progress=Progress(0.425, "tqdm", "425/1000"), finish_at=NOW + 99.9, basis="progress"),
    Estimate(finish_at=NOW + 10.0, basis="history"),
]


@pytest.mark.parametrize("est", ESTIMATES, ids=lambda e: repr(e)[:40])
def test_each_job_reads_as_the_dict_form_would(est: Estimate | None) -> None:
    for rec in records():
        view = JobView(spec=None, record=rec, order=0)  # type: ignore[arg-type]
        want = job_dict(view)
        if est is not None:
            estimate_json(want, est, NOW)
        got = job_text(view, est, NOW, {})
        assert got == dumps(want), rec.name
        assert json.loads(got) == want


def test_the_whole_document_keeps_its_keys_in_order() -> None:
    views = [JobView(spec=None, record=r, order=i) for i, r in enumerate(records())]  # type: ignore[arg-type]
    head = {"queue": "/q.toml", "scheduler": {"running": True}, "paused": False, "gpus": [{}]}
    tail = {"problems": ["disk full"], "quarantined": {"1": "Xid 79"}}
    est = {"fresh": Estimate(start_at=NOW + 60)}
    text = status_text(head, views, tail, est, NOW)
    jobs = [job_dict(v) for v in views]
    estimate_json(jobs[0], est["fresh"], NOW)
    assert text == dumps({**head, "jobs": jobs, **tail})
    assert status_text({}, [], {}, {}, NOW) == '{"jobs":[]}'
    # In pieces of a few jobs, as the socket sends it: the same text.
    for size in (1, 2, 3, len(views), len(views) + 1):
        assert "".join(status_chunks(head, views, tail, est, NOW, size)) == text


async def test_a_running_engine_says_the_same_in_both_forms(tmp_path: Path) -> None:
    body = '[settings]\npoll = "0.1s"\nmax_parallel = 2\n\n' + "".join(
        f'[[jobs]]\nname = "j{i}"\ncmd = "{cmd}"\ngpus = {g}\n' + ('mem = "30G"\n\n' if g else "\n")
        for i, (cmd, g) in enumerate(
            [("exit 0", 0), ("exit 3", 0), ("sleep 3600", 1), ("sleep 3600", 1), ("true", 1)]
        )
    )
    q = write_queue(tmp_path, body)
    engine = Engine(q, fake_gpus="2x80G", executor=MemoryExecutor(), control=False)
    task = asyncio.create_task(engine.run())
    try:
        await until(
            lambda: (
                engine.started
                and {v.record.state for v in engine.jobs()}
                >= {JobState.DONE, JobState.FAILED, JobState.RUNNING, JobState.QUEUED}
            ),
            what="done, failed, running and waiting jobs",
        )
        # Taken in one turn of the loop, so nothing changes between the two.
        doc, text = engine.status_json(), "".join(engine.status_chunks())
        assert text == dumps(doc)
        assert {j["state"] for j in doc["jobs"]} >= {"done", "failed", "running", "queued"}
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


def test_a_reply_larger_than_64_mib_is_read_whole() -> None:
    """A status of 150,000 jobs is over 64 MiB: it was refused as too large, and read with a
    search of the whole buffer at every chunk."""
    a, b = socket.socketpair()
    payload = b'{"ok":true,"status":{"jobs":["' + b"x" * (70 << 20) + b'"]}}'

    def send() -> None:
        with b:
            b.sendall(payload + b"\n" + b"next line")

    sender = threading.Thread(target=send)
    sender.start()
    try:
        line = rpc._read_line(a)
    finally:
        sender.join()
        a.close()
    assert line == payload


async def test_status_json_into_a_pipe_is_the_schedulers_document(tmp_path: Path) -> None:
    """The pass-through path (no --state, stdout a pipe) against the decoding one (--state
    with every state): the same jobs, the same fields."""
    body = '[settings]\npoll = "0.1s"\n\n' + "".join(
        f'[[jobs]]\nname = "j{i}"\ncmd = "sleep 3600"\ngpus = 1\nmem = "50G"\n\n' for i in range(4)
    )
    q = write_queue(tmp_path, body)
    engine = Engine(q, fake_gpus="2x80G", executor=MemoryExecutor(), control=True)
    task = asyncio.create_task(engine.run())
    try:
        await until(
            lambda: engine.started and sum(v.record.active for v in engine.jobs()) == 2,
            what="two jobs running, two waiting",
        )

        def status(*extra: str) -> dict[str, object]:
            proc = subprocess.run(
                [sys.executable, "-m", "gtui", "status", str(q), "--json", *extra],
                capture_output=True, timeout=60,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr.decode()
            out: dict[str, object] = json.loads(proc.stdout)
            return out

        every = "queued,held,running,suspended,done,failed,killed,blocked,unknown"
        passed, decoded = await asyncio.gather(
            asyncio.to_thread(status), asyncio.to_thread(status, "--state", every)
        )
        assert passed["scheduler"]["running"] is True  # type: ignore[index]
        for doc in (passed, decoded):
            doc.pop("gpus"), doc.pop("host", None)  # read at different moments
            for j in doc["jobs"]:  # type: ignore[attr-defined]
                j.pop("reason_at"), j.pop("gpu_hours")
        assert passed == decoded
        states = sorted(j["state"] for j in passed["jobs"])  # type: ignore[attr-defined]
        assert states == ["queued", "queued", "running", "running"]
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()
