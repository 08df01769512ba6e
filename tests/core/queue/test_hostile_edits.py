"""The queue file as hostile users and their tools write it, while the scheduler runs
(truncate-then-write, a file nested to break the reader, two saves in one second, a FIFO given
as the queue file). Nothing the file does deletes a record, re-runs a finished job
or stops the scheduler; each problem is said once and the last good queue runs on.

Every test uses a real `gtui run` (or the engine in process, where the test must look inside
it); jobs run until the test releases them and count their starts in files.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from gtui.core.api import Event, Notice
from gtui.core.queue.queuewatch import SETTLE_S, Changed, QueueWatch, Settling, Unchanged
from gtui.core.sched.engine import Engine
from tests.conftest import gtui, jobs_of, write_queue
from tests.reliability.helpers import state_of, wait_for
from tests.reliability.live import LiveOutput, start_live
from tests.waiting import until as _until

QUEUE = """
[[jobs]]
name = "a"
gpus = 0
cmd = "echo run >> a.runs"

[[jobs]]
name = "keep"
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"
"""

EXTRA = """
[[jobs]]
name = "c"
gpus = 0
after = ["a"]
cmd = "echo run >> c.runs"
"""


def _runs(tmp_path: Path, name: str) -> int:
    p = tmp_path / f"{name}.runs"
    return len(p.read_text().splitlines()) if p.exists() else 0


def _start(q: Path) -> LiveOutput:
    return start_live("run", str(q))


def _overwrite(path: Path, text: str) -> None:
    """Truncate, then write, in place: what `python gen.py > q.toml` and some editors do."""
    with open(path, "w") as f:
        f.write(text)


def test_truncate_then_write_never_reruns_a_done_job(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    live = _start(q)
    try:
        live.wait_for("done a")
        live.wait_for("start keep")
        _overwrite(q, "")  # `: > q.toml`
        live.wait_for("q.toml is empty: ignored")
        assert state_of(q, "a") == "done"
        _overwrite(q, QUEUE.lstrip() + EXTRA)  # `cat q.bak > q.toml`, with one job more
        live.wait_for("done c")  # the new file was taken, and c's `after = a` was met by a
        assert _runs(tmp_path, "a") == 1, live.text()
        assert state_of(q, "a") == "done"
    finally:
        (tmp_path / "release").touch()
    out = live.finish()
    assert "Traceback" not in out
    assert _runs(tmp_path, "a") == 1 and _runs(tmp_path, "c") == 1, out


def test_a_job_dropped_then_put_back_keeps_its_history(tmp_path: Path) -> None:
    """A complete, valid file without `a` retires it; putting it back does not run it again,
    and the user is told how to run it again if that is what they want."""
    q = write_queue(tmp_path, QUEUE)
    live = _start(q)
    try:
        live.wait_for("done a")
        without_a = QUEUE.split('[[jobs]]\nname = "keep"')[1]
        _overwrite(q, '[[jobs]]\nname = "keep"' + without_a)
        wait_for(lambda: "a" not in _status_names(q), 30, "a to leave the queue")
        _overwrite(q, QUEUE.lstrip())
        line = live.wait_for("back in the queue file")
        assert "gtui retry q.toml" in line and "a:" in line
        assert state_of(q, "a") == "done"
        assert _runs(tmp_path, "a") == 1
        # ... and `retry` does run it again.
        assert gtui("retry", str(q), "a").returncode == 0
        wait_for(lambda: _runs(tmp_path, "a") == 2, 30, "a to run again after retry")
    finally:
        (tmp_path / "release").touch()
    live.finish()


def _status_names(q: Path) -> set[str]:
    return set(jobs_of(q))


def test_a_file_nested_to_break_the_reader_leaves_the_scheduler_running(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    live = _start(q)
    try:
        live.wait_for("start keep")
        deep = "[" * 400 + "1" + "]" * 400
        _overwrite(q, QUEUE.lstrip() + f'\n[[jobs]]\ncmd = "x"\nmatrix = {{ a = {deep} }}\n')
        line = live.wait_for("not reloaded")
        assert "nested too deeply" in line
        assert state_of(q, "keep") == "running"
        _overwrite(q, QUEUE.lstrip() + EXTRA)
        live.wait_for("done c")
    finally:
        (tmp_path / "release").touch()
    out = live.finish()
    assert live.proc.returncode == 0, out
    assert "Traceback" not in out and "RecursionError" not in out


async def test_two_saves_in_the_same_second_are_both_seen(tmp_path: Path) -> None:
    """A file system with 1-second mtimes: two saves in the same second, of the same size, get
    the same mtime, and the scheduler read the file between them. Only the content tells them
    apart, and the engine must take the second save."""
    body = (
        '[settings]\npoll = "0.1s"\n'
        + QUEUE
        + '\n[[jobs]]\nname = "w"\ngpus = 0\nafter = ["keep"]\ncmd = "echo AAAA"\n'
    )
    q = write_queue(tmp_path, body)
    engine = Engine(q, fake_gpus="1x80G")
    reloads: list[str] = []

    def sink(event: Event) -> None:
        if isinstance(event, Notice) and event.text.startswith("reloaded"):
            reloads.append(event.text)

    engine.subscribe(sink)
    task = asyncio.create_task(engine.run(exit_when_idle=True))
    try:
        await _until(lambda: engine.started)
        await _until(lambda: engine.view("keep").record.state.value == "running")
        _overwrite(q, body.replace("AAAA", "BBBB"))
        second = q.stat().st_mtime_ns // 10**9 * 10**9  # what a 1-second clock records
        os.utime(q, ns=(second, second))
        await _until(lambda: engine.view("w").spec.cmd == "echo BBBB")
        _overwrite(q, body.replace("AAAA", "CCCC"))  # same size
        os.utime(q, ns=(second, second))  # and, on that clock, the same second
        await _until(lambda: engine.view("w").spec.cmd == "echo CCCC")
        assert len(reloads) == 2
    finally:
        (tmp_path / "release").touch()
        await asyncio.wait_for(task, 60)


def test_the_watch_reads_again_while_a_same_second_save_is_possible(tmp_path: Path) -> None:
    """The watch alone, step by step: same stat, new bytes, read because the last read came
    within RECENT_S of the file's mtime; taken only once seen twice SETTLE_S apart."""
    q = tmp_path / "q.toml"
    q.write_text('a = "AAAA"\n')
    watch = QueueWatch(q)
    watch.taken(watch.digest_of(q.read_text()))
    stamp = q.stat().st_mtime_ns
    assert isinstance(watch.check(), Unchanged)
    _overwrite(q, 'a = "BBBB"\n')
    os.utime(q, ns=(stamp, stamp))
    first_seen = time.monotonic()  # before the look that first sees it: the watch's own clock
    assert isinstance(watch.check(), Settling)  # starts within this call, never before it
    while isinstance(change := watch.check(), Settling):
        assert time.monotonic() - first_seen < 30, "never settled"
    assert isinstance(change, Changed) and change.text == 'a = "BBBB"\n'
    assert time.monotonic() - first_seen >= SETTLE_S
    watch.taken(change.digest)
    assert isinstance(watch.check(), Unchanged)


def test_a_fifo_given_as_the_queue_file_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "q.toml"
    os.mkfifo(fifo)
    for args in (("validate",), ("run",), ("status",)):
        out = gtui(*args, str(fifo), timeout=30)  # a hang fails here, not after minutes
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert "is a FIFO, not a regular file" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr


def test_a_queue_file_replaced_by_a_fifo_while_running_is_ignored(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    live = _start(q)
    try:
        live.wait_for("start keep")
        os.unlink(q)
        os.mkfifo(q)
        line = live.wait_for("queue file ignored")
        assert "FIFO" in line
    finally:
        (tmp_path / "release").touch()
    out = live.finish()
    assert live.proc.returncode == 0, out
