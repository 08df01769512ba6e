"""Deliver notifications: the ``[notify]`` command and Apprise URLs.

Every delivery is a child process with a deadline (``timeout``), run one after another by a
worker task: a command that hangs or fails, an Apprise URL that cannot be reached, costs the
notifications behind it at most that deadline and never holds up the scheduler, whose only call
is :meth:`Notifier.send` (it queues and returns). A channel that fails is said once (a
``warning`` through ``on_problem``), and not again until it has worked once more: an SMTP
server that is down for the night gives one line, not one per job.

Apprise (the optional extra ``gtui[notify]``) is imported only in the child
(``python -m gtui.core.exec.notify URL...``): neither the scheduler nor a short command pays for
its import, and a missing install is one clear line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gtui.core.model import Notify

QUEUE_LIMIT = 200  # notifications waiting for delivery; more are dropped (and counted)
OUTPUT_LIMIT = 4096  # what is kept of a failing delivery's output, for the message
MISSING_APPRISE = 3  # the child's exit status when apprise is not installed


@dataclass(frozen=True)
class Message:
    """One notification: the event, a title and body for people, the facts for a command."""

    event: str  # "end" | "failure" | "queue_done"
    title: str
    body: str
    env: Mapping[str, str]


class Notifier:
    """Delivers :class:`Message` s in the background; see the module docstring."""

    def __init__(self, on_problem: Callable[[str], None]) -> None:
        self._on_problem = on_problem
        self._queue: asyncio.Queue[tuple[Notify, Message]] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._failing: set[str] = set()  # channels whose last delivery failed (said once)
        self._dropped = 0

    def send(self, conf: Notify, msg: Message) -> None:
        """Queue ``msg`` for the channels of ``conf`` that take its event; return at once."""
        if msg.event not in conf.on or not (conf.command or conf.apprise):
            return
        if self._queue is None:
            self._queue = asyncio.Queue(QUEUE_LIMIT)
        try:
            self._queue.put_nowait((conf, msg))
        except asyncio.QueueFull:
            self._dropped += 1
            if self._dropped == 1:
                self._on_problem(
                    f"notifications: more than {QUEUE_LIMIT} waiting for delivery; "
                    "the newest are dropped"
                )
            return
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._work())

    async def drain(self, timeout: float) -> None:
        """Give the queued deliveries up to ``timeout`` seconds (at shutdown: `gtui run`'s
        "queue done" must go out before it exits), then stop; say what was left undelivered."""
        worker = self._worker
        if worker is None:
            return
        if self._queue is not None:
            try:
                await asyncio.wait_for(self._queue.join(), timeout)
            except TimeoutError:
                left = self._queue.qsize() + 1  # the one under way too
                self._on_problem(
                    f"{left} notification(s) not delivered: the scheduler stopped after waiting "
                    f"{timeout:g} s for them"
                )
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await worker

    async def _work(self) -> None:
        assert self._queue is not None
        while True:
            conf, msg = await self._queue.get()
            try:
                if conf.command:
                    self._result("command", msg, await run_command(conf, msg))
                if conf.apprise:
                    self._result("apprise", msg, await run_apprise(conf, msg))
            finally:
                self._queue.task_done()

    def _result(self, channel: str, msg: Message, error: str | None) -> None:
        if error is None:
            self._failing.discard(channel)
            return
        if channel in self._failing:
            return  # said already; quiet until it works again
        self._failing.add(channel)
        self._on_problem(
            f"notification not delivered ({channel}, {msg.event}): {error}; "
            "further failures of it are not shown until it works again"
        )


async def run_command(conf: Notify, msg: Message) -> str | None:
    """Run ``[notify] command`` for ``msg``; None when it exited 0, else why not."""
    assert conf.command
    env = {**os.environ, **msg.env}
    return await _child(["bash", "-c", conf.command], env, None, conf.timeout_s)


async def run_apprise(conf: Notify, msg: Message) -> str | None:
    """Deliver ``msg`` to the Apprise URLs in a child process; None when Apprise said ok."""
    data = json.dumps({"title": msg.title, "body": msg.body}).encode()
    argv = [sys.executable, "-m", "gtui.core.exec.notify", *conf.apprise]
    err = await _child(argv, dict(os.environ), data, conf.timeout_s)
    return err


async def _child(
    argv: list[str], env: Mapping[str, str], stdin: bytes | None, timeout: float
) -> str | None:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,  # its own group: a timeout kills all it started
        )
    except OSError as e:
        return f"cannot start {argv[0]}: {e.strerror or e}"
    try:
        out, _ = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except TimeoutError:
        await _kill(proc)
        return f"timed out after {timeout:g} s (killed)"
    except asyncio.CancelledError:  # the scheduler shuts down: leave nothing behind
        await _kill(proc)
        raise
    if proc.returncode == 0:
        return None
    text = out[-OUTPUT_LIMIT:].decode("utf-8", "replace").strip()
    last = text.splitlines()[-1] if text else ""
    if proc.returncode == MISSING_APPRISE and "apprise" in last:
        return last
    return f"exit {proc.returncode}" + (f": {last[:200]}" if last else "")


async def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        await asyncio.shield(proc.wait())


def _apprise_main(urls: list[str]) -> int:
    """The child: read {"title", "body"} on stdin, notify every URL through Apprise."""
    try:
        import apprise  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        print("apprise is not installed: pip install 'gtui[notify]' (or pip install apprise)")
        return MISSING_APPRISE
    data = json.load(sys.stdin)
    ap = apprise.Apprise()
    bad = [u for u in urls if not ap.add(u)]
    if bad:
        print(f"Apprise does not know the URL {bad[0]!r}")
        return 2
    ok = ap.notify(title=str(data.get("title", "")), body=str(data.get("body", "")) or " ")
    if not ok:
        print("Apprise could not deliver to every URL (see its log above)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_apprise_main(sys.argv[1:]))
