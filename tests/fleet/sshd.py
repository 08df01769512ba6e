"""A real sshd on 127.0.0.1 for the fleet tests: host and user keys made here (ssh-keygen),
its own sshd_config, and a client config (-F) that trusts it. Each ``Sshd`` is one "host"."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
from pathlib import Path

import psutil

from tests.waiting import wait_for

SSHD = "/usr/sbin/sshd"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def user_key(d: Path) -> Path:
    key = d / "id_ed25519"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


class Sshd:
    """One sshd; ``stop`` ends it and every session it holds (a stopped host), ``start`` again."""

    def __init__(self, d: Path, alias: str, key: Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        self.dir, self.alias, self.port = d, alias, free_port()
        hostkey = d / "host_ed25519"
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey)], check=True
        )
        shutil.copy(key.with_suffix(".pub"), d / "authorized_keys")
        self.config = d / "sshd_config"
        self.config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {hostkey}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\nStrictModes no\nUsePAM no\n"
            f"PidFile {d / 'sshd.pid'}\nPasswordAuthentication no\nPermitRootLogin yes\n"
            "KbdInteractiveAuthentication no\nLogLevel ERROR\nMaxSessions 50\nMaxStartups 50\n"
            # A login shell whose rc file runs `pyenv init` (root's, on the CI machines) waits up
            # to 60 s for pyenv's rehash lock, which a session killed by `stop` mid-rehash leaves
            # behind: every later login of the machine then hangs. Not waiting for it at all
            # keeps a stopped "host" from slowing the other.
            "SetEnv PYENV_REHASH_TIMEOUT=0\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=open(self.dir / "sshd.log", "ab"),  # noqa: SIM115
        )
        wait_for(self.listening, what=f"sshd on port {self.port}")

    def listening(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, (
            self.dir / "sshd.log"
        ).read_text()
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 1):
            return True
        return False

    def stop(self) -> None:
        """End the daemon and its sessions (a multiplexed connection lives in one of them)."""
        if self.proc is None:
            return
        with contextlib.suppress(psutil.Error):
            tree = psutil.Process(self.proc.pid)
            for p in [*tree.children(recursive=True), tree]:
                with contextlib.suppress(psutil.Error):
                    p.kill()
        self.proc.wait(10)
        self.proc = None


def client_config(d: Path, key: Path, hosts: list[Sshd]) -> Path:
    """The user's ssh config for the test: each host an alias for its port."""
    lines = []
    for h in hosts:
        lines += [
            f"Host {h.alias}",
            "  HostName 127.0.0.1",
            f"  Port {h.port}",
            f"  User {os.environ.get('USER') or 'root'}",
            f"  IdentityFile {key}",
            "  IdentitiesOnly yes",
            f"  UserKnownHostsFile {d / 'known_hosts'}",
            "  StrictHostKeyChecking accept-new",
            "  ConnectTimeout 5",
            "",
        ]
    cfg = d / "ssh_config"
    cfg.write_text("\n".join(lines))
    return cfg


def sshd_problem() -> str | None:
    """Why sshd cannot run here, or None."""
    if not os.path.exists(SSHD):
        return f"{SSHD} is missing (apt-get install openssh-server)"
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "the ssh client is missing (apt-get install openssh-client)"
    return None
