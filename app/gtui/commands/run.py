"""``gtui run [--stay [DURATION]] QUEUE.toml``: the engine with no UI, one timestamped line per
event. It ends when nothing more can run; ``--stay`` keeps it serving (a `gtui add` finds it)
until `gtui stop`, or DURATION after its last job ended. A dashboard that quits hands its queue
to one of these in the background (``--take-over-from``, gtui.core.sched.handover)."""

from __future__ import annotations

import argparse
import asyncio
import math
import signal
import sys
import time
from typing import TextIO

from gtui.commands.options import GlobalOptions
from gtui.core.api import (
    Event,
    JobChanged,
    Notice,
    QueuePaused,
    WaitingSummary,
)
from gtui.core.errors import EXIT_INTERRUPTED, GtuiError
from gtui.core.gpus.snapshot import gpu_label
from gtui.core.model import JobState
from gtui.core.sched.build import build_engine
from gtui.core.sched.engine import Engine
from gtui.core.units import UnitError, format_duration, format_mib, parse_duration_s, plural


class EventLog:
    """Turns engine events into the headless event log (one line each, flushed at once)."""

    def __init__(self, out: TextIO, queue_name: str = "QUEUE.toml") -> None:
        self.out = out
        self._queue_name = queue_name
        self._last_state: dict[str, tuple[str, int, str | None]] = {}
        self._paused = False

    def line(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self.out.write(f"[{stamp}] {text}\n")
        self.out.flush()

    def __call__(self, event: Event) -> None:
        if isinstance(event, JobChanged):
            self._job(event)
        elif isinstance(event, Notice):
            self.line(f"{event.level}: {event.text}")
        elif isinstance(event, QueuePaused):
            if event.paused != self._paused:
                self._paused = event.paused
                self.line(
                    "queue paused: no new starts; this scheduler waits for "
                    f"`gtui resume {self._queue_name}` (or Ctrl-C to stop it)"
                    if event.paused
                    else "queue resumed"
                )
        elif isinstance(event, WaitingSummary) and event.text:
            self.line(event.text)

    def _job(self, event: JobChanged) -> None:
        rec = event.job.record
        spec = event.job.spec
        # The diagnosis's kind too: a start put off keeps its state and attempt (still queued).
        key = (rec.state.value, rec.attempt, rec.diagnosis.kind if rec.diagnosis else None)
        if self._last_state.get(rec.name) == key:
            return
        previous = self._last_state.get(rec.name)
        self._last_state[rec.name] = key
        name = rec.name
        if rec.state == JobState.RUNNING:
            if previous and previous[0] == JobState.SUSPENDED.value:
                self.line(f"resumed {name}")
                return
            labels = ",".join(gpu_label(g, rec.node) for g in rec.gpus)
            where = f"GPU {labels}" if rec.gpus else f"CPU of {rec.node}" if rec.node else "CPU"
            mem = f", {format_mib(rec.mem_mib)}/GPU" if rec.gpus and rec.mem_mib else ""
            warn = "".join(f"; warning: {w}" for w in rec.warnings)
            self.line(f"start {name} (attempt {rec.attempt}) on {where}{mem}: pid {rec.pid}{warn}")
            return
        elapsed = ""
        if rec.started_at and rec.ended_at:
            elapsed = f" after {format_duration(rec.ended_at - rec.started_at)}"
        diag = rec.diagnosis
        if rec.signal is not None:
            status = f"signal {rec.signal}"
        elif rec.exit_code is not None:
            status = f"exit {rec.exit_code}"
        else:  # it never started (launch), or ended while gtui was down and left no status
            status = "not started" if diag and diag.kind == "launch" else "exit status unknown"
        if diag and not diag.line:
            # No line to quote: the log had nothing in it. Say so, not ``error:  (hint``.
            status += ", the log is empty"
            why = f": {diag.kind} (hint: {diag.hint})"
        else:
            why = f": {diag.kind}: {diag.line} (hint: {diag.hint})" if diag else ""
        if rec.state == JobState.DONE:
            self.line(f"done {name}{elapsed} (exit 0)")
        elif rec.state == JobState.FAILED:
            self.line(f"failed {name}{elapsed} ({status}){why}")
        elif rec.state == JobState.KILLED:
            self.line(f"killed {name}{elapsed}")
        elif rec.state == JobState.UNKNOWN:
            self.line(f"unknown {name}{elapsed}{why}")
        elif rec.state == JobState.BLOCKED:
            self.line(f"blocked {name}: {rec.reason}")
        elif rec.state == JobState.SUSPENDED:
            self.line(f"suspended {name}")
        elif rec.state == JobState.HELD:
            self.line(f"held {name}")
        elif rec.state == JobState.QUEUED and diag is not None and diag.kind == "not_started":
            self.line(f"waits {name}: {rec.reason}")  # a start put off: no retry spent
        elif rec.state == JobState.QUEUED and previous is not None:
            if previous[0] in (JobState.RUNNING.value, JobState.SUSPENDED.value):
                left = (
                    "until it succeeds"
                    if spec.retries < 0
                    else (f"{spec.retries - (rec.attempt - rec.first_attempt)} left")
                )
                self.line(f"retry {name} ({status}{why}); retries {left}")
            elif previous[0] != JobState.QUEUED.value:
                self.line(f"queued {name}")


async def run_headless(
    queue: str,
    fake_gpus: str | None,
    out: TextIO,
    backend: str | None = None,
    *,
    stay_s: float = 0.0,
    take_over_from: int | None = None,
) -> int:
    # exits_with_run: `gtui stop` waits for this process to end, not only the run.
    taking_over = take_over_from is not None
    engine = build_engine(
        queue, fake_gpus=fake_gpus, cluster=backend, exits_with_run=True, taking_over=taking_over
    )
    log = EventLog(out, engine.queue_path.name)
    if take_over_from is not None and not await _wait_for_dashboard(engine, log, take_over_from):
        return 0
    engine.subscribe(log, (JobChanged, Notice, QueuePaused, WaitingSummary))
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    stop_reason: list[str] = []

    def on_signal(signame: str) -> None:
        # SIGTERM / SIGHUP (an SSH drop without tmux): stop scheduling, leave jobs running.
        # Once: a second Ctrl-C while it shuts down must not cut the shutdown short.
        if stop_reason:
            return
        stop_reason.append(signame)
        if task is not None:
            task.cancel()

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    await engine.start()
    counts = engine.counts()
    log.line(
        f"gtui run {engine.queue_path} ({plural(sum(counts.values()), 'job')}: "
        + ", ".join(f"{v} {k}" for k, v in counts.items() if v)
        + ("; SIMULATED GPUs" if engine.fake else "")
        + ")"
    )
    try:
        code = await engine.run(exit_when_idle=True, stay_s=stay_s)
    except asyncio.CancelledError:
        running = [v.record.name for v in engine.jobs() if v.record.active]
        await engine.shutdown()
        log.line(
            f"{stop_reason[0] if stop_reason else 'stopped'}: scheduler stopped; "
            + (
                f"{plural(len(running), 'running job')} keep{'s' if len(running) == 1 else ''} "
                f"running ({', '.join(running)}) and {'is' if len(running) == 1 else 'are'} "
                "re-adopted by the next `gtui run` / `gtui` on this queue"
                if running
                else "no job was running"
            )
        )
        return EXIT_INTERRUPTED
    counts = engine.counts()
    # `gtui stop` ended it (its notice said what became of the running jobs), or it finished.
    ended = "stopped by `gtui stop`" if engine.stop_requested else "finished"
    log.line(f"{ended}: " + ", ".join(f"{v} {k}" for k, v in counts.items() if v))
    if engine.stop_requested and code != 0:
        return EXIT_INTERRUPTED  # the user stopped it before every job ended: none failed
    return code


async def _wait_for_dashboard(engine: Engine, log: EventLog, pid: int) -> bool:
    """The successor of a dashboard: wait until it has released the queue. False (said in
    the log) when it never does, or another scheduler took the queue first."""
    from gtui.core.paths import register_queue
    from gtui.core.sched.handover import RELEASE_WAIT_S, TAKING_OVER, wait_released
    from gtui.core.state.lock import QueueLock

    q = engine.queue_path.name
    log.line(f"{TAKING_OVER}{engine.queue_path} from its dashboard (pid {pid})")
    paths = register_queue(engine.paths)  # its lock under the queue's identity (a renamed file)
    if not await asyncio.to_thread(wait_released, paths, pid):
        log.line(
            f"the dashboard (pid {pid}) still holds {q} after {RELEASE_WAIT_S:g} s: not taken "
            "over; it runs the queue on"
        )
        return False
    holder = QueueLock(paths).holder()
    if holder is not None:
        log.line(f"another scheduler (pid {holder}) took {q} first: nothing to take over")
        return False
    return True


def stay_seconds(value: str | None) -> float:
    """``--stay``'s value: 0 without it, ``inf`` with no DURATION, else the duration."""
    if value is None:
        return 0.0
    if value == FOREVER:
        return math.inf
    try:
        return parse_duration_s(value)
    except UnitError as e:
        raise GtuiError(f"--stay: {e}") from None


FOREVER = "until-stopped"  # --stay with no DURATION


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    queue, stay = ns.queue, ns.stay
    if queue is None and stay not in (None, FOREVER):
        # `gtui run --stay q.toml`: the file was taken for the duration.
        queue, stay = stay, FOREVER
    if queue is None:
        raise GtuiError("gtui run: give the queue file, e.g. `gtui run q.toml`")
    stay_s = stay_seconds(stay)
    return asyncio.run(
        run_headless(
            queue,
            opts.fake_gpus,
            sys.stdout,
            opts.backend,
            stay_s=stay_s,
            take_over_from=ns.take_over_from,
        )
    )
