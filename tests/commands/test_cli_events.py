"""``gtui events``, ``gtui status --state / --watch``, and job names as globs and
sweep base names (kill / pause / resume / retry), against a real headless scheduler."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import (
    FAKE,
    Procs,
    final_state,
    gate,
    gtui,
    in_pty,
    live_state,
    release,
    status,
)
from tests.conftest import write_queue
from tests.waiting import wait_for


def queue(tmp: Path) -> Path:
    return write_queue(
        tmp,
        f"""
        [settings]
        poll = "0.2s"
        kill_grace = "1s"

        [[jobs]]
        name = "a"
        gpus = 0
        cmd = "{gate("a")}"

        [[jobs]]
        name = "b"
        gpus = 0
        after = ["a"]
        cmd = "echo b"

        [[jobs]]
        name = "c"
        gpus = 0
        cmd = "exit 1"

        [[jobs]]
        name = "sweep"
        gpus = 0
        after = ["a"]
        matrix = {{ lr = [1, 2, 3] }}
        cmd = "test {{lr}} != 2"

        [[jobs]]
        name = "keeper"  # keeps the scheduler running (it exits once nothing more can run)
        gpus = 0
        cmd = "{gate("keeper")}"
        """,
    )


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def transitions(text: str) -> list[tuple[str, str | None, str]]:
    return [(e["name"], e["from"], e["state"]) for e in json_lines(text) if e["type"] == "job"]


def test_events_one_json_line_per_transition(tmp_path: Path, procs: Procs) -> None:
    q = queue(tmp_path)
    procs.scheduler(q)
    wait_for(lambda: live_state(q, "c") == "failed", what="c failed")
    ev = procs.start("events", str(q))
    ev.wait_for('"type":"scheduler","running":true')
    release(q, "a")
    wait_for(lambda: ("b", "running", "done") in transitions(ev.text()), what="b done, told")
    assert gtui("pause", str(q)).returncode == 0
    assert gtui("rm", str(q), "c").returncode == 0
    ev.wait_for('"state":"removed"')
    assert gtui("stop", str(q)).returncode == 0
    ev.wait_for('"type":"scheduler","running":false')
    r = gtui("retry", str(q), "b")  # with no scheduler: the saved state, followed too
    assert r.returncode == 0, r.stderr
    wait_for(lambda: ("b", "done", "queued") in transitions(ev.text()), what="b queued, told")

    seen = transitions(ev.text())
    for step in [
        ("a", "running", "done"),
        ("b", "queued", "running"),  # however fast b went: each of its states is a line
        ("b", "running", "done"),
        ("sweep-lr=2", "running", "failed"),
        ("c", "failed", "removed"),
        ("b", "done", "queued"),
    ]:
        assert step in seen, (step, seen)
    assert seen.index(("a", "running", "done")) < seen.index(("b", "queued", "running"))
    assert len(seen) == len(set(seen))  # one line per transition, not per event
    events = json_lines(ev.text())
    assert {"type": "queue", "paused": True} in [
        {k: v for k, v in e.items() if k != "time"} for e in events
    ]
    done_b = next(e for e in events if e.get("name") == "b" and e["state"] == "done")
    assert done_b["exit_code"] == 0 and done_b["log"].endswith("b.1.log")
    assert "no scheduler runs q.toml; following its saved state" in ev.text()


def test_status_state_filter_and_watch(tmp_path: Path, procs: Procs) -> None:
    q = queue(tmp_path)
    release(q, "a")
    release(q, "keeper")
    assert gtui("run", str(q), "--fake-gpus", FAKE).returncode == 1
    r = gtui("status", str(q), "--state", "failed,waiting")
    assert r.returncode == 0, r.stderr
    assert "2 of 7 jobs in state failed, held, queued" in r.stdout
    rows = [line.split()[0] for line in r.stdout.splitlines() if line.startswith("  ")]
    assert [n for n in rows if n in ("a", "b", "c", "sweep-lr=1", "sweep-lr=2")] == [
        "c",
        "sweep-lr=2",
    ]
    r = gtui("status", str(q), "--json", "--state", "done")
    assert [j["name"] for j in json.loads(r.stdout)["jobs"]] == [
        "a",
        "b",
        "sweep-lr=1",
        "sweep-lr=3",
        "keeper",
    ]
    r = gtui("status", str(q), "--state", "finished")
    assert r.returncode == 2 and "'finished' is no state" in r.stderr

    w = procs.start("status", str(q), "--watch", "--interval", "0.2s", "--state", "trouble")
    wait_for(lambda: w.text().count("every 0.2s: gtui status") >= 2, what="two redraws")
    code, out = in_pty("status", str(q), "--watch", "--state", "failed", until="sweep-lr=2")
    assert code == 0  # Ctrl-C ends it, as watch(1)
    text = out.decode()
    assert "\x1b[H" in text and "every 2s: gtui status" in text and "sweep-lr=2" in text


def test_globs_and_sweep_names_act_where_the_verb_applies(tmp_path: Path, procs: Procs) -> None:
    q = queue(tmp_path)
    procs.scheduler(q)
    wait_for(lambda: live_state(q, "c") == "failed", what="c failed")
    r = gtui("pause", str(q), "sweep")  # waiting for a: all three held
    assert r.returncode == 0, r.stderr
    assert "sweep: 3 jobs (sweep-lr=1, sweep-lr=2, sweep-lr=3)" in r.stderr
    assert [live_state(q, f"sweep-lr={i}") for i in (1, 2, 3)] == ["held"] * 3
    r = gtui("resume", str(q), "sweep-lr=[12]")
    assert r.stdout == "resumed sweep-lr=1\nresumed sweep-lr=2\n", r.stderr
    assert gtui("resume", str(q), "sweep-lr=3").returncode == 0
    release(q, "a")
    wait_for(lambda: live_state(q, "sweep-lr=2") == "failed", what="sweep-lr=2 failed")
    wait_for(lambda: final_state(q, "sweep-lr=3") == "done", what="sweep-lr=3 done")

    r = gtui("status", str(q), "--state", "failed")  # from the running scheduler
    assert "scheduler: running" in r.stdout and "2 of 7 jobs in state failed" in r.stdout
    r = gtui("retry", str(q), "sweep", "c")  # the pattern takes what did not end done
    assert r.returncode == 0, r.stderr
    assert "skipped 2 jobs that retry does not apply to (done 2)" in r.stderr
    assert r.stdout.splitlines()[0] == "queued sweep-lr=2 again"
    r = gtui("retry", str(q), "b*")  # b ended done: nothing to retry
    assert (r.returncode, r.stdout) == (0, "nothing to retry\n"), r.stderr
    r = gtui("kill", str(q), "zz*")
    assert r.returncode == 2 and "zz* matches no job in q.toml" in r.stderr
    r = gtui("wait", str(q), "swep")
    assert r.returncode == 2 and "no job named 'swep' in q.toml; did you mean `sweep`?" in r.stderr


def sixty_jobs(tmp: Path, *, keeper: bool) -> Path:
    jobs = "".join(f'\n[[jobs]]\nname = "j{i:02}"\ngpus = 0\ncmd = "true"\n' for i in range(60))
    if keeper:  # keeps the scheduler running (it exits once nothing more can run)
        jobs += f'\n[[jobs]]\nname = "keeper"\ngpus = 0\ncmd = "{gate("keeper")}"\n'
    return write_queue(tmp, '[settings]\npoll = "0.2s"\n' + jobs)


def job_lines(text: str) -> dict[str, list[dict[str, Any]]]:
    by_name: dict[str, list[dict[str, Any]]] = {}
    for e in json_lines(text):
        if e["type"] == "job":
            by_name.setdefault(e["name"], []).append(e)
    return by_name


def all_done(q: Path, n: int) -> bool:
    jobs = status(q)["jobs"]
    return sum(j["state"] == "done" for j in jobs) == n


def test_events_started_before_the_scheduler_shows_each_of_its_jobs_start_and_end(
    tmp_path: Path, procs: Procs
) -> None:
    """`gtui events` follows the saved state while no scheduler runs; the jobs the first
    scheduler runs before events reaches its socket still show queued, running, done: the
    scheduler replays its events from its start (here events is stopped with SIGSTOP until all
    sixty have run, the widest that window can be)."""
    q = sixty_jobs(tmp_path, keeper=True)
    ev = procs.start("events", str(q))
    ev.wait_for("no scheduler runs q.toml")
    ev.proc.send_signal(signal.SIGSTOP)
    try:
        procs.scheduler(q)
        wait_for(lambda: all_done(q, 60), what="the sixty jobs done")
    finally:
        ev.proc.send_signal(signal.SIGCONT)
    wait_for(
        lambda: (
            len(job_lines(ev.text())) >= 60
            and all(
                lines[-1]["state"] == "done"
                for n, lines in job_lines(ev.text()).items()
                if n != "keeper"
            )
        ),
        what="every job's end, told",
    )
    release(q, "keeper")
    by_name = job_lines(ev.text())
    for i in range(60):
        seen = [(e["from"], e["state"], e.get("missed", False)) for e in by_name[f"j{i:02}"]]
        assert seen == [("queued", "running", False), ("running", "done", False)], (i, seen)


def test_events_says_what_it_missed_when_the_scheduler_came_and_went_unseen(
    tmp_path: Path, procs: Procs
) -> None:
    """A whole `gtui run` between two reads of the saved state: its events are gone with it.
    Each job's line says so (``"missed": true``: it ran, unseen), never a silent queued to
    done."""
    q = sixty_jobs(tmp_path, keeper=False)
    ev = procs.start("events", str(q))
    ev.wait_for("no scheduler runs q.toml")
    ev.proc.send_signal(signal.SIGSTOP)
    try:
        assert gtui("run", str(q), "--fake-gpus", FAKE).returncode == 0
    finally:
        ev.proc.send_signal(signal.SIGCONT)
    wait_for(lambda: len(job_lines(ev.text())) == 60, what="every job's end, told")
    for name, lines in job_lines(ev.text()).items():
        assert [(e["from"], e["state"]) for e in lines] == [("queued", "done")], (name, lines)
        assert lines[0]["missed"] is True and lines[0]["attempt"] == 1


@pytest.mark.parametrize(
    ("before", "now", "diagnosis", "missed"),
    [
        (("queued", 0), ("running", 1), None, False),  # a start, seen
        (("running", 1), ("done", 1), None, False),
        (("done", 1), ("queued", 1), None, False),  # `gtui retry`
        (None, ("running", 1), None, False),  # new to the stream as it starts
        (("queued", 0), ("failed", 1), "launch", False),  # never ran: its launch failed
        (("queued", 0), ("queued", 1), "launch", False),  # ... and waits to try again
        (("queued", 0), ("done", 1), None, True),  # ran unseen
        (("queued", 0), ("failed", 1), "cuda_oom", True),
        (("running", 1), ("running", 2), None, True),  # an end and a start unseen
        (("queued", 1), ("running", 3), None, True),
        (None, ("done", 1), None, True),
    ],
)
def test_a_change_that_hides_a_run_is_marked_missed(
    before: tuple[str, int] | None, now: tuple[str, int], diagnosis: str | None, missed: bool
) -> None:
    from gtui.commands.events import skipped

    job = {"diagnosis": {"kind": diagnosis} if diagnosis else None}
    assert skipped(before, now, job) is missed
