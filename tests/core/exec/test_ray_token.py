"""Token authentication on a real `ray start` cluster, set up as docs/cluster.md
says: `ray get-auth-token --generate` and `chmod 600` on the head, `RAY_AUTH_MODE=token`
for every `ray start`, a head and a second node joining it, each with its own GTUI_FAKE_GPUS and
GTUI_NODE_NAME, then `gtui run --backend ray` from a host with a copy of the token and no
RAY_AUTH_MODE of its own. A node or a gtui without the token is refused, gtui at once and in one
sentence.

Only what shares the machine with other test runs differs from docs/cluster.md: a private HOME (the
token file), a private --temp-dir, free ports instead of 6379 / 10001 / 52365, no dashboard, one
CPU a node; the cluster's processes are found by that temp dir and killed by pid (never `ray
stop`, which would stop every Ray on the machine).
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.conftest import gtui, write_queue

pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[test,ray]'")

pytestmark = pytest.mark.ray

RAY = shutil.which("ray", path=str(Path(sys.executable).parent)) or "ray"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class TokenCluster:
    root: Path  # its temp dir, HOMEs and queues, short (Unix socket paths are limited)
    address: str
    home: Path  # the head's HOME: ~/.ray/auth_token as `ray get-auth-token --generate` made it

    def env(self, home: Path, **more: str) -> dict[str, str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "GTUI_"))}
        return {**base, "HOME": str(home), **more}

    def ray_start(self, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`ray start ARGS --num-gpus 0` as docs/cluster.md has it, plus this test's isolation."""
        return subprocess.run(
            [
                RAY, "start", *args, "--num-gpus", "0", "--num-cpus", "1",
                "--disable-usage-stats",
                "--dashboard-agent-listen-port", str(_free_port()),
            ],
            env=self.env(home, **env),
            capture_output=True,
            text=True,
            timeout=180,
        )


def _ours(root: Path, port: int) -> list[psutil.Process]:
    """Every process of the cluster under ``root`` with its GCS at ``port``: those naming the
    one or the other (the head's Ray client server names only the GCS's address), and their
    descendants."""
    found: dict[int, psutil.Process] = {}
    for p in psutil.process_iter(["cmdline"]):
        try:
            parts = p.info["cmdline"] or ()
            if any(str(root) in part for part in parts) or any(
                part.startswith("--address=") and part.endswith(f":{port}") for part in parts
            ):
                found[p.pid] = p
                for child in p.children(recursive=True):
                    found[child.pid] = child
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return list(found.values())


def _kill(root: Path, port: int) -> None:
    procs = _ours(root, port)
    for p in procs:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    # Some of Ray's processes outlive a SIGTERM (the teardown waited out a 20 s timeout on
    # them every run): a few seconds to end cleanly, then SIGKILL; nothing is left either way.
    _gone, alive = psutil.wait_procs(procs, timeout=3)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=10)


@pytest.fixture(scope="module")
def token_cluster() -> Iterator[TokenCluster]:
    root = Path(tempfile.mkdtemp(prefix="gtok", dir="/tmp"))
    home = root / "head-home"
    home.mkdir()
    port = _free_port()
    cluster = TokenCluster(root, f"127.0.0.1:{port}", home)
    try:
        generate = subprocess.run(
            [RAY, "get-auth-token", "--generate"],
            env=cluster.env(home),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert generate.returncode == 0, generate.stderr
        token = home / ".ray" / "auth_token"
        assert token.exists()
        token.chmod(0o600)  # docs/cluster.md's `chmod 600 ~/.ray/auth_token`
        head = cluster.ray_start(
            home,
            "--head", "--port", str(port), "--node-ip-address", "127.0.0.1",
            "--temp-dir", str(root / "ray"), "--include-dashboard=false",
            "--ray-client-server-port", str(_free_port()),
            RAY_AUTH_MODE="token", GTUI_NODE_NAME="node1", GTUI_FAKE_GPUS="1x24G",
        )
        assert head.returncode == 0, head.stdout + head.stderr
        node2 = cluster.ray_start(
            home,
            "--address", cluster.address, "--node-ip-address", "127.0.0.1",
            RAY_AUTH_MODE="token", GTUI_NODE_NAME="node2", GTUI_FAKE_GPUS="1x24G",
        )
        assert node2.returncode == 0, node2.stdout + node2.stderr
        yield cluster
    finally:
        _kill(root, port)
        left = _ours(root, port)
        shutil.rmtree(root, ignore_errors=True)
        assert not left, f"left running: {[p.pid for p in left]}"


def _sweep(directory: Path, address: str) -> Path:
    directory.mkdir(exist_ok=True)
    return write_queue(
        directory,
        f'[cluster]\nbackend = "ray"\naddress = "{address}"\n'
        '[[jobs]]\nname = "sweep-{seed}"\ncmd = "echo seed {seed}"\nmatrix = { seed = [1, 2] }\n',
    )


def test_the_readme_set_up_runs_a_sweep_over_both_nodes(token_cluster: TokenCluster) -> None:
    # The scheduler's host: a copy of the head's token, left as a plain copy makes it (0644);
    # no RAY_AUTH_MODE: gtui sets token mode from the file and makes the file private.
    home = token_cluster.root / "sched-home"
    (home / ".ray").mkdir(parents=True)
    token = home / ".ray" / "auth_token"
    shutil.copyfile(token_cluster.home / ".ray" / "auth_token", token)
    token.chmod(0o644)
    queue = _sweep(token_cluster.root / "q", token_cluster.address)
    out = gtui("run", str(queue), env=token_cluster.env(home), timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "finished: 2 done" in out.stdout
    # no mem: each job needs a GPU to itself, and each node has one
    assert "on GPU node1:0" in out.stdout and "on GPU node2:0" in out.stdout, out.stdout
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert "made private (0600)" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_node_without_the_token_cannot_join(token_cluster: TokenCluster) -> None:
    home = token_cluster.root / "stranger-home"
    home.mkdir(exist_ok=True)
    port = int(token_cluster.address.rpartition(":")[2])
    before = {p.pid for p in _ours(token_cluster.root, port)}
    joined = token_cluster.ray_start(
        home, "--address", token_cluster.address, "--node-ip-address", "127.0.0.1"
    )
    assert joined.returncode != 0
    assert "AuthenticationError" in joined.stdout + joined.stderr
    assert {p.pid for p in _ours(token_cluster.root, port)} <= before  # it left nothing running


@pytest.mark.parametrize("token", [None, "another"], ids=["no-token", "wrong-token"])
def test_a_gtui_without_the_token_is_refused_at_once_in_one_sentence(
    token_cluster: TokenCluster, token: str | None
) -> None:
    home = token_cluster.root / f"home-{token}"
    (home / ".ray").mkdir(parents=True, exist_ok=True)
    if token:
        (home / ".ray" / "auth_token").write_text(token * 8)
        (home / ".ray" / "auth_token").chmod(0o600)
    queue = _sweep(token_cluster.root / f"q-{token}", token_cluster.address)
    t0 = time.monotonic()
    out = gtui("run", str(queue), env=token_cluster.env(home), timeout=120)
    took = time.monotonic() - t0
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"the Ray cluster at {token_cluster.address} refused this gtui" in out.stderr
    assert ("(present)" if token else "(absent)") in out.stderr
    assert "Traceback" not in out.stderr
    assert took < 15, f"took {took:.1f} s (Ray's own retries take about 20)"
