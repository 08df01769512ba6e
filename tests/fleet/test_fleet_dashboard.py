"""The fleet dashboard in real tmux over a real ssh to two real sshd: it shows both hosts, a
kill from it reaches the right host's job, and a host whose sshd stops is shown unreachable
while the other stays live, until its sshd is back."""

from __future__ import annotations

import pytest

from tests.cli_helpers import final_state, live_state
from tests.fleet.conftest import Fleet
from tests.tmux_helpers import PY, capture, keys, outer, wait_screen
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("tmux_server")


def running(fleet: Fleet) -> None:
    for alias, q in fleet.queues.items():
        wait_for(lambda q=q, a=alias: live_state(q, f"{a}-long") == "running", what="running")


def test_the_dashboard_shows_both_hosts_and_a_kill_reaches_the_right_one(fleet: Fleet) -> None:
    running(fleet)
    outer(fleet.config.parent, "t", f"env -u COLUMNS -u LINES {PY} -m gtui fleet", size=(120, 35))
    wait_screen("t", "alpha-long")
    wait_screen("t", "beta-long")
    keys("t", "Up")  # the selection follows a job; the jobs come host by host, alpha first
    wait_screen("t", "alpha epoch 1 loss")  # the selected job's log, from its host
    screen = wait_screen("t", "scheduler running")
    print(f"\n--- 120x35 ---\n{capture('t')}")
    assert "alpha " in screen and "beta " in screen
    keys("t", "Down")  # beta's job, the second row
    wait_screen("t", "host   beta")
    wait_screen("t", "beta epoch 1 loss")
    keys("t", "x")
    wait_screen("t", "kill beta-long on beta?")
    keys("t", "y")
    wait_for(lambda: final_state(fleet.queues["beta"], "beta-long") == "killed", what="killed")
    assert live_state(fleet.queues["alpha"], "alpha-long") == "running"
    keys("t", "q")
    wait_screen("t", "rc=0")


def test_a_stopped_host_shows_unreachable_and_comes_back_at_80x24(fleet: Fleet) -> None:
    running(fleet)
    outer(fleet.config.parent, "t", f"env -u COLUMNS -u LINES {PY} -m gtui fleet", size=(80, 24))
    wait_screen("t", "alpha-long")
    wait_screen("t", "beta-long")
    keys("t", "Up")
    wait_screen("t", "alpha epoch 1 loss")
    print(f"\n--- 80x24 ---\n{capture('t')}")
    fleet.hosts["alpha"].stop()
    screen = wait_screen("t", "unreachable for", timeout=30)
    print(f"\n--- 80x24, alpha stopped ---\n{screen}")
    assert "beta-long" in screen and "alpha-long" in screen  # alpha's jobs as last seen
    # beta stays live: a change there shows while alpha is down.
    (fleet.queues["beta"].parent / "release-beta-long").touch()
    wait_screen("t", "done", timeout=30)
    fleet.hosts["alpha"].start()
    wait_for(lambda: "unreachable" not in capture("t"), timeout=60, what="alpha back")
    keys("t", "q")
    wait_screen("t", "rc=0")
