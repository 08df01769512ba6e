"""The dashboard's daily use in a real tmux: session names per folder, the prefix key tmux really uses, typing a
whole form in one ``send-keys``, and ``gtui stop`` ending a dashboard's process.

Each test runs on its own tmux server (the ``tmux_server`` fixture of tests/conftest.py).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import psutil
import pytest

from gtui.core import tmux
from gtui.core.paths import queue_paths
from gtui.core.state.lock import QueueLock
from tests.conftest import gtui, write_queue
from tests.tmux_helpers import PY, capture, job_state, keys, outer, sh, status, wait_screen
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
    pytest.mark.usefixtures("tmux_server"),
]

LONG = """
[settings]
poll = "0.3s"
kill_grace = "1s"

[[jobs]]
name = "long"
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"
"""


def test_tmux_key_names_read_as_the_dashboard_writes_keys() -> None:
    assert tmux.key_for_people("C-b") == "ctrl+b"
    assert tmux.key_for_people("C-a") == "ctrl+a"
    assert tmux.key_for_people("M-x") == "alt+x"
    assert tmux.key_for_people("C-M-q") == "ctrl+alt+q"
    assert tmux.key_for_people("F12") == "F12"
    assert tmux.key_for_people("`") == "`"


def test_the_prefix_shown_is_the_one_tmux_really_uses(tmp_path: Path) -> None:
    """Outside tmux, the prefix of gtui's own server, where its sessions run (it reads the
    same ~/.tmux.conf as the user's; set here by hand)."""
    queue = write_queue(tmp_path, LONG)
    script = tmp_path / "s.sh"
    script.write_text("exec sleep 60\n")
    tmux.new_session("gtui-q-000000", script, cwd=tmp_path, queue=queue)
    assert tmux.prefix_key() == "ctrl+b"  # tmux's default
    sh("set-option", "-t", "=gtui-q-000000:", "-g", "prefix", "C-a")
    assert tmux.prefix_key() == "ctrl+a"
    r = gtui("ls")
    assert "detach again with ctrl+a d" in r.stdout and "ctrl+b" not in r.stdout


@pytest.mark.slow
def test_the_quit_dialog_names_the_real_prefix_and_counts_suspended_apart(
    tmp_path: Path,
) -> None:
    """In a tmux whose prefix is ctrl+a, the quit dialog's detach hint says ctrl+a d; a
    suspended job is counted as suspended, not as running."""
    queue = write_queue(
        tmp_path,
        LONG
        + """
[[jobs]]
name = "other"
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"
""",
    )
    try:
        # Inside tmux (no `env -u TMUX`): the dashboard runs in place and knows it is in tmux.
        sh(
            "new-session", "-d", "-x", "100", "-y", "30", "-s", "term", "-c", str(tmp_path),
            f"{PY} -m gtui --fake-gpus 1x80G q.toml; echo rc=$?; sleep 60",
        )  # fmt: skip
        sh("set-option", "-g", "prefix", "C-a")
        wait_for(lambda: job_state(queue, "other") == "running", what="other running")
        r = gtui("pause", str(queue), "other")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: job_state(queue, "other") == "suspended", what="other suspended")
        wait_screen("=term:", "suspended")
        keys("=term:", "q")
        screen = wait_screen("=term:", "Quit gtui?")
        text = " ".join(screen.replace("│", " ").split())
        assert "2 jobs not ended (1 running, 1 suspended)" in text, screen
        assert "detach instead: ctrl+a d" in text and "ctrl+b" not in text, screen
        keys("=term:", "l")  # leave them
        wait_screen("=term:", "rc=0")
    finally:
        (tmp_path / "release").touch()
        for p in psutil.process_iter():
            try:
                if p.environ().get("GTUI_QUEUE") == str(queue.resolve()):
                    p.kill()
            except (psutil.Error, OSError):
                pass


@pytest.mark.slow
def test_two_queue_toml_in_two_folders_get_two_sessions_and_ls_shows_each_folder(
    tmp_path: Path,
) -> None:
    a, b = tmp_path / "exp-a", tmp_path / "exp-b"
    a.mkdir()
    b.mkdir()
    qa = write_queue(a, LONG, name="queue.toml")
    qb = write_queue(b, LONG, name="queue.toml")
    name_a, name_b = queue_paths(qa).tmux_session, queue_paths(qb).tmux_session
    assert name_a != name_b
    assert name_a.startswith("gtui-queue-") and name_b.startswith("gtui-queue-")
    try:
        outer(a, "term-a", f"{PY} -m gtui --fake-gpus 1x80G queue.toml")
        wait_for(lambda: tmux.has_session(name_a), what=f"the session {name_a}")
        outer(b, "term-b", f"{PY} -m gtui --fake-gpus 1x80G queue.toml")
        # Not an attach to a's session: its own, and b's queue runs.
        wait_for(lambda: tmux.has_session(name_b), what=f"the session {name_b}")
        wait_for(lambda: job_state(qb, "long") == "running", what="b's job running")
        wait_for(lambda: job_state(qa, "long") == "running", what="a's job running")
        assert tmux.session_queue(name_a) == str(qa.resolve())
        assert tmux.session_queue(name_b) == str(qb.resolve())
        r = gtui("ls")
        rows = {line.split()[0]: line for line in r.stdout.splitlines() if line}
        assert str(a.resolve()) in rows[name_a] and str(b.resolve()) in rows[name_b], r.stdout
        assert "queue.toml" in rows[name_a] and "queue.toml" in rows[name_b]
    finally:
        (a / "release").touch()
        (b / "release").touch()
    wait_for(lambda: status(qa)["jobs"][0]["state"] == "done", what="a's job done")
    wait_for(lambda: status(qb)["jobs"][0]["state"] == "done", what="b's job done")
    for name in (name_a, name_b):
        keys(f"={name}:", "q")
        wait_for(lambda n=name: not tmux.has_session(n), what=f"{name} to end")  # type: ignore[misc]


@pytest.mark.slow
def test_gtui_stop_ends_a_dashboards_scheduler_and_the_dashboard_quits(tmp_path: Path) -> None:
    """`gtui stop q.toml` while a dashboard (in place, a real terminal) runs the scheduler:
    the dashboard's process exits, the command returns once it has, the job runs on."""
    queue = write_queue(tmp_path, LONG)
    try:
        outer(tmp_path, "term", f"{PY} -m gtui --no-tmux --fake-gpus 1x80G q.toml")
        wait_for(lambda: job_state(queue, "long") == "running", what="long running")
        wait_screen("=term:", "running")
        dashboard = [
            p
            for p in psutil.process_iter(["cmdline"])
            if "--no-tmux" in (p.info["cmdline"] or []) and str(tmp_path) in p.cwd()
        ]
        assert len(dashboard) == 1
        r = gtui("stop", str(queue))
        assert r.returncode == 0, r.stderr
        assert f"stopped the scheduler (pid {dashboard[0].pid})" in r.stdout
        assert not dashboard[0].is_running() or dashboard[0].status() == psutil.STATUS_ZOMBIE
        screen = wait_screen("=term:", "rc=0")
        assert "stopped by `gtui stop`" in screen, screen
        assert job_state(queue, "long") == "running"  # left running, for the next scheduler
    finally:
        (tmp_path / "release").touch()


@pytest.mark.slow
def test_a_whole_form_sent_in_one_send_keys_lands_in_the_right_fields(tmp_path: Path) -> None:
    """`a`, then every field typed at once, faster than the screen refreshes: the form opens,
    each value lands in its field (enter moves on), ctrl+s adds the job as typed."""
    queue = write_queue(tmp_path, LONG)
    try:
        outer(tmp_path, "term", f"{PY} -m gtui --no-tmux --fake-gpus 1x80G q.toml", (100, 30))
        wait_for(lambda: job_state(queue, "long") == "running", what="long running")
        wait_screen("=term:", "running")
        keys(
            "=term:",
            "a", "Enter",                     # name: empty (the cursor starts there)
            "echo typed-fast", "Enter",       # cmd
            "0", "Enter",                     # gpus
            "Enter",                          # mem: empty
            "5", "Enter",                     # priority
            "long", "Enter",                  # after
            "2", "Enter",                     # retries
            "1h", "Enter",                    # timeout
            "Enter",                          # cwd: empty
            "SEED=7 MODE=x", "C-s",           # env, then save
        )  # fmt: skip
        try:
            wait_for(lambda: "typed-fast" in queue.read_text(), what="the job written to the file")
        except AssertionError:
            raise AssertionError(sh("capture-pane", "-p", "-t", "=term:").stdout) from None
        jobs = {j["name"]: j for j in status(queue)["jobs"]}
        added = next(j for n, j in jobs.items() if n != "long")
        text = queue.read_text()
        assert 'cmd = "echo typed-fast"' in text, text
        assert "gpus = 0" in text and "priority = 5" in text and "retries = 2" in text, text
        assert 'after = ["long"]' in text and 'timeout = "1h"' in text, text
        assert 'SEED = "7"' in text and 'MODE = "x"' in text, text
        assert added["state"] == "queued"  # after long, which still runs
        keys("=term:", "q")
        wait_screen("=term:", "Quit gtui?")
        keys("=term:", "l")  # leave
        wait_screen("=term:", "rc=0")
    finally:
        (tmp_path / "release").touch()


FILTERED = """
[settings]
poll = "0.3s"
kill_grace = "1s"

[[jobs]]
name = "long"
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"

[[jobs]]
name = "vit-small"
gpus = 0
after = ["long"]
cmd = "true"

[[jobs]]
name = "resnet"
gpus = 0
after = ["long"]
cmd = "true"
"""


def test_a_filter_typed_in_one_send_keys_filters_and_runs_no_key_of_its_own(
    tmp_path: Path,
) -> None:
    """`/`, a name and enter, typed at once: every letter lands in the filter line (none runs
    as a main-screen key: `t` would move the job to the top, `p` pause it, `d` remove it), and
    enter leaves the cursor on the one match, so the next `p` holds the job shown."""
    queue = write_queue(tmp_path, FILTERED)
    try:
        outer(tmp_path, "term", f"{PY} -m gtui --no-tmux --fake-gpus 1x80G q.toml", (100, 30))
        wait_for(lambda: job_state(queue, "long") == "running", what="long running")
        wait_screen("=term:", "running")
        keys("=term:", "/", "vit-s", "Enter", "p")
        try:
            wait_for(lambda: job_state(queue, "vit-small") == "held", what="the job shown held")
            wait_screen("=term:", "name~vit-s")
        except AssertionError:
            raise AssertionError(sh("capture-pane", "-p", "-t", "=term:").stdout) from None
        assert job_state(queue, "resnet") == "queued" and job_state(queue, "long") == "running"
        text = queue.read_text()
        assert text.index('name = "vit-small"') < text.index('name = "resnet"')  # no `t`
        keys("=term:", "q")
        wait_screen("=term:", "Quit gtui?")
        keys("=term:", "l")  # leave
        wait_screen("=term:", "rc=0")
    finally:
        (tmp_path / "release").touch()


# -- a second `gtui q.toml` where the queue already runs in some tmux window ---------------------


def _window(*args: str) -> str:
    """Start a session or window (``new-session ...`` / ``new-window ...``); its window id."""
    r = sh(*args[:1], "-P", "-F", "#{window_id}", *args[1:])
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.slow
@pytest.mark.parametrize("viewer", [False, True], ids=["no-client", "a-client"])
def test_gtui_in_another_window_of_the_dashboards_own_session_opens_a_client_there(
    tmp_path: Path, viewer: bool
) -> None:
    """A `--no-tmux` dashboard in window 0 of the user's session `work`, then `gtui q.toml` in a
    second window of that session (with a terminal attached to `work`, or none): switching to
    `work` would change nothing (it exited 0 showing nothing, or 1 saying nothing), so the
    second window shows the dashboard itself, on the first one's scheduler, and quitting it
    leaves that scheduler and its job running."""
    queue = write_queue(tmp_path, LONG)
    try:
        first = _window(
            "new-session", "-d", "-x", "100", "-y", "30", "-s", "work", "-c", str(tmp_path),
            f"{PY} -m gtui --no-tmux --fake-gpus 1x80G q.toml; echo rc=$?; sleep 60",
        )  # fmt: skip
        wait_for(lambda: job_state(queue, "long") == "running", what="long running")
        wait_screen(first, "running")
        if viewer:  # a terminal that shows `work`
            outer(tmp_path, "viewer", "tmux attach-session -t =work")
            wait_for(lambda: sh("list-clients", "-t", "=work").stdout.strip(), what="a client")
        holder = QueueLock(queue_paths(queue)).holder()
        second = _window(
            "new-window", "-d", "-t", "=work:", "-c", str(tmp_path),
            f"{PY} -m gtui --fake-gpus 1x80G q.toml; echo rc=$?; sleep 60",
        )  # fmt: skip
        try:
            shown = wait_screen(second, "attached to the")  # the notice: a toast for a while
        except AssertionError as e:
            raise AssertionError(f"{e}\nthe first window:\n{capture(first)}") from None
        notice = " ".join(shown.replace("│", " ").replace("▌", " ").split())
        assert f"(pid {holder})" in notice and "leaves it and its jobs" in notice, shown
        assert "rc=" not in wait_screen(second, "running")
        assert not tmux.has_session(queue_paths(queue).tmux_session)  # no session was made
        # An action in the client reaches the scheduler of the first window.
        keys(second, "P")
        wait_for(
            lambda: status(queue).get("paused") is True, what="the queue paused from the client"
        )
        wait_screen(first, "PAUSED")
        keys(second, "q")
        assert "rc=0" in wait_screen(second, "rc=")
        assert "rc=" not in capture(first) and job_state(queue, "long") == "running"
    finally:
        (tmp_path / "release").touch()


@pytest.mark.slow
def test_gtui_outside_tmux_opens_a_client_of_a_queue_run_in_the_users_own_session(
    tmp_path: Path,
) -> None:
    """The queue runs in a window of the user's session `work` (not one gtui made): `gtui
    q.toml` in a plain terminal opens the dashboard there, as a client, instead of attaching
    the terminal to the user's session."""
    queue = write_queue(tmp_path, LONG)
    try:
        sh(
            "new-session", "-d", "-x", "100", "-y", "30", "-s", "work", "-c", str(tmp_path),
            f"{PY} -m gtui --no-tmux --fake-gpus 1x80G q.toml; echo rc=$?; sleep 60",
        )  # fmt: skip
        wait_for(lambda: job_state(queue, "long") == "running", what="long running")
        outer(tmp_path, "term", f"{PY} -m gtui --fake-gpus 1x80G q.toml", (100, 30))
        wait_screen("=term:", "attached to the")
        wait_screen("=term:", "running")
        assert sh("list-clients").stdout.strip() == ""  # no terminal attached to `work`
        keys("=term:", "q")
        assert "rc=0" in wait_screen("=term:", "rc=")
        assert "rc=" not in capture("=work:") and job_state(queue, "long") == "running"
    finally:
        (tmp_path / "release").touch()


@pytest.mark.slow
def test_gtui_in_the_users_tmux_opens_a_client_of_the_queues_gtui_session(tmp_path: Path) -> None:
    """The queue's dashboard runs in the session gtui made for it, on gtui's own tmux server;
    `gtui q.toml` in the user's own tmux (a session no terminal shows, even) cannot switch
    there across servers: it opens the dashboard in place, on that scheduler."""
    queue = write_queue(tmp_path, LONG)
    name = queue_paths(queue).tmux_session
    try:
        outer(tmp_path, "term", f"{PY} -m gtui --fake-gpus 1x80G q.toml", (100, 30))
        wait_for(lambda: tmux.has_session(name), what=f"the session {name}")
        wait_for(lambda: job_state(queue, "long") == "running", what="long running")
        # The terminal goes (its `tmux attach` with it): the session runs on, with no client.
        sh("kill-session", "-t", "=term")
        wait_for(lambda: sh("list-clients").stdout.strip() == "", what="no client left")
        sh(
            "new-session", "-d", "-x", "100", "-y", "30", "-s", "work", "-c", str(tmp_path),
            f"{PY} -m gtui --fake-gpus 1x80G q.toml; echo rc=$?; sleep 60",
        )  # fmt: skip
        wait_screen("=work:", "attached to the")
        wait_screen("=work:", "running")
        keys("=work:", "q")
        assert "rc=0" in wait_screen("=work:", "rc=")
        assert tmux.has_session(name) and job_state(queue, "long") == "running"
    finally:
        (tmp_path / "release").touch()
