"""``recover`` alone: a job book over a store in a temp dir, the memory executor,
no Engine. After a restart each running record is sorted: still running (adopted with the
handle it was launched with), ended meanwhile (with its exit status), found by its launch
token (its pid was not saved), or never started (queued again, the attempt not counted).

The restart is real as far as the records go: the store is closed and opened again, and one
record is written as a gtui from before the Ray executor (no ``node``, no peaks) saved it.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from gtui.core.bus import EventBus
from gtui.core.exec.base import ExitStatus, Handle, LaunchRequest
from gtui.core.exec.memory import MemoryExecutor
from gtui.core.model import JobState
from gtui.core.queue.queuefile import load_queue
from gtui.core.sched.recovery import recover
from gtui.core.state.book import JobBook
from gtui.core.state.store import Store
from tests.conftest import write_queue

QUEUE = "".join(
    f'[[jobs]]\nname = "{name}"\ngpus = 0\ncmd = "true"\n\n'
    for name in ("ended", "still", "found", "never", "elsewhere")
)


def open_book(tmp_path: Path) -> JobBook:
    """The job book a (re)started scheduler builds over the queue's store."""
    book = JobBook(Store(tmp_path / "state.db"), EventBus(), "q.toml")
    book.apply(load_queue(tmp_path / "q.toml"), initial=True)
    book.save_deferred()
    return book


async def test_recover_sorts_the_running_records_after_a_restart(tmp_path: Path) -> None:
    write_queue(tmp_path, QUEUE)
    ex = MemoryExecutor()
    log_dir, run_dir = tmp_path / "logs", tmp_path / "run"
    book = open_book(tmp_path)

    def start(name: str, cmd: str | None) -> Handle | None:
        """What the scheduler commits and launches; no launch for ``cmd`` None (a crash
        between the commit of the intent and the launch)."""
        rec = book.records[name]
        rec.state, rec.attempt, rec.started_at = JobState.RUNNING, 1, time.time()
        rec.token = f"tok-{name}"
        rec.status_file = str(ex.status_path(run_dir, name, 1))
        book.commit(rec)
        if cmd is None:
            return None
        return ex.launch(
            LaunchRequest(name, 1, cmd, tmp_path, {"GTUI_TOKEN": rec.token}, log_dir, run_dir)
        )

    def record_pid(name: str, h: Handle) -> None:
        rec = book.records[name]
        rec.pid, rec.create_time = h.pid, h.create_time
        rec.log, rec.status_file, rec.node = str(h.log_path), str(h.status_path), h.node
        book.commit(rec)

    ended = start("ended", "echo bye; exit 3")
    still = start("still", "sleep 60")
    found = start("found", "sleep 60")  # crashed before its pid was recorded
    start("never", None)
    elsewhere = start("elsewhere", "sleep 60")
    assert ended and still and found and elsewhere
    record_pid("ended", ended)
    record_pid("elsewhere", elsewhere)
    # "still" as an earlier gtui saved it: the handle's fields under the same names.
    old = {
        "name": "still",
        "state": "running",
        "attempt": 1,
        "gpus": [],
        "pid": still.pid,
        "create_time": still.create_time,
        "log": str(still.log_path),
        "status_file": str(still.status_path),
        "token": "tok-still",
        "started_at": time.time(),
    }
    book.store.conn.execute("UPDATE jobs SET data = ? WHERE name = 'still'", (json.dumps(old),))
    assert await asyncio.wait_for(ex.wait(ended), 5) == ExitStatus(3, None)
    book.store.close()

    book = open_book(tmp_path)  # the restart
    out = recover(book, ex, log_dir, leave={"elsewhere"})
    assert out.ended == [("ended", ExitStatus(3, None))]
    assert dict(out.adopt) == {"still": still, "found": found}
    rec = book.records["found"]  # found by its token: its pid, create time and log saved
    assert (rec.pid, rec.create_time, rec.log) == (
        found.pid,
        found.create_time,
        str(found.log_path),
    )
    assert book.store.get("found") == rec
    never = book.records["never"]  # never launched: back to the queue, attempt not counted
    assert (never.state, never.attempt, never.token) == (JobState.QUEUED, 0, None)
    assert book.store.get("never") == never
    assert book.records["elsewhere"].state is JobState.RUNNING  # left to its own executor
    book.store.close()
