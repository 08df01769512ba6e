"""Token authentication on a real Ray cluster (issue 23): the head is started with token mode on;
a gtui that has the token file joins it (setting token mode for itself and making the file
0600); one without it is refused in one clear message, not a traceback.

The cluster lives in a helper process of its own: Ray reads RAY_AUTH_MODE once per process, at
import, and this test process may have imported Ray without it (tests/test_ray_cluster.py).
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import gtui, write_queue

pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[test,ray]'")

pytestmark = pytest.mark.ray

HELPER = """
import os, signal, sys, time
from ray.cluster_utils import Cluster
c = Cluster(initialize_head=True, head_node_args={
    "num_cpus": 1, "env_vars": {"GTUI_FAKE_GPUS": "1x24G", "GTUI_NODE_NAME": "solo"}})
def bye(*_):
    c.shutdown()
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
print(c.address, flush=True)
while True:
    time.sleep(1)
"""


@pytest.fixture(scope="module")
def token_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A one-node cluster in token mode, and its token file (left readable by others, 0644)."""
    token = tmp_path_factory.mktemp("ray-token") / "auth_token"
    token.write_text(uuid.uuid4().hex)
    token.chmod(0o644)
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    helper = subprocess.Popen(
        [sys.executable, "-c", HELPER],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert helper.stdout is not None
        address = helper.stdout.readline().strip()  # blocks until the cluster is up
        assert address, "the helper did not start a cluster"
        yield address, token
    finally:
        helper.send_signal(signal.SIGTERM)
        try:
            helper.wait(timeout=60)
        except subprocess.TimeoutExpired:
            helper.kill()
            helper.wait()


def _queue(tmp_path: Path, address: str) -> Path:
    return write_queue(
        tmp_path,
        f'[cluster]\nbackend = "ray"\naddress = "{address}"\n'
        '[[jobs]]\nname = "hi"\ncmd = "echo hi"\nmem = "1G"\n',
    )


def test_a_driver_with_the_token_joins_and_makes_the_token_file_private(
    tmp_path: Path, token_cluster: tuple[str, Path]
) -> None:
    address, token = token_cluster
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    env["RAY_AUTH_TOKEN_PATH"] = str(token)  # the mode is gtui's to set from the file
    out = gtui("run", str(_queue(tmp_path, address)), env=env, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "done hi" in out.stdout
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert "made private (0600)" in out.stderr


def test_a_driver_without_the_token_is_refused_in_one_sentence(
    tmp_path: Path, token_cluster: tuple[str, Path]
) -> None:
    address, _token = token_cluster
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env["HOME"] = str(tmp_path)  # no ~/.ray/auth_token either
    out = gtui("run", str(_queue(tmp_path, address)), env=env, timeout=120)
    assert out.returncode == 2
    assert "Token authentication must match the head's" in out.stderr
    assert "Traceback" not in out.stderr
