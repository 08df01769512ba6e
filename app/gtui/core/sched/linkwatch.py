"""The scheduler's link watch: it reads the bytes a running job's log gained since its last
look, by byte offset (each byte once, never the whole log again), for the experiment-tracker
links in them (gtui.core.trackers), and keeps the first run link of each tracker on the job's
record: the detail view and ``gtui status --json`` show it while the job runs, and the
attempts history keeps it when the attempt ends (the record's links are its row's).

It follows the runner's ``LogGrew`` events on the bus; the runner awaits :meth:`at_end`
before it records an end, so a job that ends before any look still has its link read."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable

from gtui.core.api import JobChanged, LogGrew
from gtui.core.bus import EventBus
from gtui.core.exec.base import Executor, off_loop
from gtui.core.joblog import decode
from gtui.core.state.book import JobBook
from gtui.core.trackers import WORDS_BYTES, TrackerLink, links_in, run_links

CHUNK = 1 << 20  # bytes read per look at most
BEHIND_MAX = 8 * CHUNK  # further behind than this, the look skips to the last CHUNK
END_WAIT_S = 5.0  # the end of a job waits this long for its last look, then goes without
_LINE_END = re.compile(rb"[\r\n]")


def scan(
    read: Callable[[int, int], bytes], offset: int, size: int, *, final: bool = False
) -> tuple[int, list[TrackerLink]]:
    """The links in the log's bytes from ``offset`` (read through ``read(offset, limit)``) up
    to ``size``, at most :data:`CHUNK` of them, and where the next look starts: after the
    last whole line read (a line still being written is read again, whole, next time),
    unless ``final`` or a chunk holds no line end at all."""
    if size - offset > BEHIND_MAX:  # a log that gushes: its last chunk, from its first line end
        start = size - CHUNK
        data = read(start, CHUNK)
        m = _LINE_END.search(data)
        first = m.end() if m else len(data)
        offset, data = start + first, data[first:]
    else:
        data = read(offset, min(CHUNK, size - offset))
    end = offset + len(data)
    if not final:
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if cut >= 0:
            data = data[: cut + 1]
            end = offset + cut + 1
        elif len(data) < CHUNK:
            return offset, []  # one unfinished line: read it again when it is whole
    if not any(w in data for w in WORDS_BYTES):
        return end, []  # most of a log: not decoded, no line looked at
    return end, links_in(decode(data))


class LinkWatch:
    """Each running job's log, scanned as it grows, for tracker run links."""

    def __init__(self, book: JobBook, bus: EventBus, executor: Executor) -> None:
        self._book = book
        self._bus = bus
        self._executor = executor
        self._scanned: dict[str, tuple[str, int]] = {}  # job -> (its log, scanned up to)
        self._sizes: dict[str, int] = {}  # job -> its log's size as last told
        self._reading: set[str] = set()  # jobs whose log is being read now (one read each)

    def on_log_grew(self, event: LogGrew) -> None:
        """A running job's log grew (the runner's look, on the bus): read what is new, in a
        thread (a log on a stalled disk must not freeze the loop), one read per job at a
        time; a growth told meanwhile is read when that read is done."""
        self._sizes[event.name] = event.size
        self._look(event.name, event.path)

    def _look(self, name: str, log: str) -> None:
        rec = self._book.records.get(name)
        if rec is None or not rec.active or rec.log != log or name in self._reading:
            return
        size = self._sizes.get(name, 0)
        seen_log, offset = self._scanned.get(name, (log, 0))
        if seen_log != log:
            offset = 0
        if offset >= size:
            return
        read, attempt = self._reader(log), rec.attempt
        self._reading.add(name)
        fut = off_loop(lambda: scan(read, offset, size))
        fut.add_done_callback(lambda f: self._read(name, log, attempt, f))

    def _reader(self, log: str) -> Callable[[int, int], bytes]:
        executor = self._executor
        return lambda off, n: executor.read_log(log, off, n)

    def _read(
        self,
        name: str,
        log: str,
        attempt: int,
        fut: asyncio.Future[tuple[int, list[TrackerLink]]],
    ) -> None:
        self._reading.discard(name)
        if fut.cancelled() or fut.exception() is not None:
            return
        rec = self._book.records.get(name)
        if rec is None or not rec.active or rec.log != log or rec.attempt != attempt:
            return  # ended, or started again, meanwhile: its end read what was left
        offset, found = fut.result()
        self._scanned[name] = (log, offset)
        self._keep(name, found)
        if offset < self._sizes.get(name, 0):
            self._look(name, log)  # it grew meanwhile, or a gushing log's next chunk

    def _keep(self, name: str, found: list[TrackerLink]) -> None:
        """Keep the run links in ``found`` that its record has no link of that tracker for;
        saved and shown at once (a link found is rare: one commit per tracker per attempt)."""
        rec = self._book.records[name]
        kept = run_links(rec.links, found)
        if len(kept) == len(rec.links):
            return
        rec.links = kept
        self._book.commit(rec)
        self._bus.publish(JobChanged(self._book.view(name)))

    async def at_end(self, name: str) -> None:
        """The job's process ended: read what its log gained since the last look (a short job
        may end before any), so its links are on the record its end commits. Given up after
        :data:`END_WAIT_S` (the end is recorded with the links found so far)."""
        rec = self._book.records.get(name)
        seen = self._scanned.pop(name, None)
        self._sizes.pop(name, None)
        if rec is None or not rec.log:
            return
        log, executor = rec.log, self._executor
        offset = seen[1] if seen is not None and seen[0] == log else 0
        read = self._reader(log)

        def last_look() -> list[TrackerLink]:
            size = executor.log_size(log) or 0
            return scan(read, offset, size, final=True)[1] if size > offset else []

        with contextlib.suppress(Exception):
            found = await asyncio.wait_for(off_loop(last_look), END_WAIT_S)
            if self._book.records.get(name) is rec:
                self._keep(name, found)

    def forget(self, name: str) -> None:
        """A run ended without :meth:`at_end` (a start put off, an end found at a restart)."""
        self._scanned.pop(name, None)
        self._sizes.pop(name, None)
