"""Another local user creates ``/tmp/gtui-<uid>`` before us, where XDG_RUNTIME_DIR is unset.
gtui must neither use it (the other user could block or capture the control
socket) nor fail: it falls back to a directory that is private by construction, and the
command line still reaches the scheduler there."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from tests.conftest import gtui, write_queue
from tests.reliability.helpers import finish, start_run, wait_for

OTHER_UID = 65534  # nobody: a real uid that is not ours


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory owned by another uid needs root")
def test_a_socket_directory_planted_by_another_user_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    tmp = tmp_path / "tmp"
    planted = tmp / f"gtui-{os.getuid()}"
    planted.mkdir(parents=True, mode=0o777)
    os.chmod(planted, 0o777)
    os.chown(planted, OTHER_UID, OTHER_UID)
    # A short home: the socket's path must fit a Unix socket's 108 bytes, and tmp_path is long
    # (more so under a pytest-xdist worker's folder).
    home = Path(tempfile.mkdtemp(prefix="gsd", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    for key, value in dict(TMPDIR=tmp, HOME=home, XDG_CACHE_HOME=home / ".cache").items():
        monkeypatch.setenv(key, str(value))
    env = dict(os.environ)
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "a"
        gpus = 0
        cmd = "touch started; while [ ! -e release ]; do sleep 0.05; done"
        """,
    )
    proc = start_run(q, env=env)
    try:
        wait_for(lambda: (tmp_path / "started").exists(), 30, "job a to start")
        got = gtui("status", str(q), env=env)
        assert got.returncode == 0, got.stderr
        assert "running" in got.stdout, got.stdout
        assert list(planted.iterdir()) == [], "a socket was made in the other user's directory"
        sockets = list((home / ".cache" / "gtui" / "run").glob("*.sock"))
        assert len(sockets) == 1
        run_dir = sockets[0].parent
        assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
        assert run_dir.stat().st_uid == os.getuid()
    finally:
        (tmp_path / "release").touch()
    out = finish(proc)
    assert "control socket unavailable" not in out, out
