"""tmux helpers, `gtui ls` / `gtui attach`, and the dashboard in a real tmux on fake GPUs.

Every test gets its own tmux server (TMUX_TMPDIR), so nothing touches the user's sessions.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

import psutil
import pytest

from gtui.core import tmux
from gtui.core.paths import queue_paths
from tests.conftest import gtui, write_queue
from tests.tmux_helpers import (
    PY,
    capture,
    job_processes,
    job_state,
    keys,
    outer,
    sh,
    status,
    wait_field,
    wait_screen,
    wait_screen_match,
)
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

# -- helpers on a real tmux -----------------------------------------------------------------


def test_sessions_record_their_queue_and_names_match_exactly(
    tmux_server: Path, tmp_path: Path
) -> None:
    script = tmp_path / "s.sh"
    script.write_text("exec sleep 60\n")
    queue = tmp_path / "q.toml"
    tmux.new_session("gtui-q", script, cwd=tmp_path, queue=queue, width=100, height=20)
    tmux.new_session("gtui-q2", script, cwd=tmp_path, queue=tmp_path / "q2.toml")
    sh("new-session", "-d", "-s", "other", "sleep 60")
    assert tmux.has_session("gtui-q") and not tmux.has_session("gtui")
    sessions = {s.name: s for s in tmux.list_sessions()}
    assert set(sessions) == {"gtui-q", "gtui-q2"}
    assert sessions["gtui-q"].queue == str(queue) and sessions["gtui-q"].attached == 0
    assert tmux.session_queue("gtui-q2") == str(tmp_path / "q2.toml")
    assert tmux.session_queue("nope") is None
    # the session's process, and its children, are found from a pid
    pane = sessions["gtui-q"].pane_pid
    assert pane is not None and tmux.session_of_pid(pane) == "gtui-q"
    assert tmux.session_of_pid(os.getpid()) is None
    tmux.kill_session("gtui-q")
    assert not tmux.has_session("gtui-q")


def test_launcher_script_keeps_the_environment_and_the_directory(
    tmux_server: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out.txt"
    monkeypatch.setenv("GTUI_TEST_VAR", "it's kept; $HOME too")
    work = tmp_path / "work dir"
    work.mkdir()
    argv = ["/bin/sh", "-c", f'echo "$GTUI_TEST_VAR|$(pwd)" > "{out}"']
    script = tmp_path / "launch.sh"
    script.write_text(tmux.launcher_script(argv, work, os.environ))
    tmux.new_session("gtui-env", script, cwd=tmp_path, queue=tmp_path / "q.toml")
    wait_for(out.exists, what="the launcher's output")
    wait_for(lambda: out.read_text().strip() != "")
    assert out.read_text().strip() == f"it's kept; $HOME too|{work}"
    assert not script.exists()  # it removes itself: the environment is not left on disk


def test_ls_lists_sessions_and_attach_needs_a_terminal(tmux_server: Path, tmp_path: Path) -> None:
    r = gtui("ls")
    assert r.returncode == 0 and "no gtui sessions" in r.stdout
    script = tmp_path / "s.sh"
    script.write_text("exec sleep 60\n")
    queue = write_queue(tmp_path, '[[jobs]]\ncmd = "true"\n')
    tmux.new_session("gtui-q", script, cwd=tmp_path, queue=queue)
    r = gtui("ls")
    assert r.returncode == 0
    assert "gtui-q" in r.stdout and "detached" in r.stdout
    assert queue.name in r.stdout and str(queue.parent) in r.stdout  # the file and its folder
    assert "not running" in r.stdout  # nobody holds the queue's lock
    r = gtui("attach", str(queue))  # the session exists, but stdin is not a terminal
    assert r.returncode == 2 and "needs a terminal" in r.stderr
    r = gtui("attach", str(tmp_path / "other.toml"))
    assert r.returncode == 2 and "no gtui session runs" in r.stderr


# -- the dashboard itself ----------------------------------------------------------------------

QUEUE = """
[settings]
poll = "0.3s"
kill_grace = "1s"

[[jobs]]
name = "long"
cmd = "sleep 60"
gpus = 1
mem = "10G"

[[jobs]]
name = "after-long"
cmd = "echo done"
gpus = 1
after = ["long"]
"""


@pytest.mark.slow
def test_gtui_starts_a_tmux_session_and_every_key_acts(tmux_server: Path, tmp_path: Path) -> None:
    queue = write_queue(tmp_path, QUEUE)
    name = queue_paths(queue).tmux_session  # gtui-q-<hash of the queue's folder>
    outer(tmp_path, "term", f"{PY} -m gtui q.toml --fake-gpus 2x80G")
    wait_for(lambda: tmux.has_session(name), what=f"the {name} session")
    target = f"={name}:"
    wait_screen(target, "long")
    # The GPU panel's title comes with its first reading, which can paint after the table.
    wait_screen(target, "SIMULATED GPUs")
    # It runs itself with --no-tmux, the same fake GPUs, the same cwd, and records its queue.
    assert tmux.session_queue(name) == str(queue.resolve())
    pane = tmux.list_sessions()[0].pane_pid
    assert pane is not None
    procs = [psutil.Process(pane), *psutil.Process(pane).children(recursive=True)]
    me = []
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):  # a passing child, already gone
            if "gtui" in " ".join(p.cmdline()) and "--no-tmux" in p.cmdline():
                me.append(p)
    assert me, procs
    cmdline = me[0].cmdline()
    assert cmdline[cmdline.index("--fake-gpus") + 1] == "2x80G"
    assert Path(me[0].cwd()) == tmp_path
    wait_for(lambda: job_state(queue, "long") == "running")
    wait_screen(target, "running")

    # a: add a job through the form
    keys(target, "a")
    wait_screen(target, "Add a job to q.toml")
    wait_field(target, "name")  # the cursor starts in the first field shown
    keys(target, "Tab")
    wait_field(target, "cmd")
    keys(target, "echo hello-from-tmux", literal=True)
    wait_screen(target, "echo hello-from-tmux")
    keys(target, "Tab")
    wait_field(target, "gpus")
    keys(target, "0", literal=True)  # gpus = 0: a CPU job
    wait_screen_match(target, r"gpus\s+0\b")
    keys(target, "BTab")
    wait_field(target, "cmd")
    keys(target, "BTab")
    wait_field(target, "name")
    keys(target, "hello", literal=True)
    wait_screen_match(target, r"name\s+hello\b")
    keys(target, "C-s")  # (enter would move to the next field)
    wait_for(lambda: job_state(queue, "hello") == "done", what="the added job to run")
    assert 'name = "hello"' in queue.read_text()

    # x: kill asks, then kills
    keys(target, "Home")
    wait_screen(target, "› ▶ long")
    keys(target, "x")
    wait_screen(target, "Kill long?")
    keys(target, "y")
    wait_for(lambda: job_state(queue, "long") == "killed", what="long killed")
    wait_screen(target, "killed")

    # P: pause the whole queue
    keys(target, "P")
    wait_screen(target, "PAUSED")
    wait_for(lambda: status(queue).get("paused") is True, what="paused in the state")

    # q: nothing runs, so it quits at once and the session ends with it
    keys(target, "q")
    wait_for(lambda: not tmux.has_session(name), what="the session to end")
    wait_screen("=term:", "rc=0")


@pytest.mark.slow
def test_a_second_gtui_reattaches_and_leaving_keeps_jobs(tmux_server: Path, tmp_path: Path) -> None:
    queue = write_queue(tmp_path, QUEUE)
    name = queue_paths(queue).tmux_session
    outer(tmp_path, "term1", f"{PY} -m gtui --fake-gpus 2x80G q.toml")
    wait_for(lambda: tmux.has_session(name))
    wait_for(lambda: job_state(queue, "long") == "running")
    outer(tmp_path, "term2", f"{PY} -m gtui --fake-gpus 2x80G q.toml")
    wait_for(
        lambda: len(sh("list-clients", "-t", f"={name}").stdout.splitlines()) == 2,
        what=f"two clients on {name}",
    )
    r = gtui("ls")
    assert "2 attached" in r.stdout and "pid " in r.stdout
    # A headless run of the same queue is refused, and its hint works here: attach.
    second = gtui("run", str(queue), "--fake-gpus", "2x80G")
    assert second.returncode == 3 and "`gtui attach q.toml`" in second.stderr, second.stderr
    # quit while a job runs: it asks, says what happens, and leaves the job running
    keys(f"={name}:", "q")
    screen = wait_screen(f"={name}:", "Quit gtui?")
    assert "Leave (l)" in screen
    procs = job_processes(queue, "long")
    assert procs
    keys(f"={name}:", "l")
    wait_for(lambda: not tmux.has_session(name))
    try:
        assert all(p.is_running() for p in procs) and job_state(queue, "long") == "running"
    finally:
        for p in procs:
            p.kill()


@pytest.mark.slow
# A queue run by a headless scheduler outside tmux: `gtui QUEUE.toml` opens the dashboard on
# it over its socket (tests/core/control/test_remote_dashboard.py, in tmux too).


@pytest.mark.slow
def test_without_tmux_installed_it_runs_in_place_and_says_so(
    tmux_server: Path, tmp_path: Path
) -> None:
    write_queue(tmp_path, '[[jobs]]\nname = "quick"\ncmd = "true"\ngpus = 0\n')
    bin_dir = tmp_path / "bin"  # a PATH with a shell but no tmux
    bin_dir.mkdir()
    for tool in ("bash", "sh", "env", "true"):
        found = shutil.which(tool)
        assert found
        (bin_dir / tool).symlink_to(found)
    outer(tmp_path, "term", f"PATH={bin_dir} {PY} -m gtui --fake-gpus 1x24G q.toml")
    screen = wait_screen("=term:", "tmux is not installed")
    assert "quick" in screen and not tmux.has_session("gtui-q")
    keys("=term:", "q")
    wait_screen("=term:", "rc=0")


def test_no_terminal_is_a_plain_error(tmp_path: Path) -> None:
    write_queue(tmp_path, '[[jobs]]\ncmd = "true"\n')
    r = gtui("--no-tmux", str(tmp_path / "q.toml"))
    assert r.returncode == 2 and "needs a terminal" in r.stderr and "Traceback" not in r.stderr
    r = gtui(str(tmp_path / "missing.toml"))
    assert r.returncode == 2 and "no such queue file" in r.stderr


# -- the job detail view, the zoomed log and the pager, in a real 80x24 terminal ------

FAILING = """
[settings]
poll = "0.3s"

[[jobs]]
name = "train"
gpus = 0
cmd = "sh train.sh"
"""

TRAIN_SH = """\
echo "epoch 1 | loss 0.412 | acc 0.871"
echo "Traceback (most recent call last):"
echo '  File "train.py", line 88, in <module>'
echo '  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1736, in _wrapped_call_impl'
echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.20 GiB is free."
exit 1
"""


@pytest.mark.slow
def test_detail_view_zoomed_log_and_pager_at_80x24(tmux_server: Path, tmp_path: Path) -> None:
    """enter opens the failed job's details, z zooms its log to the whole 80x24 screen (the
    traceback wrapped, nothing cut), o shows the whole log in less and q comes back, esc twice
    returns to the queue."""
    (tmp_path / "train.sh").write_text(TRAIN_SH)
    queue = write_queue(tmp_path, FAILING)
    outer(
        tmp_path,
        "term",
        f"PAGER='less -R' {PY} -m gtui --no-tmux --fake-gpus 1x80G q.toml",
        size=(80, 24),
    )
    target = "=term:"
    wait_for(lambda: job_state(queue, "train") == "failed", what="train to fail")
    wait_screen(target, "✗ train")
    keys(target, "Enter")
    screen = wait_screen(target, "gtui · job train")
    assert "✗ failed" in screen and "diagnosis" in screen and "esc Back" in screen
    assert all(len(line) <= 80 for line in screen.splitlines())
    # z: the log alone, the traceback's last frame and message whole, wrapped at 80 columns.
    keys(target, "z")
    wait_screen(target, "z Unzoom")
    # the zoomed panel's own read (it says "reading…" until then)
    screen = wait_screen(target, "site-packages/torch/nn/modules/module.py")
    assert "gtui · job train" not in screen and "diagnosis" not in screen
    text = " ".join(screen.replace("│", " ").split())
    assert "line 1736, in _wrapped_call_impl" in text
    assert (
        "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.20 GiB is free."
        in text
    )
    # o: the whole log in less; q in less comes back to the zoomed log.
    keys(target, "o")
    screen = wait_screen(target, "(END)")
    assert "epoch 1 | loss 0.412" in screen and "z Unzoom" not in screen
    keys(target, "q")
    wait_screen(target, "z Unzoom")
    # esc unzooms, esc again goes back to the queue.
    keys(target, "Escape")
    wait_screen(target, "gtui · job train")
    keys(target, "Escape")
    wait_screen(target, "a Add")
    keys(target, "q")
    wait_screen(target, "rc=0")


@pytest.mark.slow
@pytest.mark.tmux
def test_a_long_queue_shows_its_screen_while_the_file_is_read(
    tmux_server: Path, tmp_path: Path
) -> None:
    """`gtui q.toml` paints its frame, saying it reads the file, before the engine's start: a
    100,000-job file takes a second or more to read, and the terminal used to stay blank for
    all of it. Then the table holds every job. 30,000 jobs (about half a second of reading, the
    screen polled every 20 ms) show it at a third of the 100,000 file's cost; the benchmarks
    time the 100,000-job first screen."""
    from benchmarks.scale import write_queue as write_sweep

    write_sweep(tmp_path / "q.toml", 30_000)
    outer(tmp_path, "term", f"{PY} -m gtui --no-tmux --fake-gpus 8x80G q.toml")
    target = "=term:"
    seen: list[str] = []

    def painted() -> bool:
        seen.append(capture(target))
        return "gtui ·" in seen[-1]

    wait_for(painted, 60, what="the dashboard's first frame")
    first = seen[-1]
    assert "reading q.toml" in first, first  # the frame before the start, not after it
    assert "train-000000" not in first
    screen = wait_screen(target, "30000 jobs", timeout=120)
    assert "train-000000" in screen and "reading q.toml" not in screen.splitlines()[0]
    keys(target, "q")
    wait_screen(target, "k Kill, quit")
    keys(target, "k")
    wait_screen(target, "rc=0", timeout=60)
