"""`gtui add` into a running queue: the scheduler checks and appends the one new job without
reading the file again, and ends up exactly where a whole reload would have."""

from __future__ import annotations

import asyncio
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from gtui.core.api import Event, Notice
from gtui.core.errors import GtuiError
from gtui.core.model import JobState
from gtui.core.queue.queuefile import load_queue
from gtui.core.sched.engine import Engine
from tests.waiting import until

GATE = """\
[[jobs]]
name = "gate"
gpus = 0
cmd = "while [ ! -e release ]; do sleep 0.05; done"
"""
QUEUE = (
    "[settings]\nmax_parallel = 1\n\n"
    + GATE
    + """
# a comment that must stay where it is
[[jobs]]
name = "sweep"
gpus = 1
mem = "10G"
cmd = "echo {lr}"
matrix = { lr = [1, 2] }
"""
)


def write(tmp_path: Path, text: str = QUEUE) -> Path:
    q = tmp_path / "q.toml"
    q.write_text(textwrap.dedent(text))
    return q


async def started(q: Path) -> tuple[Engine, list[Event]]:
    engine = Engine(q, fake_gpus="2x80G", control=False)
    seen: list[Event] = []
    engine.subscribe(seen.append)
    await engine.start()
    return engine, seen


def reloads(seen: list[Event]) -> int:
    return sum(1 for e in seen if isinstance(e, Notice) and e.text.startswith("reloaded"))


async def test_add_appends_one_job_without_a_reload_and_matches_a_whole_load(
    tmp_path: Path,
) -> None:
    q = write(tmp_path)
    engine, seen = await started(q)
    try:
        name = await engine.add({"name": "late", "cmd": "echo late", "gpus": 0, "after": ["gate"]})
        assert name == "late"
        assert reloads(seen) == 0  # taken in as written, not by reading the file again
        # The file keeps every byte it had, and gains the job at its end.
        text = q.read_text()
        assert text.startswith(QUEUE) and "# a comment that must stay where it is" in text
        # What the scheduler holds is what a whole load of the new file gives.
        whole = load_queue(q)
        assert [j.name for j in whole.jobs] == [v.spec.name for v in engine.jobs()]
        assert whole.jobs[-1] == engine.view("late").spec
        assert engine.view("late").spec.after == ("gate",)
        # And the file watcher sees nothing new to take (no second copy of the job).
        engine.parts.intake.reload_if_changed(force=True)
        assert reloads(seen) == 0
        assert [v.spec.name for v in engine.jobs()].count("late") == 1
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)


async def test_added_job_runs(tmp_path: Path) -> None:
    q = write(tmp_path)
    engine, _seen = await started(q)
    run = asyncio.create_task(engine.run())
    try:
        await engine.add({"name": "late", "cmd": "echo hello > late.out", "gpus": 0})
        (tmp_path / "release").touch()
        await until(lambda: engine.view("late").record.state.value == "done", what="late done")
        assert (tmp_path / "late.out").read_text() == "hello\n"
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)
        run.cancel()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "gate", "cmd": "true"}, "already the name of a job"),
        ({"name": "big", "cmd": "true", "mem": "200G"}, "more than any GPU has"),
        ({"name": "typo", "cmd": "true", "gpus": "two"}, "gpus"),
    ],
)
async def test_a_bad_job_is_refused_and_the_file_is_untouched(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    q = write(tmp_path)
    engine, _seen = await started(q)
    try:
        with pytest.raises(GtuiError) as err:
            await engine.add(fields)
        assert message in str(err.value) and "not added" in str(err.value)
        assert q.read_text() == QUEUE
        assert [v.spec.name for v in engine.jobs()] == ["gate", "sweep-lr=1", "sweep-lr=2"]
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)


async def test_an_edit_not_yet_taken_sends_add_the_whole_way(tmp_path: Path) -> None:
    """The file on disk is not the version the scheduler runs: the add goes through a whole
    load, so the edit is neither lost nor taken in half."""
    q = write(tmp_path)
    engine, seen = await started(q)
    try:
        q.write_text(QUEUE.replace('name = "gate"', 'name = "gate2"'))
        await engine.add({"name": "late", "cmd": "true", "gpus": 0})
        names = [v.spec.name for v in engine.jobs()]
        assert "gate2" in names and "late" in names
        assert reloads(seen) >= 1
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)


async def test_after_naming_a_matrix_entry_goes_the_whole_way(tmp_path: Path) -> None:
    q = write(tmp_path)
    engine, _seen = await started(q)
    try:
        await engine.add({"name": "report", "cmd": "true", "gpus": 0, "after": ["sweep"]})
        assert engine.view("report").spec.after == ("sweep-lr=1", "sweep-lr=2")
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)


async def test_after_a_refused_save_add_says_the_files_problem_and_appends_nothing(
    tmp_path: Path,
) -> None:
    """A save the scheduler refused (a broken file) is not the version it runs, though it was
    judged: an add must not append to it and call the result taken. Else the refused save's
    other changes were never loaded, and a later fix (a one-job edit against that text) would
    take in only the fixed job."""
    q = write(tmp_path)
    engine, seen = await started(q)
    try:
        broken = QUEUE.replace('mem = "10G"', 'mem = "lots"').replace("max_parallel = 1", "")
        q.write_text(broken)
        engine.parts.intake.reload_if_changed(force=True)
        assert any(isinstance(e, Notice) and "last good version kept" in e.text for e in seen)
        with pytest.raises(GtuiError) as err:
            await engine.add({"name": "late", "cmd": "true", "gpus": 0})
        assert "mem" in str(err.value)
        assert q.read_text() == broken  # nothing appended to a file the scheduler refused
        assert "late" not in [v.spec.name for v in engine.jobs()]
        # The fix is taken whole: the max_parallel removed in the refused save as well.
        q.write_text(broken.replace('mem = "lots"', 'mem = "10G"'))
        engine.parts.intake.reload_if_changed(force=True)
        await until(lambda: engine.settings.max_parallel != 1)
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)


def _held_after_write(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Make the add's write wait, once done, until released: the moment between an add's
    write and its take-in, when another add or the file watcher may look at the file."""
    from gtui.core.queue import writeback

    written, release = threading.Event(), threading.Event()
    real = writeback.append_known_many

    def append_known_many(*args: Any, **kw: Any) -> Any:
        out = real(*args, **kw)
        written.set()
        release.wait(30)
        return out

    monkeypatch.setattr(writeback, "append_known_many", append_known_many)
    return written, release


async def test_a_reload_between_an_adds_write_and_its_take_in_makes_no_second_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file holds the new job before the add takes it in: a reload then (the watcher, or
    another shell's add going the whole way) must not take it too, or the take-in after it
    made a second record of the same name, and the job ran twice."""
    q = write(tmp_path)
    engine, _seen = await started(q)
    written, release = _held_after_write(monkeypatch)
    try:
        add = asyncio.create_task(engine.add({"name": "late", "cmd": "true", "gpus": 0}))
        await until(written.is_set, what="the add's write")
        engine.parts.intake.reload_if_changed(
            force=True
        )  # what the watcher or a second add would do
        second = asyncio.create_task(engine.add({"name": "other", "cmd": "true", "gpus": 0}))
        await asyncio.sleep(0)  # the second add reaches the file lock or the edit lock
        release.set()
        assert await add == "late" and await second == "other"
        names = [v.spec.name for v in engine.jobs()]
        assert names.count("late") == 1 and names.count("other") == 1
        assert engine._book.order.count("late") == 1
        assert [j.name for j in load_queue(q).jobs].count("late") == 1
    finally:
        release.set()
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)


async def test_the_book_takes_a_name_it_holds_no_second_time(tmp_path: Path) -> None:
    """extend is told of a job the book holds already (a reload read it first): the record
    stays the one it is, the job stays once in the queue."""
    q = write(tmp_path)
    engine, _seen = await started(q)
    try:
        await engine.add({"name": "late", "cmd": "true", "gpus": 0})
        book = engine._book
        rec = book.records["late"]
        rec.state = JobState.RUNNING  # as if it had started since
        book.extend([book.specs["late"]])
        assert book.records["late"] is rec and book.order.count("late") == 1
        assert book.names.count("late") == 1
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)


async def test_a_running_job_added_back_keeps_its_run(tmp_path: Path) -> None:
    """A running job removed from the file runs on; added again by name, it joins the queue
    with its own record: not a new one that starts it a second time."""
    q = write(tmp_path)
    engine, _seen = await started(q)
    run = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.view("gate").record.state == JobState.RUNNING, what="gate")
        q.write_text(QUEUE.replace(GATE, ""))
        engine.parts.intake.reload_if_changed(force=True)
        assert "gate" not in engine._book.order and engine.view("gate").record.active
        await engine.add({"name": "gate", "cmd": "echo again >> again", "gpus": 0})
        rec = engine.view("gate").record
        assert rec.state == JobState.RUNNING and rec.attempt == 1
        assert engine._book.names.count("gate") == 1 and engine._book.order.count("gate") == 1
        (tmp_path / "release").touch()
        await until(lambda: engine.view("gate").record.state == JobState.DONE, what="gate done")
        assert not (tmp_path / "again").exists()  # its edit is for a next attempt: none
        assert engine.view("gate").record.attempt == 1
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)
        run.cancel()
