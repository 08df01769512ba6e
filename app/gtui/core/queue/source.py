"""The queue source: the queue file as the scheduler takes it, one complete, valid version at a
time.

Nothing the file does can delete a record or stop the scheduler: a missing, empty, unreadable
or broken file is said once (per distinct problem) and ignored, and the last good queue runs
on. A file still being written is looked at again once it had time to settle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from gtui.core.bus import EventBus
from gtui.core.errors import GtuiError
from gtui.core.queue.ondisk import check_trusted, read_queue_text
from gtui.core.queue.queuewatch import (
    SETTLE_S,
    Empty,
    Missing,
    QueueWatch,
    Settling,
    Unchanged,
    Unreadable,
)
from gtui.core.queue.reader import QueueReader
from gtui.core.queue.schema import QueueFile

Pool = Callable[[], "list[int | None] | None"]  # the GPUs' total memory, for the pool checks
# (text the scheduler runs, new text) -> something the caller took in, or None: load it all
Quick = Callable[[str, str], object | None]


class QueueSource:
    """The queue file the scheduler runs: its loads, through the source's own reader, whose
    cache of the last parse serves the second load of the same text (the start's, and the
    reload after an edit the scheduler wrote itself)."""

    def __init__(self, path: Path, bus: EventBus, pool: Pool) -> None:
        self.path = path
        self.reader = QueueReader()  # the last text's parse and expansion, for a second load
        self._bus = bus
        self._pool = pool
        self._watch = QueueWatch(path)
        self.error: str | None = None  # what is wrong with the file now (said once) ...
        self.problem: str | None = None  # ... and how it was said
        self._recheck: asyncio.TimerHandle | None = None
        self._text: str | None = None  # the text the scheduler runs (for a quick edit)
        # The same text, once known to hold [[jobs]] tables: the text itself, not a flag, so
        # that a reader in another thread (the add's worker) cannot pair a flag with a newer text.
        self._tables: str | None = None

    def first(self, pool: list[int | None] | None = None) -> tuple[QueueFile, str]:
        """The first read, at start: a broken file is an error here (nothing runs yet).
        Returns the queue and the text it was read from."""
        check_trusted(self.path)  # no one else may make gtui run a command
        text = read_queue_text(self.path)
        return self.reader.load(self.path, pool=pool, text=text), text

    def forget(self) -> None:
        """Drop the reader's last parse: the start's two loads are done, and kept, a
        100,000-job file's parse holds ~120 MB."""
        self.reader.forget()

    def taken(self, text: str, digest: bytes | None = None, *, tables: bool = False) -> None:
        """``text`` is the version the scheduler runs now; ``digest``: its bytes' digest on
        disk, when the caller has it (hashing a 9 MB file is ~15 ms of the loop). ``tables``:
        the caller knows the text holds its jobs as [[jobs]] tables (a fast append)."""
        self._text = text
        self._tables = text if tables else None
        self._watch.taken(digest if digest is not None else self._watch.digest_of(text))

    def moved(self) -> bool:
        """Whether the file's stat changed since the last look (see QueueWatch.moved)."""
        return self._watch.moved()

    def runs(self, text: str) -> bool:
        """Whether ``text`` is the version the scheduler runs (no edit waits to be taken).

        Compared with the text itself, not the watch's digest: a save the scheduler refused
        (a broken file) has its digest taken, so that it is not read again until it changes,
        but it is not what runs. A string compare is also ~1 ms at 100,000 jobs where the
        digest was an encode and a hash (~25 ms)."""
        return self._text is not None and text == self._text

    def holds_tables(self, text: str) -> bool | None:
        """True when ``text`` is the running text and it is known to hold its jobs as
        [[jobs]] tables (no inline array); None when not known (search it)."""
        return True if self._tables is not None and text == self._tables else None

    def check(
        self,
        *,
        force: bool = False,
        on_settled: Callable[[], None],
        quick: Quick | None = None,
    ) -> object | None:
        """A new version of the queue file, if there is one that is complete and valid.
        ``on_settled`` is called later if the file is still being written now. ``quick`` is
        asked first with the text the scheduler runs and the new one: what it returns (not
        None) means it took the change in itself (one job edited), and is returned as is;
        otherwise the whole file is loaded and a QueueFile returned."""
        change = self._watch.check(force=force)
        if isinstance(change, Unchanged):
            return None
        if isinstance(change, Settling):
            self._recheck_soon(on_settled)
            return None
        if isinstance(change, Missing):
            self._say_once(
                "missing",
                f"{self.path} is gone; gtui keeps running the last good version of the "
                "queue (save the file again to change it)",
            )
            return None
        if isinstance(change, Empty):
            self._say_once(
                "empty",
                f"{self.path.name} is empty: ignored, the last good version of the queue "
                "runs on and no job's record is touched (a program writing the file may not be "
                "done; save it again to change the queue)",
            )
            return None
        if isinstance(change, Unreadable):
            self._say_once(str(change.error), f"queue file ignored: {change.error}")
            return None
        try:
            check_trusted(self.path)
            took: object | None = None
            if quick is not None and self._text is not None:
                took = quick(self._text, change.text)
            if took is None:
                took = self.reader.load(self.path, pool=self._pool(), text=change.text)
                self.reader.forget()  # the next change is another text: the parse cannot serve it
        except GtuiError as e:
            self._watch.taken(change.digest)  # judged: not read again until it changes
            self._say_once(str(e), f"queue file not reloaded, last good version kept: {e}")
            return None
        self._watch.taken(change.digest)
        self._text = change.text
        self._tables = None
        self.error = None
        return took

    def _say_once(self, key: str, text: str) -> None:
        """Tell the user what is wrong with the queue file, once per distinct problem."""
        self.problem = text
        if self.error != key:
            self.error = key
            self._bus.notice("error", text)

    def _recheck_soon(self, on_settled: Callable[[], None]) -> None:
        if self._recheck is not None:
            return

        def again() -> None:
            self._recheck = None
            on_settled()

        self._recheck = asyncio.get_running_loop().call_later(SETTLE_S, again)

    def close(self) -> None:
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None
