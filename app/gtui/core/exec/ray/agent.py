"""The node agent: one long-lived Ray actor per node that runs that node's jobs.

The class here is plain Python; :mod:`gtui.core.exec.ray.cluster` makes it a detached, named
actor pinned to its node (hard node affinity) asking Ray for no GPUs and no CPUs, with enough
threads that a slow log read never holds up a launch. It imports nothing of Ray, so the
single-server path never pays for it.

What was learned the hard way (running jobs on Ray clusters), and where it is done here:

- Jobs start detached from the agent (``setsid -f``: the wrapper is a grandchild in its own
  session), never as its children: when an agent exits or restarts, Ray kills its children.
  ``subreaper`` reports whether some ancestor made itself a child subreaper (Ray's
  ``RAY_kill_child_processes_on_worker_exit_with_raylet_subreaper``), which would undo that.
- A Ray worker's environment carries Ray's own variables; they are stripped (:func:`job_env`)
  and ``CUDA_VISIBLE_DEVICES`` is always set, ``""`` for a CPU job.
- Exits are polled with acknowledgements (:meth:`NodeAgent.exits`): an exit is sent again until
  the scheduler says it recorded it, and then never again.

The job's wrapper, its log, its exit-status file and the killing of its tree are the local
executor's (``gtui.core.exec.runner``), so a job on a node behaves as it does on one server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from gtui.core.exec import runner
from gtui.core.exec.local import LocalExecutor
from gtui.core.paths import ensure_private_dir

# Variables a Ray worker has that a job under the local executor would not.
STRIPPED = ("OMP_NUM_THREADS", "PYTHONBREAKPOINT")
STRIPPED_PREFIXES = ("RAY_",)
NODE_NAME_VAR = "GTUI_NODE_NAME"  # a node's name in gtui (default: its host name)

# The wrapper of runner, told its own pid first on fd 3: the agent cannot learn it otherwise,
# as the wrapper is not its child.
# Its stderr is a pipe to the agent until it has said its pid (dash takes one-digit fds only);
# then /dev/null, as the local wrapper's.
_DETACHED_WRAPPER = 'printf "%s\\n" "$$" >&2; exec 2>/dev/null\n' + runner.WRAPPER

JobKey = tuple[int, float]  # pid, create time: one job, never a reused pid


def job_env(base: Mapping[str, str], extra: Mapping[str, str], gpus: int) -> dict[str, str]:
    """The job's environment: the node's (``base``) without Ray's variables, plus the
    scheduler's (``extra``); CUDA_VISIBLE_DEVICES always set (the node's ``gpus`` GPUs for an
    unisolated job, ``""`` for a CPU one)."""
    env = {
        k: v
        for k, v in base.items()
        if k not in STRIPPED and not k.startswith(STRIPPED_PREFIXES) and k != "CUDA_VISIBLE_DEVICES"
    }
    env.update(extra)
    if "CUDA_VISIBLE_DEVICES" not in env:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
    return env


def node_name() -> str:
    """This node's name in gtui: $GTUI_NODE_NAME where set (one machine standing for several
    servers in tests), else the host name."""
    return os.environ.get(NODE_NAME_VAR) or socket.gethostname().split(".")[0]


def subreaper_ancestor() -> int | None:
    """The pid of the process that adopts a detached child of this one, when it is not init:
    a child subreaper (Ray's raylet with its subreaper option on) that would kill our jobs
    with the agent. Found by detaching a throwaway sleeper and looking at its new parent."""
    r, w = os.pipe()
    try:
        # A throwaway detached sleeper: where it lands after its parent exits is where our jobs
        # land. setsid -f forks, so its parent (setsid itself) exits at once.
        proc = subprocess.Popen(
            ["setsid", "-f", "/bin/sh", "-c", 'printf "%s\\n" "$$" >&2; exec 2>&-; sleep 2'],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=w,
        )
        os.close(w)
        w = -1
        pid = int(_read_all(r).strip() or 0)
        proc.wait()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                ppid = psutil.Process(pid).ppid()
            except psutil.Error:
                return None
            if ppid != proc.pid:
                with contextlib.suppress(OSError):
                    os.kill(pid, 15)
                return None if ppid == 1 else ppid
            time.sleep(0.01)
        return None
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def _read_all(fd: int) -> str:
    chunks: list[bytes] = []
    while True:
        data = os.read(fd, 4096)
        if not data:
            return b"".join(chunks).decode(errors="replace")
        chunks.append(data)


class NodeAgent:
    """Runs, watches and stops the jobs of one node; every method is safe from many threads."""

    def __init__(self) -> None:
        self.node = node_name()
        self._lock = threading.Lock()
        self._watch: dict[JobKey, str] = {}  # job -> its status file
        self._ended: dict[JobKey, tuple[int | None, int | None]] = {}
        self._gpu_backend: Any = None
        self._local = LocalExecutor()

    # -- identity ------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Who this agent is: its node's name, host, pid (for the scheduler and the tests)."""
        return {"node": self.node, "host": socket.gethostname(), "pid": os.getpid()}

    def subreaper(self) -> int | None:
        """The pid of a subreaper that would adopt our detached jobs (None: init does)."""
        return subreaper_ancestor()

    # -- launching -----------------------------------------------------------------------------

    def launch(self, req: runner.LaunchRequest, node_gpus: int) -> runner.Launched:
        """Start a job detached from this actor; LaunchError (a message) when it cannot."""
        bash = runner.bash_path()
        if bash is None:
            raise runner.LaunchError(f"job {req.name}: bash not found on node {self.node}")
        if not req.cwd.is_dir():
            raise runner.LaunchError(
                f"job {req.name}: cwd {req.cwd} does not exist on node {self.node}; "
                "the queue's folder must be on every node (a shared file system)"
            )
        try:
            ensure_private_dir(req.run_dir)
            status_path = runner.new_status_file(req.run_dir, req.name, req.attempt)
            log_fd, log_path = runner.open_new_log(req.log_dir, req.name, req.attempt)
        except OSError as e:
            raise runner.LaunchError(f"job {req.name} on node {self.node}: {e}") from e
        env = job_env(os.environ, req.env, node_gpus if req.gpus else 0)
        env["GTUI_CMD"] = req.cmd
        env[runner.RUN_ID_VAR] = uuid.uuid4().hex
        r, w = os.pipe()
        args = (str(status_path), bash)
        try:
            proc = subprocess.Popen(
                ["setsid", "-f", "/bin/sh", "-c", _DETACHED_WRAPPER, "gtui-job", *args],
                cwd=req.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=w,
            )
            os.close(w)
            w = -1
            said = _read_all(r).strip()
            proc.wait()
            pid = int(said) if said.isdigit() else 0
        except (OSError, ValueError) as e:
            raise runner.LaunchError(f"job {req.name}: could not start on {self.node}: {e}") from e
        finally:
            os.close(r)
            os.close(log_fd)
            if w >= 0:
                os.close(w)
        if not pid:
            raise runner.LaunchError(
                f"job {req.name}: could not start on node {self.node}: {said[:200] or 'no pid'}"
            )
        create_time = runner.create_time_of(pid)  # now if it ended: its status file says how
        with self._lock:
            self._watch[(pid, create_time)] = str(status_path)
        return runner.Launched(pid, create_time, log_path, status_path, self.node)

    # -- exits, with acknowledgements ------------------------------------------------------------

    def exits(
        self,
        watch: Sequence[tuple[int, float, str]],
        ack: Sequence[tuple[int, float]],
        timeout_s: float,
    ) -> list[tuple[int, float, int | None, int | None]]:
        """Every watched job that ended and is not yet acknowledged: (pid, create time, exit
        code, signal). Waits up to ``timeout_s`` for one when none is. ``watch`` adds jobs (a
        new scheduler's re-adopted ones); ``ack`` drops exits the scheduler has recorded."""
        with self._lock:
            for pid, ct, status in watch:
                key = (pid, ct)
                if key not in self._ended:
                    self._watch.setdefault(key, status)
            for pid, ct in ack:
                self._ended.pop((pid, ct), None)
                self._watch.pop((pid, ct), None)
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            self._collect()
            with self._lock:
                if self._ended or time.monotonic() >= deadline:
                    return [(p, c, st[0], st[1]) for (p, c), st in self._ended.items()]
                keys = list(self._watch)
            self._wait_any(keys, deadline - time.monotonic())

    def _collect(self) -> None:
        with self._lock:
            watched = list(self._watch.items())
        for (pid, ct), status in watched:
            if runner.is_alive(pid, ct):
                continue
            got = runner.read_status_file(Path(status))
            ended = (got.exit_code, got.signal) if got is not None else (None, None)
            with self._lock:
                if (pid, ct) in self._watch:
                    del self._watch[(pid, ct)]
                    self._ended[(pid, ct)] = ended

    @staticmethod
    def _wait_any(keys: Sequence[JobKey], timeout_s: float) -> None:
        """Sleep until one of the jobs ends (pidfds: at once) or ``timeout_s`` passes."""
        poller = select.poll()
        fds = []
        try:
            for pid, _ct in keys:
                try:
                    fd = os.pidfd_open(pid)
                except OSError:
                    return  # gone already
                fds.append(fd)
                poller.register(fd, select.POLLIN)
            # A job launched meanwhile is not among the fds: wake at least every 0.25 s.
            poller.poll(max(0, int(min(timeout_s, 0.25) * 1000)))
        finally:
            for fd in fds:
                os.close(fd)

    # -- the rest of the executor interface, on this node ------------------------------------

    def alive(self, pid: int, create_time: float) -> bool:
        return bool(pid) and runner.is_alive(pid, create_time)

    def exit_status(self, status_path: str) -> runner.ExitStatus | None:
        return runner.read_status_file(Path(status_path))

    def kill(self, pid: int, create_time: float, log_path: str | None, grace_s: float) -> None:
        asyncio.run(
            runner.kill_tree(
                pid,
                grace_s,
                create_time=create_time or None,
                log_path=Path(log_path) if log_path else None,
            )
        )

    def suspend(self, pid: int, create_time: float) -> None:
        runner.suspend(pid, create_time=create_time or None)

    def resume(self, pid: int, create_time: float) -> None:
        runner.resume(pid, create_time=create_time or None)

    def find(self, token: str) -> tuple[int, float] | None:
        found = self._local.find(token)
        return None if found is None else (found.pid, found.create_time)

    def leftovers(self, tokens: Sequence[str]) -> dict[str, list[int]]:
        return runner.processes_with_env_values("GTUI_TOKEN", tokens)

    def log_size(self, path: str) -> int | None:
        return self._local.log_size(path)

    def read_log(self, path: str, offset: int, limit: int) -> bytes:
        return self._local.read_log(path, offset, limit)

    def free_port(self) -> int:
        return runner.free_port()

    def gpus(self, ours: Sequence[Any]) -> Any:
        """This node's GPU snapshot: NVML, or simulated ones where $GTUI_FAKE_GPUS is set in the
        environment of this node's ``ray start``. ``ours``: our jobs here (JobUsage, with this
        node's GPU indices), which simulated GPUs show as used."""
        if self._gpu_backend is None:
            from gtui.core.gpus.backend import open_backend

            self._gpu_backend = open_backend(os.environ.get("GTUI_FAKE_GPUS"), Path.cwd())
        return self._gpu_backend.read(tuple(ours))
