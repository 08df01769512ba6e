"""The queue source alone: a real queue file, an event bus, no Engine.

A broken save is said once and the last good version kept; the fixed file is taken again; a
file still being written is looked at again once it had time to settle.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from gtui.core.api import Event, Notice
from gtui.core.bus import EventBus
from gtui.core.queue.queuefile import QueueFile
from gtui.core.queue.queuewatch import SETTLE_S
from gtui.core.queue.source import QueueSource
from tests.conftest import write_queue

GOOD = """\
[[jobs]]
name = "a"
gpus = 0
cmd = "true"
"""
MORE = """\
[[jobs]]
name = "b"
gpus = 0
cmd = "true"
"""
FIXED = GOOD + MORE
BROKEN = GOOD + "\n[[jobs]\nname = \n"


def make(tmp_path: Path) -> tuple[QueueSource, list[Notice], Path]:
    """A source over a good queue file, taken as the version that runs."""
    path = write_queue(tmp_path, GOOD)
    said: list[Notice] = []

    def sink(event: Event) -> None:
        assert isinstance(event, Notice)
        said.append(event)

    bus = EventBus()
    bus.subscribe(sink, (Notice,))
    source = QueueSource(path, bus, pool=lambda: None)
    queue, text = source.first()
    assert [j.name for j in queue.jobs] == ["a"]
    source.taken(text)
    return source, said, path


def never() -> None:
    raise AssertionError("no recheck expected")


def test_a_broken_save_is_said_once_and_the_last_good_version_kept(tmp_path: Path) -> None:
    source, said, path = make(tmp_path)
    assert source.check(force=True, on_settled=never) is None  # nothing new
    path.write_text(BROKEN)
    assert source.check(force=True, on_settled=never) is None
    assert len(said) == 1 and said[0].level == "error"
    assert "last good version kept" in said[0].text
    assert source.error is not None and source.problem == said[0].text
    # Looked at again (the same broken bytes, or a save of them): not said a second time.
    assert source.check(force=True, on_settled=never) is None
    path.write_text(BROKEN)
    assert source.check(force=True, on_settled=never) is None
    assert len(said) == 1
    # The text the scheduler runs is still the good one: a quick edit is compared with it.
    olds: list[str] = []

    def quick(old: str, new: str) -> object | None:
        olds.append(old)
        return None  # load it all

    path.write_text(FIXED)
    took = source.check(force=True, on_settled=never, quick=quick)
    assert olds == [GOOD]
    # The reload after the fix: the whole new queue, and the error is over.
    assert isinstance(took, QueueFile)
    assert [j.name for j in took.jobs] == ["a", "b"]
    assert source.error is None
    assert source.runs(FIXED)
    # The same problem again, after a fix, is said again.
    path.write_text(BROKEN)
    assert source.check(force=True, on_settled=never) is None
    assert len(said) == 2


def test_an_empty_or_missing_file_keeps_the_queue(tmp_path: Path) -> None:
    source, said, path = make(tmp_path)
    path.write_text("   \n")
    assert source.check(force=True, on_settled=never) is None
    path.unlink()
    assert source.check(force=True, on_settled=never) is None
    assert source.check(force=True, on_settled=never) is None
    assert [n.text.split(" ")[0] for n in said] == ["q.toml", str(path)]
    assert "is empty" in said[0].text and "is gone" in said[1].text


async def test_a_file_being_written_is_looked_at_again_once_settled(tmp_path: Path) -> None:
    source, said, path = make(tmp_path)
    path.write_text(FIXED)
    settled = asyncio.Event()
    assert source.check(on_settled=settled.set) is None  # first seen: not yet taken
    assert source.check(on_settled=settled.set) is None  # one recheck is armed, not two
    await asyncio.wait_for(settled.wait(), 5 * SETTLE_S + 5)
    took = source.check(on_settled=never)
    assert isinstance(took, QueueFile)
    assert [j.name for j in took.jobs] == ["a", "b"]
    assert said == []
    source.close()
