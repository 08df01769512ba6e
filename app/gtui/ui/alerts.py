"""The dashboard's own notifications: the terminal bell and an OSC 9 desktop
notification, for the events ``[notify] on`` names, when ``bell`` / ``desktop`` is on (both off
by default: a dashboard that beeps unasked is closed for good).

OSC 9 (``ESC ] 9 ; text BEL``) is shown as a desktop notification by iTerm2, WezTerm, kitty,
Windows Terminal, foot, ghostty and others; a terminal without it ignores it. Inside tmux it is
wrapped for passthrough, which tmux 3.3+ forwards with ``set -g allow-passthrough on``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from gtui.core.api import JobView
from gtui.core.gpus.health import HARDWARE
from gtui.core.model import ACTIVE_STATES, JobState, Notify
from gtui.core.termtext import safe_text

ENDS = frozenset({JobState.DONE, JobState.FAILED, JobState.KILLED, JobState.UNKNOWN})


def osc9(text: str, *, in_tmux: bool = False) -> str:
    """The escape sequence of a desktop notification saying ``text`` (made safe, one line)."""
    body = safe_text(" ".join(text.split())).replace("\x1b", "")[:200]
    seq = f"\x1b]9;{body}\x07"
    if in_tmux:
        seq = "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return seq


def end_events(
    before: Mapping[str, JobState], views: Iterable[JobView], on: Iterable[str]
) -> list[str]:
    """What to say for the jobs among ``views`` that have just ended (their state before the
    batch in ``before``), for the events ``on`` names."""
    wanted = set(on)
    out = []
    for v in views:
        rec = v.record
        old = before.get(v.spec.name)
        if rec.state not in ENDS or old is None or old == rec.state or old not in ACTIVE_STATES:
            continue
        failed = rec.state == JobState.FAILED
        if "end" in wanted or (failed and "failure" in wanted):
            d = rec.diagnosis
            out.append(f"gtui: {v.spec.name} {rec.state.value}" + (f" ({d.kind})" if d else ""))
    return out


def fault_events(notices: Iterable[tuple[str, str]], on: Iterable[str]) -> list[str]:
    """The health watch's words among ``notices`` (level, text), for a ``failure`` alert: a GPU
    that failed under the queue is said as a failure is."""
    if "failure" not in set(on):
        return []
    return [f"gtui: {text}" for level, text in notices if level == "error" and HARDWARE in text]


class Alerts:
    """Rings and notifies through ``write`` (the terminal), as ``[notify]`` says."""

    def __init__(self, write: Callable[[str], None], *, in_tmux: bool = False) -> None:
        self._write = write
        self.in_tmux = in_tmux
        self.sent: list[str] = []  # what was said, newest last (the last 50)
        self._was_busy = False

    def say(self, conf: Notify, texts: list[str]) -> None:
        if not texts or not (conf.bell or conf.desktop):
            return
        if conf.bell:
            self._write("\a")
        if conf.desktop:
            text = texts[0] if len(texts) == 1 else f"{texts[0]} (+{len(texts) - 1} more)"
            self._write(osc9(text, in_tmux=self.in_tmux))
        self.sent = [*self.sent[-49:], *texts]

    def queue_state(self, conf: Notify, views: Iterable[JobView]) -> None:
        """After a batch: if jobs ran and now none runs nor waits to start, the queue is done."""
        busy = any(
            v.record.state in ACTIVE_STATES or v.record.state == JobState.QUEUED for v in views
        )
        if self._was_busy and not busy and "queue_done" in conf.on:
            self.say(conf, ["gtui: queue done"])
        self._was_busy = busy
