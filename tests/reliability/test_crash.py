"""Crash: the scheduler SIGKILLed at random moments, restarted, and nothing lost.

Each run is a generated queue of mixed jobs (succeed, fail, retry, exhaust retries, die by a
signal, depend on a job that succeeds or fails, two GPUs, no GPU); ``gtui run`` is SIGKILLed at a
random moment (sometimes at a random fault-injection point of the engine instead), sometimes
twice, restarted, and run to the end. Then every job must be in its right final state with the
right attempt count, every attempt must have started exactly once (the jobs' own record), every
attempt's exit status must be recorded, no process of the queue may be left, and every attempt's
output must be in its own log. CI runs 30 of them (``GTUI_CRASH_RUNS`` to change it; the soak,
``python -m soak``, runs hundreds).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from tests.reliability.mixed import (
    check_all,
    check_logs,
    check_no_orphans,
    check_runs,
    check_states,
    check_status_files,
    crash_run,
    kill_queue_processes,
    load_records,
    make_mixed,
    start_run,
)

RUNS = int(os.environ.get("GTUI_CRASH_RUNS", "30"))
BASE_SEED = int(os.environ.get("GTUI_CRASH_SEED", "0"))
WORKERS = 3  # runs at once: their jobs are short sleeps, so 2 cores keep up


@pytest.mark.slow
def test_crash_runs_lose_nothing(tmp_path: Path) -> None:
    seeds = range(BASE_SEED, BASE_SEED + RUNS)

    def one(seed: int):  # type: ignore[no-untyped-def]
        where = tmp_path / f"run{seed}"
        where.mkdir()
        try:
            return crash_run(where, seed)
        finally:
            kill_queue_processes(where / "q.toml")

    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(one, seeds))
    failures = [r for r in results if not r.ok]
    kills = sum(r.kills_landed for r in results)
    twice = sum(1 for r in results if r.kills_landed >= 2)
    print(
        f"\ncrash: {len(results)} runs, {kills} SIGKILLs landed ({twice} runs killed twice), "
        f"{len(failures)} failures"
    )
    assert not failures, "\n\n".join(f"{r.plan}:\n" + "\n".join(r.problems) for r in failures)
    # Runs must really be killed mid-queue, or the test proves little (on a fast machine more
    # kills land after the end, so only a third is required).
    assert sum(1 for r in results if r.kills_landed) >= len(results) / 3


# ---------------------------------------------------------------------------------------------
# the checks themselves must catch what they are meant to catch


def _clean_run(tmp_path: Path):  # type: ignore[no-untyped-def]
    import random

    mixed = make_mixed(tmp_path, random.Random(5), 10)
    proc = start_run(mixed.queue)
    out, _ = proc.communicate(timeout=60)
    assert check_all(mixed, [out]) == []
    return mixed


def test_the_checks_catch_a_second_start(tmp_path: Path) -> None:
    mixed = _clean_run(tmp_path)
    first = mixed.runs.read_text().splitlines()[0]
    with mixed.runs.open("a") as f:
        f.write(first + "\n")
    assert any("started 2 times" in p for p in check_runs(mixed))


def test_the_checks_catch_a_lost_or_wrong_exit_status(tmp_path: Path) -> None:
    mixed = _clean_run(tmp_path)
    run_dir = tmp_path / ".gtui" / "q.run"
    victim = next(run_dir.glob("fail-*.1.status"))
    victim.write_text("exit 0\n")
    other = next(run_dir.glob("ok-*.1.status"))
    other.unlink()
    problems = check_status_files(mixed)
    assert any("expected" in p and victim.name.split(".")[0] in p for p in problems)
    assert any("no exit status" in p for p in problems)


def test_a_launch_cut_short_leaves_an_empty_status_file_and_the_relaunch_writes_its_own(
    tmp_path: Path,
) -> None:
    """A scheduler SIGKILLed between creating an attempt's status file and starting its wrapper
    leaves the file empty; the relaunch of that attempt writes ``<name>.<attempt>.1.status``
    (never the other run's file), and the checks read that one."""
    import random

    mixed = make_mixed(tmp_path, random.Random(5), 10)
    killed = start_run(mixed.queue, "after_intent:1")  # the intent saved, nothing launched
    out, _ = killed.communicate(timeout=60)
    assert killed.returncode == -9, out
    (name,) = [n for n, r in load_records(mixed.queue).items() if r.status_file and not r.pid]
    empty = Path(load_records(mixed.queue)[name].status_file or "")
    empty.parent.mkdir(mode=0o700, exist_ok=True)
    empty.touch(mode=0o600)  # what the launch had done when the kill came
    proc = start_run(mixed.queue)
    out, _ = proc.communicate(timeout=60)
    assert empty.read_text() == ""
    relaunch = empty.with_name(f"{name}.1.1.status")
    assert relaunch.read_text().strip() == mixed.expect[name].exits[0]
    assert check_all(mixed, [out]) == []
    empty.write_text("exit 9\n")  # two runs' words for one attempt: caught
    assert any(p.startswith(f"{name}: attempt 1 status") for p in check_status_files(mixed))


def test_the_checks_catch_an_overwritten_log(tmp_path: Path) -> None:
    mixed = _clean_run(tmp_path)
    logs = sorted(mixed.log_dir.glob("retry-*.log"))
    assert len(logs) >= 2
    logs[1].write_text(logs[0].read_text())  # attempt 2's log now holds attempt 1's output
    problems = check_logs(mixed)
    assert any("holds the output of" in p for p in problems), problems
    assert any("output is in 2 logs" in p for p in problems), problems


def test_the_checks_catch_a_wrong_state(tmp_path: Path) -> None:
    import sqlite3

    mixed = _clean_run(tmp_path)
    name = next(n for n, e in mixed.expect.items() if e.state == "done")
    conn = sqlite3.connect(tmp_path / ".gtui" / "q.db", isolation_level=None)
    conn.execute(
        "UPDATE jobs SET data = replace(data, '\"done\"', '\"queued\"') WHERE name = ?", (name,)
    )
    conn.close()
    assert any(p.startswith(f"{name}: state queued") for p in check_states(mixed))


def test_the_checks_catch_an_orphan(tmp_path: Path) -> None:
    mixed = _clean_run(tmp_path)
    env = dict(os.environ, GTUI_QUEUE=str(mixed.queue.resolve()))
    orphan = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"], env=env, start_new_session=True
    )
    try:
        time.sleep(0.2)
        problems = check_no_orphans(mixed.queue, wait_s=0.2)
        assert any(str(orphan.pid) in p for p in problems), problems
    finally:
        orphan.kill()
        orphan.wait()
    assert not psutil.pid_exists(orphan.pid)
