"""gtui's cost per job above the fork+exec floor, split by cause, in CPU time.

A chain of N ``true`` jobs (``max_parallel = 1``, as the floor benchmark's) is run by the real
engine in this process, with ``gtui run``'s event log written to a file, and timers put around
the steps a job's start and end pass through. Each timer counts the CPU time of the scheduler's
main thread spent in its step and not in a deeper timed step (exclusive), so the causes add up.
CPU, not wall time: on a shared machine the wall of a chain is mostly waiting for a core, which
the peers in the same run wait for too (benchmarks/floor.py compares the walls).

- the wrapper: ``subprocess.Popen`` of the job's wrapper (the fork and exec as the scheduler
  pays them), and apart the CPU of the wrapper's and the job's own processes (``sh`` running
  ``bash -c true``) beside the floor's one ``/bin/true`` a job;
- the start-time read (/proc/PID/stat once after the fork: a reused pid is never the job);
- the log file and the status file created (``O_EXCL``), the rest of the launch (environment,
  checks);
- the store's commits (the intent before the launch, the pid after, the end) and the attempt
  appended to the history;
- the placement pass and the engine's bookkeeping around it, the start's own bookkeeping
  (record, environment, placeholders), the end's (outcome, retries);
- the event bus: every publish, with ``gtui run``'s event log lines;
- reaping the wrapper and reading its exit status;
- the rest of the scheduler's CPU (the asyncio loop, tasks, the other threads: the /proc scan for
  what a job left running, the GPU reader): the process's CPU time less the timed steps.

    python -m benchmarks.floor_split [--jobs 300]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_ENGINE, _RUNS = "gtui.core.sched.engine", "gtui.core.sched.runs"
# (label, owner's dotted module, attribute path): the steps timed, deepest first in meaning.
STEPS: list[tuple[str, str, str]] = [
    ("the wrapper: Popen (fork + exec, as the scheduler pays it)", "subprocess", "Popen"),
    ("the start-time read from /proc", "gtui.core.exec.runner", "create_time_of"),
    ("the status file created (O_EXCL)", "gtui.core.exec.runner", "new_status_file"),
    ("the log file created (O_EXCL)", "gtui.core.exec.runner", "_open_new_log"),
    ("the launch's rest (environment, checks)", "gtui.core.exec.runner", "launch"),
    ("the store: records committed", "gtui.core.state.book", "JobBook.commit"),
    ("the store: the attempt appended to the history", "gtui.core.sched.runs", "record_attempt"),
    ("the event bus and the event log lines", "gtui.core.bus", "EventBus.publish"),
    (
        "the placement pass and the engine's bookkeeping",
        "gtui.core.sched.engine",
        "Engine._schedule",
    ),
    (
        "a start's bookkeeping (record, env, placeholders)",
        "gtui.core.sched.runs",
        "JobRunner.start_job",
    ),
    ("an end's bookkeeping (outcome, retries)", "gtui.core.sched.runs", "JobRunner.finish"),
    ("the GPUs read again after an end", "gtui.core.sched.occupancy", "Occupancy.read_after_end"),
    ("reaping the wrapper, reading its exit status", "gtui.core.exec.runner", "_reap"),
    ("reaping the wrapper, reading its exit status", "gtui.core.exec.runner", "read_status_file"),
]
WRAPPER_PROCS = "the wrapper's and the job's processes (sh + bash -c true), their CPU"
REST = "the rest: asyncio loop, tasks, other threads (process CPU less the timed steps)"


class Timers:
    """Exclusive main-thread CPU per label: a step's time less the timed steps inside it."""

    def __init__(self) -> None:
        self.cpu: collections.Counter[str] = collections.Counter()
        self._stack: list[float] = []
        self._main = 0  # the thread the engine runs in (set by ``run``)

    def wrap(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        clock, stack, cpu, timers = time.thread_time, self._stack, self.cpu, self

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if timers._main != _thread_id():
                return fn(*args, **kwargs)  # a worker thread's call: counted in the rest
            t0 = clock()
            stack.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                spent = clock() - t0
                inner = stack.pop()
                cpu[label] += spent - inner
                if stack:
                    stack[-1] += spent

        return timed


def _thread_id() -> int:
    import threading

    return threading.get_ident()


@contextmanager
def instrumented(timers: Timers) -> Iterator[None]:
    import importlib

    saved: list[tuple[Any, str, Any]] = []
    try:
        for label, module, path in STEPS:
            owner: Any = importlib.import_module(module)
            *outer, attr = path.split(".")
            for part in outer:
                owner = getattr(owner, part)
            original = getattr(owner, attr)
            saved.append((owner, attr, original))
            setattr(owner, attr, timers.wrap(label, original))
        yield
    finally:
        for owner, attr, original in reversed(saved):
            setattr(owner, attr, original)


def _queue(path: Path, n: int) -> None:
    body = "".join(f'[[jobs]]\nname = "j{i}"\ngpus = 0\ncmd = "true"\n\n' for i in range(n))
    path.write_text(f'[settings]\nfake_gpus = "1x80G"\nmax_parallel = 1\n\n{body}')


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


async def _chain(queue: Path, log: Path, timers: Timers) -> tuple[float, float, float]:
    """(wall, process CPU, children CPU) of the engine's run of the queue, start-up left out."""
    from gtui.commands.run import EventLog
    from gtui.core.api import JobChanged, Notice, WaitingSummary
    from gtui.core.sched.build import build_engine

    engine = build_engine(str(queue), exits_with_run=True)
    with log.open("w") as out:
        engine.subscribe(EventLog(out, queue.name), (JobChanged, Notice, WaitingSummary))
        await engine.start()
        timers._main = _thread_id()
        timers.cpu.clear()
        t0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu()
        code = await engine.run(exit_when_idle=True)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        kids = _children_cpu() - k0
    if code != 0:
        raise RuntimeError(f"the chain's run ended {code}")
    return wall, cpu, kids


def floor_cpu(n: int) -> float:
    """CPU per job of the floor: a bash loop of ``/bin/true`` (bash's fork, true's exec)."""
    k0 = _children_cpu()
    subprocess.run(["bash", "-c", f"for i in $(seq {n}); do /bin/true; done"], check=True)
    return (_children_cpu() - k0) / n


def split(n: int) -> dict[str, float]:
    """ms of CPU per job by cause (``STEPS``' labels, the wrapper's processes, the rest), and
    ``total`` (the scheduler's CPU and its children's), ``floor`` and ``wall``."""
    timers = Timers()
    with tempfile.TemporaryDirectory(prefix="gtui-split-") as tmp:
        env = {k: os.environ.get(k) for k in ("XDG_STATE_HOME", "XDG_RUNTIME_DIR")}
        os.environ["XDG_STATE_HOME"] = os.environ["XDG_RUNTIME_DIR"] = tmp
        try:
            queue = Path(tmp) / "chain.toml"
            _queue(queue, n)
            with instrumented(timers):
                wall, cpu, kids = asyncio.run(_chain(queue, Path(tmp) / "events.log", timers))
        finally:
            for k, v in env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    out: dict[str, float] = {k: v / n * 1e3 for k, v in timers.cpu.items()}
    out[WRAPPER_PROCS] = kids / n * 1e3
    out[REST] = max(0.0, (cpu - sum(timers.cpu.values())) / n * 1e3)
    out["total"] = (cpu + kids) / n * 1e3
    out["floor"] = floor_cpu(n) * 1e3
    out["wall"] = wall / n * 1e3
    return out


def table(figures: dict[str, float]) -> str:
    floor, total = figures["floor"], figures["total"]
    causes = {k: v for k, v in figures.items() if k not in ("total", "floor", "wall")}
    lines = [
        f"CPU per job: gtui {total:.2f} ms (scheduler + the job's processes), the fork+exec floor "
        f"{floor:.2f} ms: gtui adds {total - floor:.2f} ms",
        "| cause | ms CPU per job |",
        "| --- | --- |",
    ]
    lines += [f"| {k} | {v:.3f} |" for k, v in sorted(causes.items(), key=lambda kv: -kv[1])]
    lines.append(
        f"| the floor's own fork+exec of /bin/true (counted in the wrapper's row) | {floor:.3f} |"
    )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=300)
    ns = ap.parse_args()
    print(table(split(ns.jobs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
