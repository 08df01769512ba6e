"""`gtui fleet status` and `gtui fleet kill` over a real ssh to two real sshd, each host's queue
run by a real headless scheduler."""

from __future__ import annotations

import json
import os

from tests.cli_helpers import final_state, gtui, live_state
from tests.fleet.conftest import Fleet
from tests.waiting import wait_for


def fleet_status(*args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    r = gtui("fleet", "status", "--json", *args)
    return r.returncode, json.loads(r.stdout)


def test_status_json_sees_both_hosts_jobs_and_gpus(fleet: Fleet) -> None:
    for alias, q in fleet.queues.items():
        wait_for(lambda q=q, a=alias: live_state(q, f"{a}-long") == "running", what="running")
    rc, doc = fleet_status()
    assert rc == 0, doc
    assert doc["unreachable"] == []
    by = {h["name"]: h for h in doc["hosts"]}
    assert set(by) == {"alpha", "beta"}
    for alias, h in by.items():
        assert h["reachable"] and h["scheduler"]
        assert [j["name"] for j in h["jobs"]] == [f"{alias}-long"]
        assert h["jobs"][0]["state"] == "running"
        assert len(h["gpus"]) == 2  # the scheduler's fake 2x80G


def test_kill_reaches_the_right_hosts_job(fleet: Fleet) -> None:
    for alias, q in fleet.queues.items():
        wait_for(lambda q=q, a=alias: live_state(q, f"{a}-long") == "running", what="running")
    r = gtui("fleet", "kill", fleet.target("beta"), "beta-long")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: final_state(fleet.queues["beta"], "beta-long") == "killed", what="killed")
    assert live_state(fleet.queues["alpha"], "alpha-long") == "running"
    # By the host's name from fleet.toml, too.
    r = gtui("fleet", "pause", "alpha", "alpha-long")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: live_state(fleet.queues["alpha"], "alpha-long") == "suspended", what="paused")


def test_a_stopped_host_is_unreachable_the_other_answers_and_it_comes_back(fleet: Fleet) -> None:
    fleet.hosts["alpha"].stop()
    rc, doc = fleet_status()
    assert rc == 1
    assert doc["unreachable"] == [f"alpha:{fleet.queues['alpha']}"]
    by = {h["name"]: h for h in doc["hosts"]}
    assert by["alpha"]["problem"] == "unreachable"
    assert "refused" in by["alpha"]["error"]  # ssh's own words, one line
    assert by["alpha"]["unreachable_since"] is not None
    assert by["beta"]["reachable"] and by["beta"]["jobs"]
    fleet.hosts["alpha"].start()
    rc, doc = fleet_status()
    assert rc == 0, doc


def test_a_host_without_gtui_says_what_to_install(fleet: Fleet) -> None:
    env = {**os.environ, "GTUI_SSH": fleet.ssh}
    r = gtui("fleet", "status", "--remote-gtui", "/nonexistent/gtui", "alpha:/q.toml", env=env)
    assert r.returncode == 1
    out = r.stdout + r.stderr
    assert "install gtui there" in out, out
