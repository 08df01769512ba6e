"""The user's process limit (``ulimit -u``) reached by a job that forks until it cannot: the
scheduler's forks and thread starts fail with EAGAIN for a while. Waiting jobs wait (no retry
spent, no permanent failure) and start once processes are freed; ``gtui kill`` really kills;
``gtui run`` ends without a traceback.

Root ignores RLIMIT_NPROC, so the scheduler runs as a real second Unix user (made with
``useradd``, tests/reliability/users.py), under ``prlimit --nproc``. The fork
bomb is bounded (a cap on its forks, each child sleeps a bounded time) and whatever that user
still runs is killed at teardown.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gtui.core.exec.runner import WRAPPER, read_status_file
from tests.reliability.helpers import wait_for
from tests.reliability.mixed import load_records
from tests.reliability.users import SYSTEM_PY, second_user

NPROC = 120  # the scheduler's limit; the bomb fills what its threads and the jobs leave
BOMB_CAP = 400  # the bomb never forks more than this, limit or not
WAITERS = 10
ENDED_BADLY = ("failed", "unknown", "killed")

# The bomb: fork children (each sleeps, at most 120 s) until a fork fails (the limit), say so,
# and go on taking every process freed meanwhile, as a real fork bomb does; never more than
# the cap in all. Python, so a failed fork fails at once (bash retries one for ~15 s).
BOMB = (
    "import os, time\n"
    "n, full, end = 0, False, time.time() + 120\n"
    f"while n < {BOMB_CAP} and time.time() < end:\n"
    "    try:\n"
    "        pid = os.fork()\n"
    "    except OSError as e:\n"
    "        if not full: print('full', n, e, flush=True)\n"
    "        full = True; time.sleep(0.005); continue\n"
    "    if pid == 0:\n"
    "        time.sleep(120); os._exit(0)\n"
    "    n += 1\n"
    "time.sleep(max(0, end - time.time()))\n"
)
# Holds the only GPU, forking nothing, until the test makes the file "go".
HOLDER = (
    "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)\nprint('released')\n"
)


def _sh() -> str:
    return "/bin/sh" if os.access("/bin/sh", os.X_OK) else "/bin/bash"


def _site_packages() -> str:
    return sysconfig.get_paths()["purelib"]


def _queue_text(py: str) -> str:
    jobs = [
        f'[[jobs]]\nname = "holder"\nmem = "80G"\ncmd = """{py} -c "{HOLDER}" """\n',
        f'[[jobs]]\nname = "bomb"\ngpus = 0\ncmd = """{py} -c "{BOMB}" """\n',
    ]
    jobs += [
        f'[[jobs]]\nname = "w{i}"\nmem = "1G"\ncmd = "echo ran w{i}"\nretries = 0\n'
        for i in range(WAITERS)
    ]
    settings = '[settings]\npoll = "0.2s"\nkill_grace = "1s"\nfake_gpus = "1x80G"\n'
    return settings + "\n" + "\n".join(jobs)


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    """A throwaway Unix user (root ignores RLIMIT_NPROC), removed after the tests with every
    process it still runs."""
    with second_user("gtuinp", ("setpriv", "prlimit"), cleanup=_kill_all_of) as made:
        yield made


def _processes_of(uid: int) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["uids", "status"]):
        uids = p.info["uids"]
        if uids is not None and uids.real == uid and p.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(p)
    return found


def _alive(p: psutil.Process) -> bool:
    """Still the same process (pid and create time), not a zombie."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _kill_all_of(uid: int) -> None:
    """Every process of the test's own user, by pid (the bomb's children included)."""
    for _ in range(5):
        procs = _processes_of(uid)
        if not procs:
            return
        for p in procs:
            try:
                p.send_signal(signal.SIGSTOP)  # nothing frozen forks a replacement
            except psutil.Error:
                pass
        for p in procs:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=5)


def _as(user: pwd.struct_passwd, *argv: str, nproc: int | None = None) -> list[str]:
    limit = ["prlimit", f"--nproc={nproc}", "--"] if nproc is not None else []
    return [
        "setpriv",
        f"--reuid={user.pw_uid}",
        f"--regid={user.pw_gid}",
        "--clear-groups",
        "--",
        *limit,
        *argv,
    ]


def _gtui(user: pwd.struct_passwd, *args: str) -> list[str]:
    """``gtui ARGS`` as ``user``: the system's python with this checkout's packages (the
    test's own interpreter may live where that user cannot reach)."""
    boot = (
        f"import site, sys; site.addsitedir({_site_packages()!r}); "
        "from gtui.cli import main; sys.argv[0] = 'gtui'; raise SystemExit(main())"
    )
    return [SYSTEM_PY, "-c", boot, *args]


@pytest.fixture
def shared(user: pwd.struct_passwd) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="gtui-nproc-"))
    os.chown(d, user.pw_uid, user.pw_gid)
    d.chmod(0o755)
    try:
        yield d
    finally:
        _kill_all_of(user.pw_uid)
        shutil.rmtree(d, ignore_errors=True)


def _log(d: Path, name: str) -> str:
    log = d / "logs" / f"{name}.1.log"
    return log.read_text(errors="replace") if log.exists() else ""


def test_a_fork_bomb_at_the_process_limit_fails_no_waiting_job_and_dies_by_gtui_kill(
    user: pwd.struct_passwd, shared: Path
) -> None:
    check = subprocess.run(
        _as(user, *_gtui(user, "--version")), capture_output=True, text=True, timeout=60
    )
    if check.returncode != 0:
        pytest.skip(f"gtui does not run as a second user here: {check.stderr.strip()[-300:]}")
    queue = shared / "q.toml"
    queue.write_text(_queue_text(SYSTEM_PY))
    os.chown(queue, user.pw_uid, user.pw_gid)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(shared), "LANG": "C.UTF-8"}
    run = subprocess.Popen(
        _as(user, *_gtui(user, "run", str(queue)), nproc=NPROC),
        cwd=shared,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        wait_for(lambda: "full" in _log(shared, "bomb"), timeout=60, what="the bomb at the limit")
        assert "full 400" not in _log(shared, "bomb"), "the limit was never reached"
        (shared / "go").touch()  # the GPU is free: the waiting jobs try to start, at the limit
        wait_for(lambda: "released" in _log(shared, "holder"), timeout=30)

        def deferred() -> bool:
            recs = load_records(queue)
            waiters = [recs[f"w{i}"] for i in range(WAITERS)]
            failed = {r.name: r.diagnosis for r in waiters if r.state.value in ENDED_BADLY}
            assert not failed, failed  # retries = 0: a failure now would be for good
            return any("could not start" in r.reason for r in waiters)

        try:
            wait_for(deferred, timeout=30, what="a waiting job put off by the limit")
        except AssertionError as e:
            recs = load_records(queue)
            seen = {n: (r.state.value, r.reason, r.diagnosis) for n, r in recs.items()}
            raise AssertionError(f"{e}: {seen}") from None

        bomb = [p for p in _processes_of(user.pw_uid) if p.pid != run.pid]
        kill = subprocess.run(
            _as(user, *_gtui(user, "kill", str(queue), "bomb")),
            cwd=shared,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert kill.returncode == 0, kill.stdout + kill.stderr
        # is_running() checks the create time too: a pid reused by a waiting job's start
        # does not count as the bomb's.
        wait_for(
            lambda: not [p for p in bomb if _alive(p)],
            timeout=60,
            what="every process of the bomb killed",
        )
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert "Traceback" not in out, out
    assert "waits w" in out and "could not start it" in out, out  # said, in gtui run's log too
    assert "held by you" not in out, out  # nobody held them: the summary says what they wait for
    recs = load_records(queue)
    assert recs["bomb"].state.value == "killed", out
    for i in range(WAITERS):
        name = f"w{i}"
        # retries = 0: a start put off by the limit spent none, and failed nothing
        assert recs[name].state.value == "done", (name, recs[name], out)


def test_a_wrapper_that_cannot_fork_its_job_says_so_in_the_status_file(
    user: pwd.struct_passwd, shared: Path
) -> None:
    """With no process left to the user (its only one is the wrapper), the wrapper cannot fork
    the job: dash gives up at once; its status file says ``nofork``, read as a start that never
    was (not a failure with exit 2). The job's command never ran."""
    status = shared / "job.1.status"
    wrapper = [_sh(), "-c", WRAPPER, "gtui-job", str(status), "/bin/bash"]
    env = {"PATH": "/usr/bin:/bin", "GTUI_CMD": "touch ran"}
    done = subprocess.run(
        _as(user, *wrapper, nproc=1), cwd=shared, env=env, capture_output=True, timeout=30
    )
    assert done.returncode != 0
    assert status.read_text().strip() == "nofork"
    got = read_status_file(status)
    assert got is not None and got.not_started and not got.unknown
    assert not (shared / "ran").exists()
