"""Two Unix users, two queues, the same simulated GPUs: the experiment
that showed the problem. Two schedulers, one run by this test's user (root in CI) and one by a throwaway
user created for the test, each with two 60G jobs on 2x80G. Before claims, all four started
at once, two on each GPU. Now:

- no GPU ever holds more than one of them (checked from the jobs' own start / end stamps);
- the scheduler that waits names its neighbour's user and job in its waiting reason;
- when the first scheduler is SIGKILLed, its jobs' claims keep counting while those jobs run,
  and stop counting the moment they end.

The interpreter running the tests may live where the other user cannot enter (a home directory
of mode 0700): the test copies gtui and the distributions it needs into a world-readable
directory, and runs them with a Python of the same version that the other user can execute.
Skipped, with the reason, where a second user cannot be made (not root, no useradd / setpriv)
or no such Python exists.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import PACKAGE_DIR, REPO
from tests.reliability.live import LiveOutput
from tests.reliability.mixed import kill_queue_processes
from tests.reliability.users import second_user
from tests.waiting import wait_for

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def _popen_as(
    user: pwd.struct_passwd | None, argv: list[str], env: dict[str, str]
) -> subprocess.Popen[str]:
    """``argv`` as ``user`` (None: as this test's user), its output read as it comes."""
    if user is not None:
        argv = [
            "setpriv",
            f"--reuid={user.pw_uid}",
            f"--regid={user.pw_gid}",
            "--clear-groups",
            "--",
            *argv,
        ]
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )


@pytest.fixture(scope="module")
def bob() -> Iterator[pwd.struct_passwd]:
    """A throwaway Unix user, removed after the tests (it runs a Python tree of its own)."""
    with second_user("gtuinb", ("setpriv",), system_python=False) as user:
        yield user


def _distributions(root: str) -> set[str]:
    """``root`` and every distribution it needs at run time (extras left out)."""
    seen = {canonicalize_name(root)}
    todo = [root]
    while todo:
        for text in md.requires(todo.pop()) or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            name = canonicalize_name(req.name)
            if name not in seen:
                seen.add(name)
                todo.append(name)
    seen.discard(canonicalize_name(root))
    return seen


def _build_tree(dest: Path) -> None:
    """gtui (from this checkout) and its dependencies, where any user can read them."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PACKAGE_DIR, dest / "gtui", ignore=ignore)
    shutil.copytree(REPO / "styles", dest / "gtui" / "styles", ignore=ignore)
    for name in _distributions("gtui"):
        dist = md.distribution(name)
        for f in dist.files or []:
            if (f.parts and f.parts[0] == "..") or "__pycache__" in f.parts:
                continue  # a console script outside site-packages, or a cache
            src = Path(str(dist.locate_file(f)))
            if src.is_file():
                (dest / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / f)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def _python_for(user: pwd.struct_passwd) -> str | None:
    """A Python of this version that ``user`` can run (ours may be in /root, mode 0700)."""
    candidates = [os.path.realpath(sys.executable), f"/usr/bin/python{PY}", "/usr/bin/python3"]
    candidates += [f"/usr/local/bin/python{PY}", "/usr/local/bin/python3"]
    for exe in dict.fromkeys(candidates):
        if not os.path.exists(exe):
            continue
        probe = _popen_as(
            user, [exe, "-c", "import sys; print(*sys.version_info[:2], sep='.')"], {}
        )
        out, _ = probe.communicate(timeout=30)
        if probe.returncode == 0 and out.strip() == PY:
            return exe
    return None


@pytest.fixture(scope="module")
def box(bob: pwd.struct_passwd) -> Iterator[dict[str, object]]:
    """The shared machine: a world-readable runtime for bob, a spec of 2x80G both schedulers
    read (the same file is the same simulated GPUs), and a board for the claims."""
    base = Path(tempfile.mkdtemp(prefix="gtui-claims-"))
    base.chmod(0o755)
    try:
        python = _python_for(bob)
        if python is None:
            pytest.skip(f"no Python {PY} that {bob.pw_name} can run (ours: {sys.executable})")
        _build_tree(base / "py")
        yield {"base": base, "python": python}
    finally:
        shutil.rmtree(base, ignore_errors=True)


QUEUE = """\
[settings]
poll = "0.2s"
kill_grace = "1s"
fake_gpus = "@{spec}"

[[jobs]]
name = "{p}1"
mem = "60G"
cmd = "{job}"

[[jobs]]
name = "{p}2"
mem = "60G"
cmd = "{job}"
"""
# Where it ran and when, then it waits for the test to let it go: `NAME.release`.
JOB = (
    "echo start $(date +%s.%N) $CUDA_VISIBLE_DEVICES >> $GTUI_JOB.stamps; "
    "while [ ! -e $GTUI_JOB.release ]; do sleep 0.05; done; "
    "echo end $(date +%s.%N) >> $GTUI_JOB.stamps"
)


def _stamps(folder: Path, name: str) -> tuple[float, float, int] | None:
    """(start, end, GPU) of a job that ran to its end, from its own stamps."""
    path = folder / f"{name}.stamps"
    if not path.exists():
        return None
    start = end = gpu = None
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts[0] == "start":
            start, gpu = float(parts[1]), int(parts[2])
        elif parts[0] == "end":
            end = float(parts[1])
    return None if start is None or end is None or gpu is None else (start, end, gpu)


def _gpu_of(folder: Path, name: str) -> int:
    path = folder / f"{name}.stamps"

    def said() -> bool:  # the shell creates the file before it writes the line
        return path.exists() and path.read_text().endswith("\n")

    wait_for(said, what=f"{name} to say where it runs")
    return int(path.read_text().split()[2])


def test_two_users_never_promise_a_gpu_twice(
    bob: pwd.struct_passwd, box: dict[str, object]
) -> None:
    base = box["base"]
    assert isinstance(base, Path)
    me = pwd.getpwuid(os.geteuid()).pw_name
    spec = base / "gpus.spec"
    spec.write_text("80G\n80G\n")
    spec.chmod(0o644)
    shm = base / "shm"  # what /dev/shm is: open to every user, sticky
    shm.mkdir()
    shm.chmod(0o1777)
    board = shm / "gtui-claims"  # not made here: the first scheduler makes it, sticky, for all
    folders = {me: base / "mine", bob.pw_name: base / "bob"}
    for user, folder in folders.items():
        folder.mkdir(mode=0o755)
        (folder / "tmp").mkdir(mode=0o700)
        if user == bob.pw_name:
            for path in (folder, folder / "tmp"):
                os.chown(path, bob.pw_uid, bob.pw_gid)
    prefix = {me: "a", bob.pw_name: "b"}
    queues = {}
    for user, folder in folders.items():
        q = folder / "q.toml"
        q.write_text(QUEUE.format(spec=spec, p=prefix[user], job=JOB))
        q.chmod(0o644)
        queues[user] = q
    env_common = {"LANG": "C.UTF-8", "GTUI_CLAIMS_DIR": str(board), "PYTHONDONTWRITEBYTECODE": "1"}
    mine_env = {**os.environ, **env_common, "TMPDIR": str(folders[me] / "tmp")}
    bob_env = {
        **env_common,
        "PATH": "/usr/bin:/bin",
        "HOME": str(folders[bob.pw_name]),
        "TMPDIR": str(folders[bob.pw_name] / "tmp"),
        "PYTHONPATH": str(base / "py"),
    }
    runs: dict[str, LiveOutput] = {}
    try:
        _play(runs, me, bob, box, folders, queues, prefix, spec, board, mine_env, bob_env)
    except AssertionError as e:  # both schedulers' words, whichever one the check was about
        logs = "\n".join(f"--- {u}'s gtui run:\n{r.text()}" for u, r in runs.items())
        raise AssertionError(f"{e}\n{logs}") from None
    finally:
        for user, folder in folders.items():
            for i in (1, 2):
                (folder / f"{prefix[user]}{i}.release").touch()
        for run in runs.values():
            if run.proc.poll() is None:
                run.proc.send_signal(signal.SIGTERM)
                try:
                    run.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    run.proc.kill()
                    run.proc.wait()
        for q in queues.values():
            kill_queue_processes(q)


def _play(
    runs: dict[str, LiveOutput],
    me: str,
    bob: pwd.struct_passwd,
    box: dict[str, object],
    folders: dict[str, Path],
    queues: dict[str, Path],
    prefix: dict[str, str],
    spec: Path,
    board: Path,
    mine_env: dict[str, str],
    bob_env: dict[str, str],
) -> None:
    # Both at once, as two colleagues would: the board's lock lets one take both GPUs.
    runs[me] = LiveOutput(
        _popen_as(None, [sys.executable, "-m", "gtui", "run", str(queues[me])], mine_env)
    )
    runs[bob.pw_name] = LiveOutput(
        _popen_as(
            bob,
            [str(box["python"]), "-m", "gtui", "run", str(queues[bob.pw_name])],
            bob_env,
        )
    )

    def starts(user: str) -> list[str]:
        return re.findall(r"start (\w+) \(attempt", runs[user].text())

    wait_for(lambda: sum(len(starts(u)) for u in runs) >= 2, what="two jobs to start, in all")
    winner = next(u for u in runs if len(starts(u)) == 2)
    loser = next(u for u in runs if u != winner)
    w, lose = prefix[winner], prefix[loser]
    # The one that waits says whose promise it waits for.
    line = runs[loser].wait_for(f"promised to {winner}'s {w}")
    assert "2 waiting" in line and "not yet allocated" in line, line
    assert f"{winner}'s {w}1" in line and f"{winner}'s {w}2" in line, line
    assert starts(loser) == []
    for user, run in runs.items():  # the board worked for both: no warning about it
        assert "neighbours' claims:" not in run.text(), user
    assert board.is_dir() and (board.stat().st_mode & 0o7777) == 0o1777
    owners = {p.name: p.stat().st_uid for p in board.glob("*.json")}
    uid = {me: os.geteuid(), bob.pw_name: bob.pw_uid}[winner]
    assert owners.get(f"{uid}.json") == uid

    # The winner's first job ends: its GPU, and only it, goes to the loser's first job.
    w_folder, l_folder = folders[winner], folders[loser]
    gpu_w1, gpu_w2 = _gpu_of(w_folder, f"{w}1"), _gpu_of(w_folder, f"{w}2")
    (w_folder / f"{w}1.release").touch()
    runs[loser].wait_for(f"start {lose}1 (attempt 1) on GPU {gpu_w1}")
    assert _gpu_of(l_folder, f"{lose}1") == gpu_w1

    # The winner's scheduler dies (kill -9); its second job runs on, and its claim with it.
    runs[winner].proc.send_signal(signal.SIGKILL)
    runs[winner].finish(timeout=30)
    gpus = ["80G", "80G"]
    gpus[gpu_w2] = "80G:1G"  # another user's 1G appears on the dead scheduler's GPU
    spec.write_text("\n".join(gpus) + "\n")
    # The loser reads the GPUs again after the kill (1G more used on that GPU changes its
    # words) and still counts the dead scheduler's claim: its job runs.
    line = runs[loser].wait_for(f"GPU{gpu_w2} 19G < 60G")
    assert f"GPU {gpu_w2}: 60G promised to {winner}'s {w}2" in line, line
    assert starts(loser) == [f"{lose}1"]

    # Once that job ends, nothing counts it: the loser's second job takes its GPU.
    (w_folder / f"{w}2.release").touch()
    runs[loser].wait_for(f"start {lose}2 (attempt 1) on GPU {gpu_w2}")
    for name in (f"{lose}1", f"{lose}2"):
        (l_folder / f"{name}.release").touch()
    out = runs[loser].finish(timeout=60)
    assert runs[loser].proc.returncode == 0, out
    assert "Traceback" not in out

    # Never two of them on one GPU at once, by the jobs' own clocks.
    spans = {
        f"{prefix[u]}{i}": _stamps(folders[u], f"{prefix[u]}{i}") for u in runs for i in (1, 2)
    }
    assert all(s is not None for s in spans.values()), spans
    done = [s for s in spans.values() if s is not None]
    for gpu in (0, 1):
        on = sorted((s[0], s[1]) for s in done if s[2] == gpu)
        assert len(on) == 2, spans
        assert on[0][1] <= on[1][0], f"GPU {gpu} held two 60G jobs at once: {spans}"
