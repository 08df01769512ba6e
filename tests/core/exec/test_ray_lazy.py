"""The Ray backend is optional: without it nothing imports Ray, a queue file's
[cluster] section is checked like any other, and the Ray driver's own setup (the token file,
what ray.init changes in the process) is right. No cluster is needed here."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gtui.core.errors import QueueFileError
from gtui.core.exec.ray.agent import job_env
from gtui.core.queue.queuefile import load_queue
from tests.conftest import write_queue

BLOCK_RAY = (
    "import sys\n"
    "class Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name == 'ray' or name.startswith('ray.'):\n"
    "            raise ImportError('ray is blocked in this test')\n"
    "sys.meta_path.insert(0, Block())\n"
)


def test_without_the_extra_nothing_imports_ray_and_a_local_queue_runs(tmp_path: Path) -> None:
    """Every gtui module imports, and `gtui run` of a local queue runs, with `import ray` made
    to fail; afterwards no ray module was loaded."""
    q = write_queue(tmp_path, '[settings]\nfake_gpus = "1x8G"\n[[jobs]]\ncmd = "true"\n')
    code = BLOCK_RAY + (
        "import pkgutil, gtui\n"
        "for m in pkgutil.walk_packages(gtui.__path__, 'gtui.'):\n"
        "    if m.name not in ('gtui.__main__', 'gtui.core.diagnosis.rulematch'):\n"
        "        __import__(m.name)\n"
        "from gtui.cli import main\n"
        f"rc = main(['run', {str(q)!r}])\n"
        "assert not [k for k in sys.modules if k == 'ray' or k.startswith('ray.')]\n"
        "print('rc', rc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "rc 0" in out.stdout


def test_asking_for_ray_without_it_says_how_to_install_it(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[settings]\nfake_gpus = "1x8G"\n[[jobs]]\ncmd = "true"\n')
    code = BLOCK_RAY + f"from gtui.cli import main\nraise SystemExit(main(['run', '--backend', 'ray', {str(q)!r}]))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "pip install 'gtui[ray]'" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_cluster_section_is_read_and_checked(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [cluster]
        backend = "ray"
        address = "10.0.0.1:6379"
        exclude = ["node2", "node3:1"]
        reserve = { node1 = 1 }

        [[jobs]]
        cmd = "true"
        """,
    )
    s = load_queue(q).settings
    assert (s.cluster_backend, s.cluster_address) == ("ray", "10.0.0.1:6379")
    assert s.cluster_exclude == ("node2", "node3:1")
    assert s.cluster_reserve == (("node1", 1),)
    neg = write_queue(tmp_path, '[cluster]\nreserve = { node1 = -1 }\n[[jobs]]\ncmd = "true"\n', "n.toml")
    with pytest.raises(QueueFileError, match="GPUs kept free per node"):
        load_queue(neg)
    bad = write_queue(tmp_path, '[cluster]\nbackend = "slurm"\n[[jobs]]\ncmd = "true"\n', "b.toml")
    with pytest.raises(QueueFileError) as e:
        load_queue(bad)
    assert "b.toml:2" in str(e.value) and "backend" in str(e.value)
    typo = write_queue(tmp_path, '[cluster]\nadress = "auto"\n[[jobs]]\ncmd = "true"\n', "t.toml")
    with pytest.raises(QueueFileError, match="address"):
        load_queue(typo)


def test_a_job_env_has_none_of_rays_variables_and_always_cuda_visible_devices() -> None:
    worker = {
        "PATH": "/usr/bin",
        "RAY_JOB_ID": "01000000",
        "RAY_RAYLET_PID": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONBREAKPOINT": "ray.util.rpdb.set_trace",
        "CUDA_VISIBLE_DEVICES": "",
    }
    env = job_env(worker, {"CUDA_VISIBLE_DEVICES": "1", "GTUI_JOB": "a"}, 2)
    assert env == {"PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "1", "GTUI_JOB": "a"}
    assert job_env(worker, {}, 0)["CUDA_VISIBLE_DEVICES"] == ""  # a CPU job
    assert job_env(worker, {}, 2)["CUDA_VISIBLE_DEVICES"] == "0,1"  # unisolated: its node's


def test_the_token_file_is_made_private_and_token_mode_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gtui.core.exec.ray.cluster import secure_token

    token = tmp_path / "auth_token"
    token.write_text("secret\n")
    token.chmod(0o644)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    # setenv first so that monkeypatch restores each variable as it was, absent included:
    # secure_token sets RAY_AUTH_MODE, and a leaked "token" makes every later test cluster's
    # start time out (its head waits for a token it was never given).
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_MODE"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    note = secure_token()
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert note is not None and "0600" in note
    assert os.environ["RAY_AUTH_MODE"] == "token"
    assert secure_token() is None  # already private: nothing to say
