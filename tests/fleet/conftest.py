"""Two "hosts" for the fleet tests: two real sshd on 127.0.0.1, each reaching a queue that a
real headless scheduler runs on fake GPUs; the remote gtui is this venv's, by absolute path."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gtui.core.errors import GtuiError
from gtui.fleet import transport
from gtui.fleet.config import load_hosts
from tests.cli_helpers import Procs, cleaned_procs, gate
from tests.conftest import write_queue
from tests.fleet.sshd import Sshd, client_config, sshd_problem, user_key

GTUI = str(Path(sys.executable).parent / "gtui")
ENV_NAMES = ("XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "GTUI_CLAIMS_DIR")


@dataclass
class Fleet:
    hosts: dict[str, Sshd]
    queues: dict[str, Path]
    ssh: str
    procs: Procs
    config: Path

    def target(self, alias: str) -> str:
        return f"{alias}:{self.queues[alias]}"


def remote_gtui() -> str:
    """The venv's gtui, with this test session's private folders (ssh passes no environment)."""
    env = [f"{k}={os.environ[k]}" for k in ENV_NAMES if os.environ.get(k)]
    return shlex.join(["env", *env, GTUI])


def _queue(d: Path, alias: str) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    return write_queue(
        d,
        f"""
        [[jobs]]
        name = "{alias}-long"
        cmd = "echo {alias} epoch 1 loss 0.42; {gate(alias + "-long")}"
        gpus = 1
        """,
    )


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    why = sshd_problem()
    if why:
        pytest.skip(why)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    key = user_key(tmp_path)
    hosts = {a: Sshd(tmp_path / f"sshd-{a}", a, key) for a in ("alpha", "beta")}
    try:
        for h in hosts.values():
            h.start()
    except (AssertionError, OSError) as e:
        for h in hosts.values():
            h.stop()
        pytest.skip(f"sshd cannot start here: {e}")
    cfg = client_config(tmp_path, key, list(hosts.values()))
    ssh = shlex.join(["ssh", "-F", str(cfg)])
    queues = {a: _queue(tmp_path / a, a) for a in hosts}
    conf = Path(os.environ["XDG_CONFIG_HOME"]) / "gtui" / "fleet.toml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(
        "".join(
            f"[[host]]\nname = {a!r}\nqueue = {str(q)!r}\nssh = {ssh!r}\ngtui = {remote_gtui()!r}\n\n"
            for a, q in queues.items()
        )
    )
    gen = cleaned_procs()
    procs = next(gen)
    try:
        for q in queues.values():
            procs.scheduler(q)
        yield Fleet(hosts, queues, ssh, procs, conf)
    finally:
        with contextlib.suppress(GtuiError):  # the master connections, then the daemons
            asyncio.run(transport.close(load_hosts([])))
        for h in hosts.values():
            h.stop()
        for _ in gen:
            pass
        conf.unlink(missing_ok=True)
