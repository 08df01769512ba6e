"""The local executor: jobs as real process trees on this machine (gtui.core.exec.runner).

This is the only place where the scheduler's decisions become pids and signals. Why each step
is done the way it is (the wrapper, the status file, pidfd waits, killing daemonized
grandchildren) is explained in ``runner``; this class only gives it the executor's shape.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from pathlib import Path

import psutil

from gtui.core.exec import runner
from gtui.core.exec.base import (
    ExitStatus,
    Found,
    Handle,
    LaunchRequest,
    file_size,
    read_file_range,
)

PID_MAX_LIMIT = 1 << 22  # Linux's largest pid_max


class LocalExecutor:
    name = "local"

    def launch(self, req: LaunchRequest) -> Handle:
        return runner.launch(req)

    async def wait(self, handle: Handle) -> ExitStatus:
        return await runner.wait_exit(handle)

    async def kill(
        self,
        handle: Handle,
        grace_s: float,
        on_signalled: Callable[[], None] | None = None,
    ) -> None:
        # kill_tree sends SIGCONT with SIGTERM, so a suspended job can act on it too.
        await runner.kill_tree(
            handle.pid,
            grace_s,
            create_time=handle.create_time or None,
            log_path=handle.log_path if str(handle.log_path) != os.devnull else None,
            on_signalled=on_signalled,
        )

    def suspend(self, handle: Handle) -> None:
        runner.suspend(handle.pid, create_time=handle.create_time or None)

    def signal(self, handle: Handle, signum: int) -> None:
        runner.signal_group(handle.pid, signum, create_time=handle.create_time or None)

    def resume(self, handle: Handle) -> None:
        runner.resume(handle.pid, create_time=handle.create_time or None)

    def alive(self, handle: Handle) -> bool:
        return bool(handle.pid) and runner.is_alive(handle.pid, handle.create_time)

    def exit_status(self, handle: Handle) -> ExitStatus | None:
        if str(handle.status_path) == os.devnull:
            return None
        return runner.read_status_file(handle.status_path)

    def find(self, token: str) -> Found | None:
        """The outermost process of this user that carries ``GTUI_TOKEN=token``: the wrapper."""
        if not token:
            return None
        me = os.getuid()
        for proc in psutil.process_iter(["uids"]):
            try:
                if proc.info["uids"] is None or proc.info["uids"].real != me:
                    continue
                if proc.environ().get("GTUI_TOKEN") != token:
                    continue
            except (psutil.Error, OSError):
                continue
            # Its children inherit the token too: walk up to the wrapper, the outermost one. A
            # parent we may not read (pid 1 after the reparenting, in some sandboxes) is not it:
            # that error once made a crashed start look never-started, and it ran twice.
            while True:
                try:
                    parent = proc.parent()
                    if parent is None or parent.environ().get("GTUI_TOKEN") != token:
                        break
                except (psutil.Error, OSError):
                    break
                proc = parent
            try:
                return Found(proc.pid, proc.create_time())
            except psutil.Error:
                return None
        return None

    def leftovers(self, tokens: Collection[str]) -> dict[str, list[int]]:
        return runner.processes_with_env_values("GTUI_TOKEN", tokens)

    def gpu_processes(
        self,
        handles: Mapping[str, Handle],
        on_gpu: Mapping[int, list[tuple[int, int | None]]],
    ) -> dict[str, list[tuple[int, int, int]]]:
        out: dict[str, list[tuple[int, int, int]]] = {}
        if not on_gpu:
            return out
        roots = {h.pid for h in handles.values()}
        # Walk process trees (psutil, costly) only when some GPU process is not a job's root
        # (pids beyond pid_max are the fake layer's declared holders: never a job's).
        need_trees = any(pid not in roots and pid <= PID_MAX_LIMIT for pid in on_gpu)
        for name, handle in handles.items():
            tree = runner.process_tree(handle.pid) if need_trees else {handle.pid}
            out[name] = [
                (pid, index, mem or 0) for pid in tree for index, mem in on_gpu.get(pid, ())
            ]
        return out

    def host_memory_mib(self, handles: Mapping[str, Handle]) -> dict[str, int]:
        """Resident host memory of each job's process tree now, MiB."""
        return runner.trees_rss_mib({name: h.pid for name, h in handles.items() if h.pid})

    def log_size(self, path: str) -> int | None:
        return file_size(path)

    def read_log(self, path: str, offset: int, limit: int) -> bytes:
        return read_file_range(path, offset, limit)

    def status_path(self, run_dir: Path, name: str, attempt: int) -> Path:
        return runner.free_status_path(run_dir, name, attempt)

    def free_port(self) -> int:
        return runner.free_port()
