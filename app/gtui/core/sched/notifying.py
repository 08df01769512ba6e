"""The scheduler's notifications: which ends are worth one, and the facts each carries (the
environment of ``[notify] command``). Delivery is gtui.core.exec.notify's. A job's end reaches
it as a subscriber of the runs' bus (``RunEnded``)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from gtui.core.bus import EventBus
from gtui.core.exec.notify import Message, Notifier
from gtui.core.model import LOST_CAUSES, JobState
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.requeue import shown_state
from gtui.core.sched.runs import RunEnded
from gtui.core.state.book import JobBook

ENDS = frozenset({JobState.DONE, JobState.FAILED, JobState.KILLED, JobState.UNKNOWN})


class Notifying:
    """Sends ``[notify]``'s messages: a job's end, the queue done."""

    def __init__(self, bus: EventBus, book: JobBook, config: QueueConfig, queue_path: Path) -> None:
        self._bus = bus
        self._book = book
        self._config = config
        self.queue_path = queue_path
        self._notifier = Notifier(lambda text: self._bus.notice("warning", text))
        self._ends_since_done = 0

    async def drain(self, wait: float) -> None:
        """Give the deliveries under way up to ``wait`` seconds (a shutdown)."""
        await self._notifier.drain(wait)

    def on_run_ended(self, ended: RunEnded) -> None:
        """A job's run ended (the runs' bus): tell, if ``[notify]`` asks for this end."""
        rec = ended.record
        # Stopped through no fault of its own (preempted, interrupted): told as an "end" with
        # that word for its state, though it is queued again.
        stopped = rec.state is JobState.QUEUED and rec.requeued_as in LOST_CAUSES
        if rec.state not in ENDS and not stopped:
            return  # queued again for a retry: not an end yet
        self._ends_since_done += not stopped
        conf = self._config.settings.notify
        if not (conf.command or conf.apprise):
            return  # nobody to tell (the dashboard's bell and OSC 9 are its own)
        event = "failure" if rec.state == JobState.FAILED and "failure" in conf.on else "end"
        d = rec.diagnosis
        runtime = (
            rec.ended_at - rec.started_at
            if rec.ended_at is not None and rec.started_at is not None
            else None
        )
        # A stopped attempt ends by its cause (a GPU fault's too, though its job shows queued).
        word = str(rec.requeued_as) if stopped else shown_state(rec)
        how = word + (f" ({d.kind})" if d is not None and not stopped else "")
        env = {
            "GTUI_EVENT": event,
            "GTUI_QUEUE": str(self.queue_path),
            "GTUI_HOST": socket.gethostname(),
            "GTUI_JOB_NAME": rec.name,
            "GTUI_JOB_STATE": word,
            "GTUI_EXIT_CODE": "" if rec.exit_code is None else str(rec.exit_code),
            "GTUI_SIGNAL": "" if rec.signal is None else str(rec.signal),
            "GTUI_ATTEMPT": str(rec.attempt),
            "GTUI_GPUS": ",".join(map(str, rec.gpus)),
            "GTUI_LOG": rec.log or "",
            "GTUI_DIAGNOSIS": d.kind if d is not None else "",
            "GTUI_DIAGNOSIS_LINE": d.line if d is not None else "",
            "GTUI_RUNTIME_S": "" if runtime is None else f"{runtime:.0f}",
        }
        title = f"gtui: {rec.name} {how}"
        body = f"{rec.name} {how} after {env['GTUI_RUNTIME_S'] or '?'} s, attempt {rec.attempt}"
        if d is not None and d.line:
            body += f"\n{d.line[:300]}"
        env["GTUI_MESSAGE"] = body
        self._notifier.send(conf, Message(event, title, body, env))

    def gpu_fault(self, words: str, gpu: str, jobs: list[str]) -> None:
        """The health watch took a GPU out: told as a failure (the hardware's, said plainly)."""
        conf = self._config.settings.notify
        if not (conf.command or conf.apprise) or "failure" not in conf.on:
            return
        env = {
            "GTUI_EVENT": "failure",
            "GTUI_QUEUE": str(self.queue_path),
            "GTUI_HOST": socket.gethostname(),
            "GTUI_GPUS": gpu,
            "GTUI_JOBS": ",".join(jobs),
            "GTUI_DIAGNOSIS": "gpu_fault",
            "GTUI_MESSAGE": words,
        }
        self._notifier.send(conf, Message("failure", f"gtui: GPU {gpu} failed", words, env))

    def check_queue_done(self, idle: Callable[[], bool]) -> None:
        """After an end: if nothing runs and nothing more can start, say the queue is done
        (once per time it empties; a scheduler that started with nothing to do says nothing).
        ``idle`` is only asked when someone is to be told."""
        conf = self._config.settings.notify
        if not self._ends_since_done or "queue_done" not in conf.on:
            return
        if not (conf.command or conf.apprise) or not idle():
            return
        self._ends_since_done = 0
        counts = self._book.counts()
        env = {
            "GTUI_EVENT": "queue_done",
            "GTUI_QUEUE": str(self.queue_path),
            "GTUI_HOST": socket.gethostname(),
            **{f"GTUI_{s.value.upper()}": str(counts.get(s.value, 0)) for s in JobState},
            "GTUI_TOTAL": str(sum(counts.values())),
        }
        parts = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        body = f"{self.queue_path}: nothing more to run ({parts})"
        env["GTUI_MESSAGE"] = body
        msg = Message("queue_done", f"gtui: queue done ({parts})", body, env)
        self._notifier.send(self._config.settings.notify, msg)
