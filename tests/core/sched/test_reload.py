"""Live reload: the queue file is edited while the engine runs."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from gtui.core.api import Event, Notice
from gtui.core.sched.engine import Engine
from tests.conftest import write_queue
from tests.core.sched.test_engine import states, wait_for

BASE = """
[settings]
poll = "0.1s"
kill_grace = "1s"

[[jobs]]
name = "running"
mem = "60G"
cmd = "sleep 30"

[[jobs]]
name = "waiting"
mem = "60G"
cmd = "sleep 30"

[[jobs]]
name = "doomed"
mem = "60G"
cmd = "sleep 30"
"""


def rewrite(path: Path, text: str) -> None:
    """Write as an editor would, and make sure the mtime moves even on coarse clocks."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


async def test_edits_join_change_and_leave_but_running_jobs_are_untouched(tmp_path: Path) -> None:
    q = write_queue(tmp_path, BASE)
    engine = Engine(q, fake_gpus="1x80G")
    notices: list[Notice] = []

    def sink(event: Event) -> None:
        if isinstance(event, Notice):
            notices.append(event)

    engine.subscribe(sink)
    task = asyncio.create_task(engine.run())
    try:
        await wait_for(lambda: states(engine).get("running") == "running")
        pid = engine.view("running").record.pid
        edited = (
            BASE.replace(
                'cmd = "sleep 30"\n\n[[jobs]]\nname = "waiting"',
                'cmd = "sleep 99"\n\n[[jobs]]\nname = "waiting"',
            )
            .replace('name = "waiting"\nmem = "60G"', 'name = "waiting"\nmem = "10G"')
            .split('[[jobs]]\nname = "doomed"')[0]
            + '[[jobs]]\nname = "new"\ngpus = 0\ncmd = "true"\n'
        )
        rewrite(q, edited)
        await wait_for(lambda: "doomed" not in states(engine), what="doomed to leave")
        await wait_for(lambda: states(engine).get("new") == "done", what="new job to run")
        # The waiting job now asks 10G: it fits beside the running one in... shared mode it
        # cannot share a GPU with our job, so it still waits, but its request changed.
        assert engine.view("waiting").record.mem_mib == 10 * 1024
        running = engine.view("running")
        assert running.record.pid == pid and running.record.state.value == "running"
        assert running.spec.cmd == "sleep 30"  # a running job keeps what it was started with

        # A broken edit is reported and the last good version kept.
        rewrite(q, edited + "\n[[jobs]]\nname = 'broken'\ncmmd = 'x'\n")
        await wait_for(lambda: any("cmmd" in n.text for n in notices), what="a notice")
        assert "broken" not in states(engine)
        assert "waiting" in states(engine)
        assert any("last good" in n.text for n in notices)

        # The file deleted: said plainly, the queue goes on.
        q.unlink()
        await wait_for(lambda: any("is gone" in n.text for n in notices), what="gone notice")
        assert states(engine)["running"] == "running"
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


def test_the_frequent_look_reads_nothing_until_the_stat_changes(tmp_path: Path) -> None:
    """The 0.2 s look between polls is one stat: a file just written is not read again until
    its stat moves (the poll's own check keeps re-reading a recent file)."""
    from gtui.core.queue.queuewatch import QueueWatch

    q = tmp_path / "q.toml"
    q.write_text('[[jobs]]\ncmd = "true"\n')
    watch = QueueWatch(q)
    assert watch.moved()  # never looked at
    watch.check()
    assert not watch.moved()  # written a moment ago, yet nothing to read
    q.write_text('[[jobs]]\ncmd = "false"\n')
    os.utime(q, ns=(0, 1))  # a stat that surely differs, whatever the clock's granularity
    assert watch.moved()
    q.unlink()
    assert watch.moved()
