"""Who holds each GPU: holders declared by the fake layer, real processes named
from the process table, staleness, ``gtui gpus``, and the waiting reason that names a holder."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from gtui.core.errors import GtuiError
from gtui.core.gpus.fake import FAKE_PID_BASE, FakeBackend, parse_fake_spec
from gtui.core.gpus.holders import (
    AGE_STEP_S,
    PARENT_GONE_IDLE_S,
    STALE_IDLE_S,
    HolderReader,
    coarse_age,
    held_text,
    holder_notes,
    short_command,
    stale_reasons,
)
from gtui.core.gpus.snapshot import GpuInfo, GpuProcess, GpuSnapshot
from gtui.core.sched.engine import Engine
from tests.commands.test_gpus_cli import gtui_gpus, with_fake_pynvml
from tests.conftest import write_queue
from tests.core.sched.test_engine import states
from tests.waiting import until, wait_for

G = 1024
SPEC = "80G:70G@0[alice 61G 3h python train.py; bob 2G 20m orphan jupyter-lab],24G@30"


def test_fake_spec_declares_holders() -> None:
    gpus = parse_fake_spec(SPEC)
    assert [h.user for h in gpus[0].holders] == ["alice", "bob"]
    assert gpus[0].others_mib == 70 * G and gpus[1].holders == ()
    assert gpus[0].holders[1].orphan and not gpus[0].holders[0].orphan
    # Without USED_BY_OTHERS the holders' memory is what others use.
    assert parse_fake_spec("80G[carol 10G 5m zombie python a.py, b]")[0].others_mib == 10 * G


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("80G:1G[alice 61G 3h python t.py]", "less than their holders hold"),
        ("80G[alice 61G python t.py]", "USER MEM AGE [zombie] [orphan] COMMAND"),
        ("80G[alice 61G 3h orphan]", "has no command"),
        ("80G[alice lots 3h python t.py]", "holder"),
        ("80G[alice 1G 3h python t.py", "holders end with ]"),
    ],
)
def test_bad_holders_are_one_clear_error(spec: str, words: str) -> None:
    with pytest.raises(GtuiError, match=re.escape(words)):
        parse_fake_spec(spec)
    r = gtui_gpus("--fake-gpus", spec)
    assert r.returncode == 2 and "Traceback" not in r.stderr and words in r.stderr


def test_fake_holders_show_as_processes_with_fixed_starts() -> None:
    backend = FakeBackend(SPEC)
    first, second = backend.read(), backend.read()
    procs = first.gpus[0].processes
    assert [p.pid for p in procs] == [FAKE_PID_BASE, FAKE_PID_BASE + 1]
    assert all(p.pid > 2**22 for p in procs)  # never a real process
    assert procs == second.gpus[0].processes  # the same spec read again: the same snapshot
    assert first.gpus[0].idle_since == min(p.started for p in procs if p.started)
    assert first.gpus[1].idle_since is None  # 30 %: busy


def test_stale_reasons_and_words() -> None:
    now = 100_000.0
    gpu = GpuInfo(0, "g", "u", 80 * G, 62 * G, 0, 30, idle_since=now - 2 * 3600)
    alice = GpuProcess(1, 61 * G, "alice", "python train.py", now - 3 * 3600)
    assert stale_reasons(gpu, alice, now) == ["idle at 0 % for 2 h"]
    assert held_text(gpu, alice, now) == (
        "GPU 0: 61G held by alice's python train.py, 3 h (stale: idle at 0 % for 2 h)"
    )
    fresh = GpuProcess(2, G, "bob", "x", now - 60, zombie=True, parent_gone=True)
    assert stale_reasons(gpu, fresh, now) == ["zombie"]  # idle 1 min: its parent is news only
    busy = GpuInfo(0, "g", "u", 80 * G, 62 * G, 40, 30)
    assert stale_reasons(busy, alice, now) == []
    assert coarse_age(59) == "<5 min" and coarse_age(49 * 60) == "45 min"
    # Never below the stale threshold once past it: a holder flagged at 15 min says 15 min.
    assert STALE_IDLE_S % AGE_STEP_S == 0 and coarse_age(STALE_IDLE_S) == "15 min"
    assert coarse_age(STALE_IDLE_S + 299) == "15 min" and coarse_age(STALE_IDLE_S + 300) == "20 min"
    assert coarse_age(3 * 3600 + 59) == "3 h" and coarse_age(3 * 86400) == "3 d"
    assert short_command(["/usr/bin/python3", "/home/a/train.py", "--lr", "0.1"]) == (
        "python3 train.py --lr 0.1"
    )
    assert len(short_command(["x" * 100])) == 40


def test_parent_gone_is_stale_only_on_a_gpu_idle_a_while() -> None:
    """A service or a nohup'd training has no parent of its own and works hard: its parent
    being gone is information; with the GPU idle PARENT_GONE_IDLE_S it is stale."""
    now = 100_000.0
    orphan = GpuProcess(2, G, "bob", "python train.py", now - 3600, parent_gone=True)
    busy = GpuInfo(0, "g", "u", 80 * G, G, 90, 30)
    assert stale_reasons(busy, orphan, now) == []
    assert holder_notes(busy, orphan, now) == ["parent gone"]
    short = GpuInfo(0, "g", "u", 80 * G, G, 0, 30, idle_since=now - PARENT_GONE_IDLE_S + 1)
    assert stale_reasons(short, orphan, now) == []
    idle = GpuInfo(0, "g", "u", 80 * G, G, 0, 30, idle_since=now - PARENT_GONE_IDLE_S)
    assert stale_reasons(idle, orphan, now) == ["parent gone", "idle at 0 % for 5 min"]
    assert holder_notes(idle, orphan, now) == []  # said as a stale reason already
    parented = dataclasses.replace(orphan, parent_gone=False)
    assert stale_reasons(idle, parented, now) == []  # 5 min idle alone: not yet


def test_idle_is_tracked_across_readings_and_reset_by_work() -> None:
    reader = HolderReader()

    def snap(util: int) -> GpuSnapshot:
        proc = GpuProcess(FAKE_PID_BASE, 10 * G, "alice", "python a.py", 0.0)
        return GpuSnapshot((GpuInfo(0, "g", "u", 80 * G, 10 * G, util, 30, (proc,)),), 0.0, "nvml")

    t0 = 1_000_000.0
    s = reader.describe(snap(0), t0)
    assert s.gpus[0].idle_since == t0
    later = reader.describe(snap(0), t0 + STALE_IDLE_S)
    g = later.gpus[0]
    assert stale_reasons(g, g.processes[0], t0 + STALE_IDLE_S) == ["idle at 0 % for 15 min"]
    assert reader.describe(snap(5), t0 + STALE_IDLE_S + 1).gpus[0].idle_since is None
    again = reader.describe(snap(0), t0 + STALE_IDLE_S + 2).gpus[0]
    assert again.idle_since == t0 + STALE_IDLE_S + 2  # the count starts over


def test_real_processes_are_named_from_the_process_table(tmp_path: Path) -> None:
    env = {**os.environ, "GTUI_JOB": "sweep-1"}
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    dead = subprocess.Popen(["true"])  # not waited for: a zombie
    try:
        wait_for(
            lambda: psutil.Process(dead.pid).status() == psutil.STATUS_ZOMBIE, what="a zombie"
        )
        procs = (GpuProcess(ours.pid, 3 * G), GpuProcess(dead.pid, G), GpuProcess(2**22 + 5, G))
        gpu = GpuInfo(0, "g", "u", 80 * G, 4 * G, 50, 30, procs)
        s = HolderReader().describe(GpuSnapshot((gpu,), 0.0, "nvml"))
        named, zombie, made_up = s.gpus[0].processes
        me = psutil.Process().username()
        assert named.user == me and named.job == "sweep-1"
        assert named.command is not None and named.command.startswith("python")
        assert named.started == pytest.approx(psutil.Process(ours.pid).create_time(), abs=0.1)
        assert not named.zombie and not named.parent_gone
        assert zombie.zombie and zombie.user == me
        assert made_up == procs[2]  # beyond pid_max: not asked of the process table
    finally:
        ours.kill()
        ours.wait()
        dead.wait()


def _described(pid: int, util: int = 50) -> GpuProcess:
    gpu = GpuInfo(0, "g", "u", 80 * G, G, util, 30, (GpuProcess(pid, G),))
    (p,) = HolderReader().describe(GpuSnapshot((gpu,), 0.0, "nvml")).gpus[0].processes
    return p


def _stop(pid: int) -> None:
    """Kill an adopted process (its adopter reaps it, not this test)."""
    with contextlib.suppress(psutil.Error):
        psutil.Process(pid).kill()


def test_a_process_whose_parent_died_is_marked(tmp_path: Path) -> None:
    """A double fork in a session of its own, as ``nohup python train.py &`` from a login shell
    that then exits: the sleeper is adopted (by init, or a subreaper above this test)."""
    pid_file = tmp_path / "pid"
    subprocess.run(
        ["bash", "-c", f"sleep 60 >/dev/null 2>&1 & echo $! > {pid_file}"],
        check=True,
        timeout=30,
        start_new_session=True,  # the shell leads a session, as a login shell does
    )
    pid = int(pid_file.read_text())
    try:
        wait_for(lambda: psutil.Process(pid).ppid() != os.getpid(), what="the sleeper adopted")
        p = _described(pid)
        assert p.parent_gone and stale_reasons(GpuInfo(0, "g", "u", 1, 1, 50, 30), p, 0.0) == []
    finally:
        _stop(pid)


# A process that makes itself a child subreaper (as systemd --user is), then runs a shell in a
# session of its own that starts a sleeper in the background and exits: the sleeper is adopted
# by this process, not by init. It prints the sleeper's pid and waits to be killed.
SUBREAPER = """
import ctypes, subprocess, sys, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    print("no", flush=True)
    time.sleep(60)
out = subprocess.run(
    ["bash", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"],
    capture_output=True, text=True, start_new_session=True, check=True,
)
print(out.stdout.strip(), flush=True)
time.sleep(60)
"""


def test_a_process_adopted_by_a_subreaper_has_its_parent_gone() -> None:
    helper = subprocess.Popen([sys.executable, "-c", SUBREAPER], stdout=subprocess.PIPE, text=True)
    assert helper.stdout is not None
    pid = 0
    try:
        line = helper.stdout.readline().strip()
        if line == "no":
            pytest.skip("prctl(PR_SET_CHILD_SUBREAPER) refused here")
        pid = int(line)
        wait_for(lambda: psutil.Process(pid).ppid() == helper.pid, what="adopted by the helper")
        assert _described(pid).parent_gone
        # The helper's own parent (this test) is alive and in its session: not gone.
        assert not _described(helper.pid).parent_gone
    finally:
        if pid:
            _stop(pid)
        helper.kill()
        helper.wait()


def test_a_session_leader_whose_parent_went_looks_like_a_service(tmp_path: Path) -> None:
    """A systemd service is started by init (or the user's manager) in a session of its own:
    no parent but init, and none missing. A process leading its own session is never counted
    as adopted, even when what ran ``setsid`` for it has gone (the case gtui cannot tell from a
    service)."""
    pid_file = tmp_path / "pid"
    subprocess.run(
        ["bash", "-c", f"setsid sleep 60 >/dev/null 2>&1 & echo $! > {pid_file}"],
        check=True,
        timeout=30,
    )
    pid = int(pid_file.read_text())
    try:
        wait_for(lambda: os.getsid(pid) == pid, what="sleep in a session of its own")
        assert not _described(pid).parent_gone
    finally:
        _stop(pid)


def test_gpus_command_shows_holders_in_text_and_json() -> None:
    r = gtui_gpus("--fake-gpus", SPEC)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Holders:" in out
    rows = out.split("Holders:", 1)[1].splitlines()
    (alice,) = [ln for ln in rows if "alice" in ln]
    assert alice.split()[:5] == ["0", str(FAKE_PID_BASE), "alice", "61G", "3:00:00"]
    assert "python train.py" in alice and alice.endswith("idle at 0 % for 3 h")
    (bob,) = [ln for ln in rows if "bob" in ln]
    assert "parent gone" in bob
    r = gtui_gpus("--json", "--fake-gpus", SPEC)
    data = json.loads(r.stdout)
    a = data[0]["processes"][0]
    assert (a["user"], a["command"], a["mem_mib"]) == ("alice", "python train.py", 61 * G)
    assert a["running_s"] == pytest.approx(3 * 3600, abs=60)
    assert a["stale"] == ["idle at 0 % for 3 h"] and a["job"] is None
    assert data[1]["processes"] == []


def test_gpus_command_names_nvml_processes(tmp_path: Path) -> None:
    """The real NVML path (the fake pynvml module): a pid NVML lists is named from the
    process table."""
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        config = {"gpus": [{"used_mib": 3000, "util": 0, "compute": [[holder.pid, 3000]]}]}
        r = gtui_gpus("--json", env=with_fake_pynvml(tmp_path, config))
        assert r.returncode == 0, r.stderr
        (p,) = json.loads(r.stdout)[0]["processes"]
        assert p["pid"] == holder.pid and p["user"] == psutil.Process().username()
        assert p["command"].startswith("python") and p["stale"] == []
    finally:
        holder.kill()
        holder.wait()


async def test_a_job_waiting_for_memory_names_the_holder(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "big"
        mem = "30G"
        cmd = "true"
        """,
    )
    engine = Engine(q, fake_gpus="80G:70G@0[alice 61G 3h python train.py; bob 2G 1h x]")
    task = asyncio.create_task(engine.run())
    try:
        words = "GPU 0: 61G held by alice's python train.py, 3 h (stale: idle at 0 % for 3 h)"
        await until(lambda: "big" in states(engine), what="the scheduler started")
        await until(lambda: words in engine.view("big").record.reason, what=words)
        assert "(+1 more)" in engine.view("big").record.reason
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


def test_our_jobs_root_pids_are_named_without_the_process_table() -> None:
    """The scheduler tells the reader its jobs' pids: a burst of short jobs must not each cost
    a look-up, and our job is never shown as somebody's holder."""
    gpu = GpuInfo(0, "g", "u", 80 * G, 10 * G, 90, 30, (GpuProcess(os.getpid(), 10 * G),))
    snap = HolderReader().describe(GpuSnapshot((gpu,), 0.0, "fake"), 0.0, {os.getpid(): "mine"})
    (p,) = snap.gpus[0].processes
    assert p.job == "mine" and p.user is None and p.command is None  # not looked up


def test_gpus_command_says_a_parent_gone_on_a_working_gpu_without_calling_it_stale() -> None:
    spec = "80G@60[bob 2G 20m orphan python train.py],80G@0[carol 3G 20m orphan jupyter-lab]"
    r = gtui_gpus("--fake-gpus", spec)
    assert r.returncode == 0, r.stderr
    rows = r.stdout.split("Holders:", 1)[1].splitlines()
    (bob,) = [ln for ln in rows if "bob" in ln]
    assert bob.endswith("python train.py  - (parent gone)")
    (carol,) = [ln for ln in rows if "carol" in ln]
    assert carol.endswith("parent gone, idle at 0 % for 20 min")
    data = json.loads(gtui_gpus("--json", "--fake-gpus", spec).stdout)
    p = data[0]["processes"][0]
    assert p["parent_gone"] and p["stale"] == []
