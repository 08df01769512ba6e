"""Neighbours' claims of host cores and memory: the claims file's ``host`` list, written beside
the GPU claims (which an older gtui reads as before), read back, judged like a GPU claim, and
counted by placement on the real host."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gtui.core.gpus.claims import HOST_KEY, Claim, ClaimBoard, parse_board_file, user_name
from gtui.core.gpus.hostclaims import judge_host
from gtui.core.gpus.snapshot import HostHolder, HostInfo
from gtui.core.model import JobRecord, JobState
from gtui.core.sched.engine import Engine
from tests.conftest import write_queue
from tests.waiting import until

G = 1024
ME = user_name(os.geteuid())
HOST = HostInfo(16, 64 * G, 0)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process of ours for claims to name; ended in finally."""
    proc = subprocess.Popen(["sleep", "300"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def host_claim(pid: int, cpus: int = 8, ram: int = 16 * G, queue: str = "qa") -> Claim:
    start = psutil.Process(pid).create_time()
    return Claim(os.geteuid(), ME, HOST_KEY, ram, pid, start, "eval", start, queue, cpus=cpus)


def gpu_claim(pid: int, queue: str = "qa") -> Claim:
    start = psutil.Process(pid).create_time()
    return Claim(os.geteuid(), ME, "GPU-0", 60 * G, pid, start, "train", start, queue, index=0)


def test_host_claims_are_a_list_of_their_own_that_another_queue_reads(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    mine = [gpu_claim(sleeper.pid), host_claim(sleeper.pid)]
    assert ClaimBoard(tmp_path, queue="qa").publish(mine) is None
    doc = json.loads((tmp_path / f"{os.geteuid()}.json").read_text())
    # The GPU claims read as an older gtui wrote them; the host's are apart.
    assert [c["gpu"] for c in doc["claims"]] == ["GPU-0"]
    assert doc["host"] == [
        {
            "cpus": 8,
            "ram_mib": 16 * G,
            "pid": sleeper.pid,
            "start": mine[1].start,
            "job": "eval",
            "since": mine[1].since,
            "queue": "qa",
        }
    ]
    read = ClaimBoard(tmp_path, queue="qb").read()
    assert sorted(read.claims, key=lambda c: c.gpu) == sorted(mine, key=lambda c: c.gpu)
    assert read.notes == []
    held, notes = judge_host(read.claims, HOST)
    assert notes == []
    assert [(h.who, h.cpus, h.ram_mib) for h in held] == [(f"{ME}'s eval", 8, 16 * G)]
    assert 0 < held[0].ram_used_mib < 100  # sleep's resident memory, seen


def test_an_older_claims_file_reads_with_no_host_claims(sleeper: subprocess.Popen[bytes]) -> None:
    c = gpu_claim(sleeper.pid)
    old = {"gtui_claims": 1, "uid": os.geteuid(), "claims": [c.to_json()]}
    claims, idle, note = parse_board_file(json.dumps(old).encode(), os.geteuid(), ME)
    assert claims == [c] and idle == [] and note is None
    assert judge_host(claims, HOST) == ([], [])


def test_a_host_claim_counts_only_while_its_process_lives_and_fits_the_host(
    sleeper: subprocess.Popen[bytes],
) -> None:
    big = host_claim(sleeper.pid, cpus=64)
    held, notes = judge_host([big], HOST)
    assert held == [] and notes == [
        f"{ME}'s eval claims 64 cores and 16G RAM: ignored, more than the host has"
    ]
    live = host_claim(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    assert judge_host([live], HOST) == ([], [])


def test_malformed_host_claims_are_ignored_with_a_note(sleeper: subprocess.Popen[bytes]) -> None:
    good = host_claim(sleeper.pid).to_json()
    doc = {
        "gtui_claims": 1,
        "uid": os.geteuid(),
        "claims": [],
        "host": [good, {**good, "cpus": -1}, {**good, "cpus": 0, "ram_mib": 0}, "x"],
    }
    claims, _, note = parse_board_file(json.dumps(doc).encode(), os.geteuid(), ME)
    assert len(claims) == 1 and claims[0].cpus == 8
    assert note == "3 malformed claim(s) ignored"


async def test_a_neighbours_claim_of_cores_holds_our_job_until_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeper: subprocess.Popen[bytes]
) -> None:
    """On the real host, where cores are counted by what jobs asked: a neighbour holding one
    core keeps a job asking every core waiting, named in its reason; when the neighbour's
    process ends the job runs, and its own claim is published while it does."""
    board = tmp_path / "board"
    monkeypatch.setenv("GTUI_CLAIMS_DIR", str(board))
    monkeypatch.delenv("GTUI_FAKE_HOST", raising=False)
    cores = psutil.cpu_count() or 1
    ClaimBoard(board, queue="neighbour").publish([host_claim(sleeper.pid, cpus=1, ram=0)])
    q = write_queue(
        tmp_path,
        f'[settings]\npoll = "0.1s"\n\n[[jobs]]\nname = "every"\ngpus = 0\ncpus = {cores}\n'
        'cmd = "while [ ! -e go ]; do sleep 0.05; done"\n',
    )
    engine = Engine(q, fake_gpus="80G")
    task = asyncio.create_task(engine.run(exit_when_idle=True))
    try:
        want = f"needs {cores} cores: {cores - 1} free ({ME}'s eval 1)"

        def every() -> JobRecord | None:
            return next((v.record for v in engine.jobs() if v.record.name == "every"), None)

        await until(lambda: (r := every()) is not None and r.reason == want, timeout=30)
        sleeper.kill()
        sleeper.wait()
        await until(lambda: (r := every()) is not None and r.state == JobState.RUNNING, timeout=30)
        path = board / f"{os.geteuid()}.json"

        def ours_published() -> bool:
            doc = json.loads(path.read_text()) if path.exists() else {}
            return [(h["job"], h["cpus"]) for h in doc.get("host", [])] == [("every", cores)]

        await until(ours_published, timeout=30)
        (tmp_path / "go").touch()
        assert await asyncio.wait_for(task, 30) == 0
        assert engine.view("every").record.state == JobState.DONE
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


def test_holders_are_placement_data() -> None:
    h = HostHolder("bob's eval", 8, 16 * G, 20 * G)
    assert h.ram_promised_mib == 0
