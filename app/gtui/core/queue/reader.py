"""Loading a queue file: read (:mod:`gtui.core.queue.parse`), checked
(:mod:`gtui.core.queue.document`), with the last text's parse and expansion kept by whoever
loads it again.

``gtui validate`` and the scheduler's start load the same text twice (the second time against
the GPUs the first load's settings named), and an edit checks the file, then works on the same
parse: a :class:`QueueReader` keeps the last text's parse and expansion for that second use. It
is an object its owner holds (the queue source, one edit, one command), not module state: what
it keeps goes when its owner does, or at :meth:`QueueReader.forget`.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gtui.core.errors import QueueFileError
from gtui.core.model import Settings
from gtui.core.queue.document import Expansion, check_document, expand_jobs
from gtui.core.queue.ondisk import read_queue_text
from gtui.core.queue.parse import TOO_DEEP, Document, read_document
from gtui.core.queue.schema import QueueFile
from gtui.core.queue.where import Where


class QueueReader:
    """Reads and checks queue files, keeping the last text's parse and expansion.

    For 10,000 jobs the scan and parse are most of a load, the expansion 0.35 s of it
    (benchmarks/validate.py); a second load of the same text reuses both and only checks the
    jobs against the GPUs again. Nothing downstream mutates what is kept. A 100,000-job file's
    parse holds ~120 MB: an owner that keeps its reader drops it (:meth:`forget`) once the
    second load is done."""

    __slots__ = ("_expanded", "_parsed")

    def __init__(self) -> None:
        self._parsed: tuple[str, str, Document] | None = None
        self._expanded: tuple[str, str, Settings, Expansion] | None = None

    def parse(self, shown: str, text: str) -> Document:
        """``text`` read (:func:`read_document`), or the last parse when it is the same text."""
        last = self._parsed
        if last is not None and last[0] == shown and last[1] == text:
            return last[2]
        doc = read_document(text, shown)
        self._parsed = (shown, text, doc)
        return doc

    def load(
        self,
        path: Path | str,
        *,
        pool: Sequence[int | None] | None = None,
        text: str | None = None,
        machine: Mapping[int, int | None] | None = None,
    ) -> QueueFile:
        """Read, check and expand a queue file (see :func:`load_queue`)."""
        # A load makes some 100,000 objects that all live on (they hold no cycles): the garbage
        # collector's passes over them while they are made find nothing and cost ~10 % of a
        # 10,000-job load, so it waits until the load is done. Left off if it already was.
        enabled = gc.isenabled()
        gc.disable()
        try:
            shown = str(path)
            if text is None:
                text = read_queue_text(Path(path))
            doc = self.parse(shown, text)

            def expand(raw_jobs: list[Any], settings: Settings, jobs_where: Where) -> Expansion:
                last = self._expanded
                if last is not None and last[:3] == (shown, text, settings):
                    return last[3]
                done = expand_jobs(shown, doc.scan, raw_jobs, settings, jobs_where)
                self._expanded = (shown, text, settings, done)
                return done

            return check_document(path, doc, pool, machine, expand)
        except RecursionError:
            # tomllib reads nested arrays and tables recursively: a file nested some hundreds
            # of levels deep exhausts the stack before the depth check can see it.
            raise QueueFileError(str(path), TOO_DEEP) from None
        finally:
            if enabled:
                gc.enable()

    def forget(self) -> None:
        """Drop the last parse and expansion (the next text is another one, or none comes)."""
        self._parsed = None
        self._expanded = None


def load_queue(
    path: Path | str,
    *,
    pool: Sequence[int | None] | None = None,
    text: str | None = None,
    machine: Mapping[int, int | None] | None = None,
    reader: QueueReader | None = None,
) -> QueueFile:
    """Read, check and expand a queue file.

    ``pool``: the total memory (MiB, None = unknown) of each GPU of the usable pool, when known;
    or ``machine``: every GPU of the machine (index -> total MiB), from which the pool is worked
    out with ``settings.gpus`` / ``exclude`` (and listed GPUs that do not exist are an error).
    With neither, the checks against the GPUs are skipped. ``text`` is the file's content, when
    the caller has it already (write-back checks a new version before it reaches the disk).
    ``reader``: the caller's, when it loads the same text again (else a fresh one: no reuse).
    """
    own = reader if reader is not None else QueueReader()
    return own.load(path, pool=pool, text=text, machine=machine)
