"""``enforce = true``: each job limited to the cores and memory it asked, through cgroup v2 by
``systemd-run --user --scope`` (the job's shell is exec'd into a scope of the user's systemd
with ``CPUQuota`` and ``MemoryMax``, keeping its pid, session and process group, so the
executor's waits and tree kills are unchanged).

Whether the machine allows it is asked once per process, by a real try of a scope
(``probe``): no systemd-run, no user manager (no session bus), or no cgroup v2 is a one-line
reason, which the job's log then starts with; the job runs unlimited rather than not at all.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess

PROBE_TIMEOUT_S = 10.0
_probed: tuple[bool, str] | None = None


def probe() -> tuple[bool, str]:
    """(whether jobs can be limited here, why not in words); tried once per process."""
    global _probed
    if _probed is None:
        _probed = _try()
    return _probed


def _try() -> tuple[bool, str]:
    run = shutil.which("systemd-run")
    if run is None:
        return False, "systemd-run is not installed"
    argv = [run, "--user", "--scope", "--quiet", "-p", "MemoryMax=1G", "-p", "CPUQuota=100%"]
    try:
        done = subprocess.run(
            [*argv, "true"],
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"systemd-run --user --scope failed: {e}"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return False, "systemd-run --user --scope failed: " + (said[-1] if said else "no reason")
    return True, ""


def limit_argv(cpus: int | None, ram_mib: int | None) -> list[str]:
    """The systemd-run words that limit a job to ``cpus`` cores and ``ram_mib`` of memory."""
    run = shutil.which("systemd-run") or "systemd-run"
    argv = [run, "--user", "--scope", "--quiet", "--collect"]
    if cpus:
        argv += ["-p", f"CPUQuota={cpus * 100}%"]
    if ram_mib:
        argv += ["-p", f"MemoryMax={ram_mib}M", "-p", "MemorySwapMax=0"]
    return argv


def limited_cmd(cmd: str, bash: str, cpus: int | None, ram_mib: int | None) -> str:
    """``cmd`` run inside a limited scope: its bash exec'd through systemd-run."""
    words = [*limit_argv(cpus, ram_mib), "--", bash, "-c", cmd]
    return "exec " + shlex.join(words)


def unlimited_note(why: str) -> str:
    """The line a job's log starts with when it asked to be limited and cannot be here."""
    return f"gtui: enforce = true, but this job runs unlimited here: {why}\n"
