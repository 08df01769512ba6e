"""Security: private files, no network, no way in for another user, no escape.

The other user is a real one, created for the test (``useradd``) where the machine allows it
(root, as in CI); it attacks with the system's own ``python3`` and ``sh`` through ``setpriv``.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from gtui.core.exec.runner import is_alive
from gtui.core.paths import queue_paths
from tests.conftest import gtui, write_queue
from tests.reliability.helpers import finish, start_run, state_of, status, wait_for
from tests.reliability.live import LiveOutput
from tests.reliability.mixed import kill_queue_processes, load_records
from tests.reliability.users import SYSTEM_PY, second_user


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Path]:
    """A directory another user can reach (pytest's own tmp dirs are private to us)."""
    d = Path(tempfile.mkdtemp(prefix="gtui-sec-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for q in d.rglob("*.toml"):
            kill_queue_processes(q)
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def other_user() -> Iterator[pwd.struct_passwd]:
    """A throwaway Unix user, removed after the tests."""
    with second_user("gtuirel", ("setpriv",)) as user:
        yield user


def as_user(user: pwd.struct_passwd, *argv: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as ``user`` with a clean environment (no way to borrow ours)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
    return subprocess.run(
        [
            "setpriv",
            f"--reuid={user.pw_uid}",
            f"--regid={user.pw_gid}",
            "--clear-groups",
            "--",
            *argv,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        **kw,
    )


LONG = """
[settings]
poll = "0.1s"
kill_grace = "0.5s"
fake_gpus = "2x80G"

[[jobs]]
name = "quick"
cmd = "echo quick; sleep 0.1"
gpus = 0

[[jobs]]
name = "long"
cmd = "echo long; sleep 30"
mem = "10G"

[[jobs]]
name = "ddp"
cmd = "echo port {port}; sleep 30"
mem = "10G"
"""


# ---------------------------------------------------------------------------------------------
# modes and the network


def _umask_zero() -> None:
    os.umask(0)


def test_state_logs_and_socket_are_readable_by_the_user_alone(tmp_path: Path) -> None:
    """With the most permissive umask (000): the state directory, database, lock, exit-status
    files, logs and the control socket are still the user's alone."""
    queue = write_queue(tmp_path, LONG)
    proc = start_run(queue, preexec_fn=_umask_zero)
    try:
        paths = queue_paths(queue)
        wait_for(lambda: paths.db.exists() and state_of(queue, "long") == "running")
        wait_for(lambda: state_of(queue, "quick") == "done")
        checked: dict[str, str] = {}

        def want(path: Path, expected: int) -> None:
            got = mode(path)
            checked[
                str(path.relative_to(tmp_path)) if path.is_relative_to(tmp_path) else str(path)
            ] = f"{got:04o}"
            assert got == expected, f"{path}: mode {got:04o}, expected {expected:04o}"

        want(paths.state_dir, 0o700)
        for p in paths.state_dir.iterdir():
            want(p, 0o700 if p.is_dir() else 0o600)
        for p in paths.run_dir.iterdir():
            want(p, 0o600)
        logs = tmp_path / "logs"
        want(logs, 0o700)
        for p in logs.iterdir():
            want(p, 0o600)
        want(paths.socket, 0o600)
        want(paths.socket.parent, 0o700)
        assert stat.S_ISSOCK(paths.socket.lstat().st_mode)
        assert len(checked) >= 10
    finally:
        proc.kill()
        proc.wait()
    print("\n" + "\n".join(f"{m} {p}" for p, m in sorted(checked.items())))


def _inet_sockets(pid: int) -> list[object]:
    return [c for c in psutil.Process(pid).net_connections(kind="inet")]


def test_nothing_listens_on_a_network_port(tmp_path: Path) -> None:
    """`gtui run` with a running job that was given a {port}: no TCP or UDP socket at all in
    the scheduler (the free port is found and released at once); only its Unix control socket."""
    queue = write_queue(tmp_path, LONG)
    proc = start_run(queue)
    try:
        wait_for(lambda: queue_paths(queue).db.exists() and state_of(queue, "ddp") == "running")
        assert _inet_sockets(proc.pid) == []
        unix = [c.laddr for c in psutil.Process(proc.pid).net_connections(kind="unix") if c.laddr]
        assert unix == [str(queue_paths(queue).socket)], unix
        # And by the kernel's own tables: no listening TCP socket or bound UDP socket is ours.
        inodes = {
            os.readlink(f"/proc/{proc.pid}/fd/{fd}")
            for fd in os.listdir(f"/proc/{proc.pid}/fd")
            if os.readlink(f"/proc/{proc.pid}/fd/{fd}").startswith("socket:")
        }
        for table in ("tcp", "tcp6", "udp", "udp6"):
            try:
                rows = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
            except OSError:
                continue
            ours = [r for r in rows if f"socket:[{r.split()[9]}]" in inodes]
            assert ours == [], (table, ours)
    finally:
        proc.kill()
        proc.wait()


async def test_the_dashboard_opens_no_network_socket(tmp_path: Path) -> None:
    from gtui.core.sched.engine import Engine
    from gtui.ui.app import GtuiApp
    from gtui.ui.widgets.log_view import LogView

    queue = write_queue(tmp_path, LONG)
    engine = Engine(queue)
    app = GtuiApp(engine, host="testhost")
    me = psutil.Process()
    before = {c.laddr for c in me.net_connections(kind="inet")}
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            deadline = time.monotonic() + 20
            while not (engine.started and engine.view("ddp").record.state.value == "running"):
                assert time.monotonic() < deadline
                await pilot.pause(0.05)
            await pilot.press("down", "down", "l")  # l: focus the log (enter: the details)
            # The dashboard has done its work (ddp selected, its log read and focused) before
            # the sockets are looked at, rather than after a guessed pause.
            log = app.main.query_one(LogView)
            deadline = time.monotonic() + 20
            while not (app.focused is log and "port " in log.text().plain):
                assert time.monotonic() < deadline, "ddp's log was never shown"
                await pilot.pause(0.05)
            now = {c.laddr for c in me.net_connections(kind="inet")}
            assert now - before == set(), now - before
    finally:
        await engine.shutdown(kill_jobs=True)


# ---------------------------------------------------------------------------------------------
# another user


CONNECT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print(json.dumps({"connect": type(e).__name__}))
    sys.exit(0)
replies = []
for req in sys.argv[2:]:
    s.sendall(req.encode() + b"\\n")
    data = b""
    while not data.endswith(b"\\n"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    replies.append(json.loads(data) if data else None)
    break
print(json.dumps({"connect": "ok", "replies": replies}))
"""


def test_another_user_cannot_reach_the_control_socket(
    shared: Path, other_user: pwd.struct_passwd
) -> None:
    """The socket's directory is private: another user cannot even connect. With the
    directories opened up by mistake (0711 and a 0666 socket), the scheduler still refuses
    them by their uid (SO_PEERCRED): no kill, no added command."""
    runtime = shared / "xdg"
    runtime.mkdir(mode=0o700)
    queue = write_queue(shared, LONG)
    pwned = shared / "pwned"
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    proc = start_run(queue, env=env)
    try:
        # Running is committed before the launch, its pid once the process is made.
        wait_for(lambda: queue_paths(queue).db.exists() and state_of(queue, "long") == "running")
        wait_for(lambda: load_records(queue)["long"].pid is not None, what="long's pid")
        long = load_records(queue)["long"]
        assert long.pid is not None and long.create_time is not None
        sock = next((runtime / "gtui").glob("*.sock"))
        requests = [
            json.dumps({"op": "kill", "names": ["long"]}),
            json.dumps({"op": "add", "fields": {"cmd": f"touch {pwned}", "gpus": 0}}),
        ]
        blocked = as_user(other_user, SYSTEM_PY, "-c", CONNECT, str(sock), *requests)
        assert json.loads(blocked.stdout) == {"connect": "PermissionError"}, blocked

        runtime.chmod(0o711)
        sock.parent.chmod(0o711)
        sock.chmod(0o666)
        replies = []
        for req in requests:
            got = as_user(other_user, SYSTEM_PY, "-c", CONNECT, str(sock), req)
            answer = json.loads(got.stdout)
            assert answer["connect"] == "ok", got
            replies.append(answer["replies"][0])
        for reply in replies:
            assert reply["ok"] is False
            assert reply["error"] == f"refused: uid {other_user.pw_uid} does not own gtui"
        # A request that ran is answered only once done (a kill once the job's end is recorded,
        # an add once committed), so right after the refusals the very same job still runs and
        # nothing was added.
        after = load_records(queue)["long"]
        assert (after.state.value, after.pid) == ("running", long.pid), after
        assert is_alive(long.pid, long.create_time)
        assert set(status(queue)) == {"quick", "long", "ddp"}
        assert not pwned.exists()
        assert gtui("kill", str(queue), "long", "ddp", env={**os.environ, **env}).returncode == 0
        finish(proc)
    finally:
        proc.kill()
        proc.wait()
    print(
        f"\nanother user, directory private: {blocked.stdout.strip()}\n"
        f"another user, socket opened by mistake: {replies[0]}"
    )


def test_another_user_cannot_make_gtui_run_a_command(
    shared: Path, other_user: pwd.struct_passwd
) -> None:
    uid = other_user.pw_uid
    pwned = shared / "pwned"
    attack = f'\n[[jobs]]\nname = "evil"\ncmd = "touch {pwned}"\ngpus = 0\n'

    # 1. The user's queue file, as gtui leaves it: the other user cannot write it.
    queue = write_queue(shared, LONG)
    appended = as_user(other_user, "sh", "-c", f"printf '%s' '{attack}' >> {queue}")
    assert appended.returncode != 0 and "Permission denied" in appended.stderr

    # 2. The same file made writable to all by mistake, while its scheduler runs: the change is
    #    not taken, and a new scheduler refuses to start on it.
    proc = start_run(queue)
    live = LiveOutput(proc)
    try:
        wait_for(lambda: queue_paths(queue).db.exists() and state_of(queue, "long") == "running")
        queue.chmod(0o666)
        appended = as_user(other_user, "sh", "-c", f"printf '%s' '{attack}' >> {queue}")
        assert appended.returncode == 0, appended.stderr
        # The scheduler saw the changed file and refused it: its own word, not a guessed delay.
        reload_refused = live.wait_for("not reloaded")
        assert "can be written by other users (mode 0666)" in reload_refused
        assert "evil" not in status(queue)
        assert gtui("kill", str(queue), "long", "ddp").returncode == 0
        out = live.finish()
    finally:
        proc.kill()
        proc.wait()
    assert "Traceback" not in out, out
    assert "reloaded q.toml" not in out, out  # the info line of a reload that was taken
    refused = gtui("run", str(queue))
    assert refused.returncode == 2 and f"chmod go-w {queue}" in refused.stderr, refused.stderr
    assert not pwned.exists()

    # 3. A queue file the other user owns (in a sticky shared folder such as /tmp).
    sticky = shared / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    theirs = sticky / "theirs.toml"
    made = as_user(other_user, "sh", "-c", f"printf '%s' '[settings]\n{attack}' > {theirs}")
    assert made.returncode == 0, made.stderr
    refused_theirs = gtui("run", str(theirs))
    assert refused_theirs.returncode == 2
    assert f"belongs to another user (uid {uid})" in refused_theirs.stderr
    assert not pwned.exists()

    # 4. The other user plants the state directory beside the user's queue in that folder.
    mine = write_queue(sticky, LONG.replace("sleep 30", "sleep 0.1"), name="mine.toml")
    as_user(other_user, "mkdir", "-m", "777", str(sticky / ".gtui"))
    planted = gtui("run", str(mine))
    assert planted.returncode == 2 and "belongs to another user" in planted.stderr
    assert not list((sticky / ".gtui").iterdir())
    print(
        f"\n{reload_refused}\n{refused.stderr.strip()}\n{refused_theirs.stderr.strip()}\n"
        f"{planted.stderr.strip()}"
    )


def test_a_planted_symlink_in_a_shared_log_directory_is_not_followed(
    shared: Path, other_user: pwd.struct_passwd
) -> None:
    """log_dir in a folder others can write (sticky, like /tmp): the other user plants a
    symlink where the next log will go, pointing at a file of ours. gtui never writes through
    it (O_NOFOLLOW | O_EXCL): the log goes to the next free name and our file is untouched."""
    logs = shared / "logs"
    logs.mkdir()
    logs.chmod(0o1777)
    precious = shared / "precious"
    precious.write_text("keep me\n")
    link = logs / "job.1.log"
    made = as_user(other_user, "ln", "-s", str(precious), str(link))
    assert made.returncode == 0, made.stderr
    queue = write_queue(
        shared,
        f"""
        [settings]
        log_dir = "{logs}"
        fake_gpus = "1x80G"

        [[jobs]]
        name = "job"
        cmd = "echo output of job"
        gpus = 0
        """,
    )
    finish(start_run(queue))
    assert status(queue)["job"]["state"] == "done"
    assert precious.read_text() == "keep me\n"
    assert (logs / "job.1.1.log").read_text() == "output of job\n"
    assert link.is_symlink()


# ---------------------------------------------------------------------------------------------
# names and commands


@pytest.mark.parametrize(
    "name",
    [
        "../escape",
        "a/b",
        "x;touch pwned",
        "$(touch pwned)",
        "`touch pwned`",
        "a\nb",
        "..",
        ".x",
        "-x",
    ],
)
def test_a_job_name_that_could_escape_is_refused_everywhere(tmp_path: Path, name: str) -> None:
    queue = write_queue(tmp_path, LONG.replace('"quick"', json.dumps(name)))
    before = queue.read_bytes()
    for args in (("validate",), ("run",)):
        done = gtui(*args, str(queue))
        assert done.returncode == 2 and "name" in done.stderr and "Traceback" not in done.stderr
    ok_queue = write_queue(tmp_path, LONG, name="ok.toml")
    added = gtui("add", str(ok_queue), "--name", name, "--", "echo", "hi")
    assert added.returncode == 2, added.stdout
    assert queue.read_bytes() == before
    assert not list(tmp_path.rglob("pwned")) and not (tmp_path.parent / "escape").exists()


def test_names_from_a_matrix_and_odd_characters_stay_in_the_log_directory(tmp_path: Path) -> None:
    """Matrix values with ../, ;, $( ) and quotes make job names (made safe) and log names that
    stay inside log_dir; names with the allowed odd characters work as they are."""
    queue = write_queue(
        tmp_path,
        """
        [settings]
        fake_gpus = "1x80G"

        [[jobs]]
        name = "sweep-{v}"
        cmd = "echo ran"
        gpus = 0
        matrix = { v = ["../../up", "a;touch pwned", "$(touch pwned)", "q'\\"x", "semi;colon"] }

        [[jobs]]
        name = "a=b+c:d@e.f"
        cmd = "echo odd"
        gpus = 0

        [[jobs]]
        name = "ünïcödé"
        cmd = "echo wide"
        gpus = 0
        """,
    )
    out = finish(start_run(queue))
    jobs = status(queue)
    assert len(jobs) == 7 and {j["state"] for j in jobs.values()} == {"done"}, out
    logs = tmp_path / "logs"
    made = sorted(p.name for p in logs.iterdir())
    assert len(made) == 7
    for name in made:
        assert "/" not in name and (logs / name).resolve().parent == logs.resolve()
    assert not list(tmp_path.parent.rglob("pwned")) and not (tmp_path.parent / "up.1.log").exists()
    assert {p.read_text() for p in logs.iterdir()} == {"ran\n", "odd\n", "wide\n"}
    print("\n" + "\n".join(made))


def test_a_command_runs_exactly_as_written_and_nothing_else(tmp_path: Path) -> None:
    """Quotes, $, backticks, ; and newlines in cmd reach bash as written (through the
    environment, never pasted into another shell line); the job's name, attempt and paths are
    never interpolated into a shell."""
    queue = write_queue(
        tmp_path,
        r"""
        [settings]
        fake_gpus = "1x80G"

        [[jobs]]
        name = "meta"
        gpus = 0
        cmd = '''printf '%s|' "a;b" '$(x)' "`echo y`" "$GTUI_JOB" 'c"d' "e'f"
        echo second line; echo "{{braces}}"'''
        """,
        name="q;touch pwned$(touch pwned2).toml",
    )
    out = finish(start_run(queue))
    assert status(queue)["meta"]["state"] == "done", out
    log = (tmp_path / "logs" / "meta.1.log").read_text()
    assert log == "a;b|$(x)|y|meta|c\"d|e'f|second line\n{braces}\n", log
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".gtui",
        "logs",
        "q;touch pwned$(touch pwned2).toml",
    ]
