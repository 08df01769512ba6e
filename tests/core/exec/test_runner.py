"""The process runner with real processes, real signals and real files."""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import stat
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import psutil
import pytest

from gtui.core.exec import runner
from gtui.core.exec.runner import (
    ExitStatus,
    Launched,
    LaunchError,
    LaunchRequest,
    free_port,
    free_status_path,
    is_alive,
    kill_tree,
    launch,
    log_path_for,
    process_tree,
    read_status_file,
    resume,
    safe_name,
    status_path_for,
    suspend,
    wait_exit,
)
from tests.waiting import until

TIMEOUT = 20.0  # generous: only a hang hits it


def make_req(
    tmp: Path,
    cmd: str,
    name: str = "job",
    attempt: int = 1,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> LaunchRequest:
    return LaunchRequest(
        name=name,
        attempt=attempt,
        cmd=cmd,
        cwd=cwd or tmp,
        env=dict(env or {}),
        log_dir=tmp / "logs",
        run_dir=tmp / ".gtui" / "q.run",
    )


async def run_job(tmp: Path, cmd: str, **kw: object) -> tuple[Launched, ExitStatus]:
    launched = launch(make_req(tmp, cmd, **kw))  # type: ignore[arg-type]
    status = await asyncio.wait_for(wait_exit(launched), TIMEOUT)
    return launched, status


def runs_command(pid: int, name: str) -> bool:
    """The wrapper ``pid`` runs the job's own program ``name`` (exec'd): a signal sent earlier
    can reach the forked wrapper before its exec, where the wrapper's trap, not the job, takes
    it."""
    try:
        return any(p.name() == name for p in psutil.Process(pid).children(recursive=True))
    except psutil.Error:
        return False


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def read_pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


# --- environment, cwd, command text -----------------------------------------------------------


async def test_env_and_cwd_reach_the_job(tmp_path: Path) -> None:
    work = tmp_path / "work dir"
    work.mkdir()
    env = {"CUDA_VISIBLE_DEVICES": "2,3", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "GTUI_JOB": "j"}
    os.environ["GTUI_TEST_INHERITED"] = "from-parent"
    try:
        launched, status = await run_job(
            tmp_path,
            'pwd; echo "$CUDA_VISIBLE_DEVICES|$CUDA_DEVICE_ORDER|$GTUI_JOB|$GTUI_TEST_INHERITED"'
            '; echo "cmd=${GTUI_CMD-unset}"',
            env=env,
            cwd=work,
        )
    finally:
        del os.environ["GTUI_TEST_INHERITED"]
    assert status == ExitStatus(0, None)
    assert launched.log_path.read_text().splitlines() == [
        str(work),
        "2,3|PCI_BUS_ID|j|from-parent",
        "cmd=unset",  # the wrapper's plumbing does not leak into the job
    ]


async def test_command_runs_verbatim(tmp_path: Path) -> None:
    cmd = textwrap.dedent(
        """\
        printf '%s|' "double \\"quoted\\"" 'single $HOME `date`' "$((6 * 7))" `echo back` \\
            "$(echo sub)" 'it''s' $'tab\\there'
        echo
        # a comment; then a heredoc
        cat <<'EOF'
        {gpu} ${available_gpu} \\n $$ "
        EOF
        exit 0"""
    )
    launched, status = await run_job(tmp_path, cmd)
    direct = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=True)
    assert status == ExitStatus(0, None)
    assert launched.log_path.read_text() == direct.stdout
    assert launched.log_path.read_text() == (
        'double "quoted"|single $HOME `date`|42|back|sub|its|tab\there|\n'
        '{gpu} ${available_gpu} \\n $$ "\n'
    )


async def test_stdout_and_stderr_both_logged_stdin_is_devnull(tmp_path: Path) -> None:
    launched, status = await run_job(tmp_path, "echo out; echo err >&2; cat; echo end")
    assert status.exit_code == 0
    assert launched.log_path.read_text() == "out\nerr\nend\n"


async def test_job_gets_normal_signal_dispositions(tmp_path: Path) -> None:
    """The wrapper traps TERM with a handler, so the job must not inherit it as ignored.

    Precondition, set here: gtui's own SIGINT is a handler, as `gtui run` and the dashboard
    install one. pytest started from a non-interactive shell's `&` begins with SIGINT ignored,
    which a job would inherit; the test must not depend on what ran before it."""
    import signal

    saved = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = (
            "import signal as s; print(s.getsignal(s.SIGINT) is s.default_int_handler, "
            "s.getsignal(s.SIGTERM) is s.SIG_DFL, s.getsignal(s.SIGHUP) is s.SIG_DFL)"
        )
        launched, _ = await run_job(tmp_path, f'{sys.executable} -c "{code}"')
    finally:
        signal.signal(signal.SIGINT, saved)
    assert launched.log_path.read_text().split() == ["True", "True", "True"]


# --- log files ----------------------------------------------------------------------------------


async def test_log_never_overwritten(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "job.1.log").write_text("precious\n")
    first, _ = await run_job(tmp_path, "echo one")
    second, _ = await run_job(tmp_path, "echo two")
    assert (logs / "job.1.log").read_text() == "precious\n"
    assert first.log_path == logs / "job.1.1.log"
    assert second.log_path == logs / "job.1.2.log"
    assert first.log_path.read_text() == "one\n"
    assert second.log_path.read_text() == "two\n"
    assert log_path_for(logs, "job", 1) == logs / "job.1.3.log"
    assert log_path_for(logs, "job", 2) == logs / "job.2.log"


async def test_file_modes(tmp_path: Path) -> None:
    launched, _ = await run_job(tmp_path, "exit 3")
    assert stat.S_IMODE(launched.log_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(launched.status_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(launched.status_path.parent.stat().st_mode) == 0o700
    assert launched.status_path.read_text() == "exit 3\n"
    assert launched.status_path == status_path_for(tmp_path / ".gtui" / "q.run", "job", 1)
    assert list(launched.status_path.parent.iterdir()) == [launched.status_path]  # no temp left


@pytest.mark.parametrize(
    "name", ["../../escape", "a/b", "/abs/path", "new\nline", "-rf", "..", ".", "", "x" * 600]
)
def test_names_cannot_escape_log_dir(tmp_path: Path, name: str) -> None:
    logs = tmp_path / "logs"
    for path in (log_path_for(logs, name, 1), status_path_for(tmp_path / "run", name, 1)):
        assert path.parent in (logs, tmp_path / "run")
        assert "/" not in path.name and "\n" not in path.name
        assert not path.name.startswith(("-", ".")) and ".." not in path.name
        assert len(path.name.encode()) < 200


def test_safe_name_keeps_plain_names_and_separates_collisions() -> None:
    assert safe_name("sweep-lr0.1") == "sweep-lr0.1"
    assert safe_name("训练_a") == "训练_a"
    assert safe_name("a/b") != safe_name("a_b")
    assert safe_name("a/b") == safe_name("a/b")  # stable: a restart finds the status file


async def test_launch_with_hostile_name_writes_inside_log_dir(tmp_path: Path) -> None:
    launched, status = await run_job(tmp_path, "echo hi", name="../../evil\nname")
    assert status.exit_code == 0
    assert launched.log_path.parent == tmp_path / "logs"
    assert launched.log_path.read_text() == "hi\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".gtui", "logs"]


# --- launch errors ------------------------------------------------------------------------------


def test_missing_cwd_is_a_launch_error(tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match=r"cwd .*nowhere does not exist"):
        launch(make_req(tmp_path, "true", cwd=tmp_path / "nowhere"))
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir())


def test_unusable_log_dir_is_a_launch_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    req = make_req(tmp_path, "true")
    req = LaunchRequest(**{**req.__dict__, "log_dir": blocker / "logs"})
    with pytest.raises(LaunchError, match="cannot create its log"):
        launch(req)


def test_missing_bash_is_a_launch_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.shutil, "which", lambda _name: None)
    monkeypatch.setattr(runner.os, "access", lambda *_a: False)
    with pytest.raises(LaunchError, match="bash not found"):
        launch(make_req(tmp_path, "true"))


# --- exit status ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cmd", "expected", "text"),
    [
        ("true", ExitStatus(0, None), "exit 0"),
        ("exit 3", ExitStatus(3, None), "exit 3"),
        ("no_such_command_gtui_test", ExitStatus(127, None), "exit 127"),
        ("kill -TERM $$", ExitStatus(None, 15), "signal 15"),
        ("sleep 5 & kill -KILL $$", ExitStatus(None, 9), "signal 9"),
        (f"{sys.executable} -c 'import os; os.abort()'", ExitStatus(None, 6), "signal 6"),
    ],
)
async def test_exit_status_recorded(
    tmp_path: Path, cmd: str, expected: ExitStatus, text: str
) -> None:
    launched, status = await run_job(tmp_path, cmd)
    assert status == expected
    assert launched.status_path.read_text().strip() == text
    assert read_status_file(launched.status_path) == expected


def test_read_status_file_rejects_missing_and_garbage(tmp_path: Path) -> None:
    assert read_status_file(tmp_path / "none") is None
    for text in ("", "exit", "exit x", "quit 3", "signal -1"):
        (tmp_path / "s").write_text(text)
        assert read_status_file(tmp_path / "s") is None


def test_the_status_file_says_when_the_job_ended_and_nofork_is_a_start_that_never_was(
    tmp_path: Path,
) -> None:
    """The end time is the file's mtime (the wrapper's one write); ``nofork`` is what the
    wrapper's EXIT trap writes when it could not fork the job (the process limit)."""
    (tmp_path / "s").write_text("exit 1\n")
    os.utime(tmp_path / "s", (1000.0, 1234.5))
    got = read_status_file(tmp_path / "s")
    assert got == ExitStatus(1, None) and got.ended_at == 1234.5
    (tmp_path / "s").write_text("nofork\n")
    got = read_status_file(tmp_path / "s")
    assert got is not None and got.not_started and not got.unknown


async def test_stale_status_file_does_not_speak_for_a_new_run(tmp_path: Path) -> None:
    req = make_req(tmp_path, "exit 4")
    stale = status_path_for(req.run_dir, req.name, req.attempt)
    stale.parent.mkdir(parents=True)
    stale.write_text("exit 0\n")
    launched = launch(req)
    assert await asyncio.wait_for(wait_exit(launched), TIMEOUT) == ExitStatus(4, None)
    assert stale.read_text() == "exit 0\n"  # not deleted: it may be another run's record
    assert launched.status_path != stale


async def test_a_launch_never_deletes_nor_shares_another_runs_status_file(
    tmp_path: Path,
) -> None:
    """Two runs of one attempt (a job its scheduler took twice): each gets a status file of
    its own, made at its launch, and neither's end is lost or read as the other's."""
    gate = tmp_path / "go"
    first = launch(make_req(tmp_path, f"while [ ! -e '{gate}' ]; do sleep 0.02; done; exit 3"))
    second = launch(make_req(tmp_path, "exit 5"))
    try:
        assert first.status_path.name == "job.1.status"
        assert second.status_path != first.status_path
        assert await asyncio.wait_for(wait_exit(second), TIMEOUT) == ExitStatus(5, None)
        assert first.status_path.exists() and read_status_file(first.status_path) is None
        gate.touch()
        assert await asyncio.wait_for(wait_exit(first), TIMEOUT) == ExitStatus(3, None)
        assert read_status_file(second.status_path) == ExitStatus(5, None)
        # The next launch's name is chosen before it (the record saves it first): a free one.
        third = free_status_path(tmp_path / ".gtui" / "q.run", "job", 1)
        assert not third.exists() and third not in (first.status_path, second.status_path)
    finally:
        gate.touch()


async def test_wait_exit_uses_pidfd_not_polling_and_reaps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_polling(*_a: object) -> None:
        raise AssertionError("wait_exit polled")

    monkeypatch.setattr(runner, "_poll_gone", no_polling)
    launched, status = await run_job(tmp_path, "sleep 0.2; exit 2")
    assert status == ExitStatus(2, None)
    assert gone(launched.pid)
    with pytest.raises(ChildProcessError):
        os.waitpid(launched.pid, os.WNOHANG)  # already reaped: no zombie left behind


async def test_wait_exit_polling_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(_pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(runner.os, "pidfd_open", no_pidfd)
    launched, status = await run_job(tmp_path, "sleep 0.1; exit 5")
    assert status == ExitStatus(5, None)
    with pytest.raises(ChildProcessError):
        os.waitpid(launched.pid, os.WNOHANG)


async def test_wait_exit_falls_back_to_waitpid_without_status_file(tmp_path: Path) -> None:
    launched = launch(make_req(tmp_path, "sleep 30"))
    await until(lambda: len(process_tree(launched.pid)) == 2, what="the job's sleep to start")
    (sleeper,) = process_tree(launched.pid) - {launched.pid}
    os.kill(launched.pid, 9)  # the wrapper itself: it cannot write its status
    status = await asyncio.wait_for(wait_exit(launched), TIMEOUT)
    assert status == ExitStatus(None, 9)
    assert launched.status_path.read_text() == ""  # made at the launch, never written
    assert not gone(sleeper)  # orphaned, still in the wrapper's group ...
    await asyncio.wait_for(kill_tree(launched.pid, 0.1), TIMEOUT)
    assert gone(sleeper)  # ... which kill_tree still finds after the wrapper was reaped


# --- adoption after a scheduler restart -------------------------------------------------------

_LAUNCHER = """
import json, sys
from pathlib import Path
from gtui.core.exec.runner import LaunchRequest, launch
tmp = Path(sys.argv[1])
l = launch(LaunchRequest("adopted", 1, sys.argv[2], tmp, {}, tmp / "logs", tmp / "run"))
print(json.dumps({"pid": l.pid, "ct": l.create_time, "log": str(l.log_path),
                  "status": str(l.status_path)}))
"""


def launch_elsewhere(tmp: Path, cmd: str) -> Launched:
    """Launch from another Python process that exits at once, as a scheduler that crashed."""
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(tmp), cmd],
        capture_output=True,
        text=True,
        check=True,
        timeout=TIMEOUT,
    )
    d = json.loads(out.stdout)
    return Launched(d["pid"], d["ct"], Path(d["log"]), Path(d["status"]))


async def test_adopted_job_exit_status_from_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_polling(*_a: object) -> None:
        raise AssertionError("wait_exit polled")

    parked = asyncio.Event()
    real_wait_gone = runner._wait_gone

    async def spy_wait_gone(pid: int, create_time: float | None) -> None:
        parked.set()  # wait_exit found the job alive and now waits for its end
        await real_wait_gone(pid, create_time)

    monkeypatch.setattr(runner, "_poll_gone", no_polling)
    monkeypatch.setattr(runner, "_wait_gone", spy_wait_gone)
    marker = tmp_path / "go"
    orig = launch_elsewhere(tmp_path, f"while [ ! -e '{marker}' ]; do sleep 0.02; done; exit 7")
    adopted = Launched(orig.pid, orig.create_time, orig.log_path, orig.status_path)
    try:
        assert is_alive(adopted.pid, adopted.create_time)
        assert psutil.Process(adopted.pid).ppid() != os.getpid()  # not our child
        waiter = asyncio.ensure_future(wait_exit(adopted))
        await asyncio.wait_for(parked.wait(), TIMEOUT)
        assert not waiter.done()
        # Released only now: an early return would have found no status file (UNKNOWN), not 7.
        marker.touch()
        assert await asyncio.wait_for(waiter, TIMEOUT) == ExitStatus(7, None)
    finally:
        marker.touch()  # a failed check leaves no job behind


async def test_adopted_job_that_ended_while_we_were_down(tmp_path: Path) -> None:
    orig = launch_elsewhere(tmp_path, "exit 9")
    await until(lambda: orig.status_path.exists(), what="the status file")
    await until(lambda: not is_alive(orig.pid, orig.create_time), what="the wrapper to end")
    assert await asyncio.wait_for(wait_exit(orig), TIMEOUT) == ExitStatus(9, None)


async def test_adopted_job_gone_without_status_is_unknown(tmp_path: Path) -> None:
    orig = launch_elsewhere(tmp_path, "sleep 30")
    os.killpg(orig.pid, 9)
    assert await asyncio.wait_for(wait_exit(orig), TIMEOUT) == ExitStatus(None, None)


async def test_adopted_pid_reused_by_another_process_is_not_waited_on(tmp_path: Path) -> None:
    me = psutil.Process()
    stale = Launched(me.pid, me.create_time() - 100, tmp_path / "l", tmp_path / "none")
    assert await asyncio.wait_for(wait_exit(stale), TIMEOUT) == ExitStatus(None, None)


# --- kill, suspend, resume --------------------------------------------------------------------

# A classic daemon: fork, setsid, fork again. It writes its pid to a file of its own: that write
# races the job's next lines (in the file of the job's other pids it came second or third, and the
# test took the wrong pid for the daemon's).
_DAEMON = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[1], "w") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(100)
    os._exit(0)
"""


async def test_kill_tree_leaves_nothing_of_the_tree(tmp_path: Path) -> None:
    pids, daemon = tmp_path / "pids", tmp_path / "daemon"
    script = tmp_path / "daemon.py"
    script.write_text(_DAEMON)
    cmd = (
        "trap '' TERM\n"  # ignores SIGTERM: only SIGKILL after the grace ends it
        f"setsid sleep 100 & echo $! >> '{pids}'\n"
        f"{sys.executable} '{script}' '{daemon}'\n"
        f"sleep 100 & echo $! >> '{pids}'\n"
        "wait"
    )
    launched = launch(make_req(tmp_path, cmd))
    waiter = asyncio.ensure_future(wait_exit(launched))
    # The second sleep starts once the shell has reaped the daemon's launcher (run in the
    # foreground): from then on nothing links the daemon to the job's tree.
    await until(lambda: len(read_pids(pids)) == 2, what="the job's two sleeps")
    await until(lambda: len(read_pids(daemon)) == 1, what="the daemon's pid")
    daemon_pid = read_pids(daemon)[0]
    all_pids = {*read_pids(pids), daemon_pid} | process_tree(launched.pid)
    assert daemon_pid not in process_tree(launched.pid)  # it left the tree
    assert os.getpgid(daemon_pid) != launched.pid  # and the group
    await asyncio.wait_for(kill_tree(launched.pid, 0.3), TIMEOUT)
    survivors = [p for p in all_pids if not gone(p)]
    assert survivors == []
    # The wrapper outlived its job long enough to record how it ended.
    assert await asyncio.wait_for(waiter, TIMEOUT) == ExitStatus(None, 9)


async def test_kill_tree_sigterm_is_enough_for_a_polite_job(tmp_path: Path) -> None:
    launched = launch(make_req(tmp_path, "sleep 100"))
    waiter = asyncio.ensure_future(wait_exit(launched))
    await until(lambda: runs_command(launched.pid, "sleep"), what="the job's sleep")
    await asyncio.wait_for(kill_tree(launched.pid, 30.0), TIMEOUT)  # grace not waited out
    assert await asyncio.wait_for(waiter, TIMEOUT) == ExitStatus(None, 15)


async def test_kill_tree_of_a_suspended_job(tmp_path: Path) -> None:
    launched = launch(make_req(tmp_path, "sleep 100"))
    waiter = asyncio.ensure_future(wait_exit(launched))
    await until(lambda: runs_command(launched.pid, "sleep"), what="the job's sleep")
    suspend(launched.pid)
    await asyncio.wait_for(kill_tree(launched.pid, 30.0), TIMEOUT)
    assert await asyncio.wait_for(waiter, TIMEOUT) == ExitStatus(None, 15)


# Answers a ping with a pong, then idles: proof that it still runs (was never stopped).
_PONG = """
import sys, time
from pathlib import Path
d = Path(sys.argv[1])
while not (d / "ping").exists():
    time.sleep(0.02)
(d / "pong").touch()
time.sleep(100)
"""


async def test_reused_pid_is_never_signalled(tmp_path: Path) -> None:
    victim = subprocess.Popen([sys.executable, "-c", _PONG, str(tmp_path)], start_new_session=True)
    try:
        ct = psutil.Process(victim.pid).create_time()
        suspend(victim.pid, create_time=ct - 50)
        # kill_tree waits for what it signals to be gone, so a wrong kill would be over by now.
        await asyncio.wait_for(kill_tree(victim.pid, 0.1, create_time=ct - 50), TIMEOUT)
        assert victim.poll() is None
        (tmp_path / "ping").touch()
        await until(lambda: (tmp_path / "pong").exists(), what="the victim to answer (not stopped)")
        assert victim.poll() is None
        await asyncio.wait_for(kill_tree(victim.pid, 0.1, create_time=ct), TIMEOUT)
        assert victim.wait(TIMEOUT) == -15
    finally:
        victim.kill()
        victim.wait()


async def test_kill_tree_tolerates_a_vanished_process(tmp_path: Path) -> None:
    launched, _ = await run_job(tmp_path, "true")
    await asyncio.wait_for(kill_tree(launched.pid, 0.1), TIMEOUT)


async def test_suspend_and_resume(tmp_path: Path) -> None:
    go = tmp_path / "go"
    pids = tmp_path / "pids"
    cmd = f"sleep 100 & echo $! > '{pids}'; while [ ! -e '{go}' ]; do sleep 0.02; done; exit 4"
    launched = launch(make_req(tmp_path, cmd))
    waiter = asyncio.ensure_future(wait_exit(launched))
    await until(lambda: len(read_pids(pids)) == 1, what="the job")
    sleeper = read_pids(pids)[0]

    def states() -> set[str]:
        """The states of every live process of the job (the loop's shell and its sleeps too)."""
        found = set()
        for p in process_tree(launched.pid):
            try:
                found.add(psutil.Process(p).status())
            except psutil.NoSuchProcess:
                continue
        return found - {psutil.STATUS_ZOMBIE}

    suspend(launched.pid)
    await until(lambda: states() == {psutil.STATUS_STOPPED}, what="the job to stop")
    assert sleeper in process_tree(launched.pid)
    go.touch()
    # Every process of the job is stopped (by the kernel's word): none can see the file.
    assert states() == {psutil.STATUS_STOPPED}
    assert not waiter.done()
    resume(launched.pid)
    await until(lambda: psutil.STATUS_STOPPED not in states(), what="the job to continue")
    assert await asyncio.wait_for(waiter, TIMEOUT) == ExitStatus(4, None)
    await kill_tree(launched.pid, 0.1)  # the background sleep, left in the group
    assert gone(sleeper)


# --- identity, trees, ports -------------------------------------------------------------------


async def test_is_alive_checks_create_time_and_zombies(tmp_path: Path) -> None:
    launched = launch(make_req(tmp_path, "sleep 100"))
    assert is_alive(launched.pid, launched.create_time)
    assert not is_alive(launched.pid, launched.create_time + 5)  # a reused pid
    assert not is_alive(launched.pid, launched.create_time - 5)
    await kill_tree(launched.pid, 0.1)
    assert not is_alive(launched.pid, launched.create_time)  # a zombie until reaped
    await asyncio.wait_for(wait_exit(launched), TIMEOUT)
    assert not is_alive(launched.pid, launched.create_time)
    assert not is_alive(2**22 + 12345, 0.0)  # beyond pid_max


async def test_process_tree(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    launched = launch(make_req(tmp_path, f"sleep 100 & echo $! > '{pids}'; sleep 100"))
    await until(lambda: len(read_pids(pids)) == 1, what="the job")
    tree = process_tree(launched.pid)
    assert {launched.pid, read_pids(pids)[0]} <= tree
    assert len(tree) >= 3  # wrapper, job shell, two sleeps (the job shell may exec one)
    await kill_tree(launched.pid, 0.1)
    await wait_exit(launched)
    assert process_tree(launched.pid) == set()


def test_free_port_can_be_bound() -> None:
    ports = [free_port() for _ in range(5)]
    assert len(set(ports)) == 5  # recently handed-out ports are not handed out again
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))


def test_create_time_of_a_launched_job_is_psutils_and_identifies_it() -> None:
    """The launch reads a child's create time from /proc itself (the hot path): it must be the
    value psutil gives, since a restarted scheduler checks the pid by psutil's."""
    from gtui.core.exec.runner import CREATE_TIME_TOLERANCE_S, create_time_of, is_alive

    proc = subprocess.Popen(["sleep", "30"])
    try:
        mine = create_time_of(proc.pid)
        assert abs(mine - psutil.Process(proc.pid).create_time()) <= CREATE_TIME_TOLERANCE_S
        assert is_alive(proc.pid, mine)
        assert not is_alive(proc.pid, mine - 5)  # another process under a reused pid
    finally:
        proc.kill()
        proc.wait()
    assert abs(create_time_of(os.getpid()) - psutil.Process().create_time()) <= 0.011


# --- a command as long as Linux passes ----------------------------------------------------------


async def test_the_longest_command_validate_accepts_runs(tmp_path: Path) -> None:
    """The wrapper gets a job's command in one environment string and hands it to bash as one
    argument, each capped by Linux (MAX_ARG_STRLEN, 128 KiB): the longest the queue file
    accepts (gtui.core.model.MAX_CMD_BYTES) starts and runs."""
    from gtui.core.model import MAX_CMD_BYTES

    cmd = "echo ran #"
    cmd += "x" * (MAX_CMD_BYTES - len(cmd))
    launched, status = await run_job(tmp_path, cmd)
    assert status.exit_code == 0 and launched.log_path.read_text() == "ran\n"


def test_a_longer_command_is_refused_with_the_words_validate_gives(tmp_path: Path) -> None:
    """Past the cap the launch says what validate says, never "Argument list too long"."""
    from gtui.core.model import MAX_CMD_BYTES, cmd_too_long

    cmd = "echo " + "x" * MAX_CMD_BYTES
    said = cmd_too_long(cmd)
    assert said is not None
    with pytest.raises(LaunchError, match=re.escape(said)):
        launch(make_req(tmp_path, cmd))
