"""One dashboard edit (``e`` on a job: ``update_job``) of a 10,000-job queue file, beside one
parse of it (an edit used to parse the file twice).

Two layouts: 10,000 ``[[jobs]]`` tables, and one inline array ``jobs = [{...}, ...]`` with a
comment on every element. An edit checks the file as it is, edits, checks the new text and
writes it: the check of the file as it is reuses the last parse when the text is the one the
previous edit wrote and the same reader is handed to both (the scheduler hands its queue
source's to the dashboard's successive edits), so a warm edit costs one parse plus the text
work. Printed: median of 5 of a load, a cold edit (a reader of its own) and a warm one.

    python -m benchmarks.queue_edit
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from gtui.core.queue import writeback
from gtui.core.queue.queuefile import QueueReader, load_queue

N = 10_000


def tables(n: int = N) -> str:
    return "".join(
        f'# job {i}\n[[jobs]]\nname = "j{i}"\ncmd = "echo {i}"\ngpus = 0\n\n' for i in range(n)
    )


def inline(n: int = N) -> str:
    rows = "".join(
        f'  {{ name = "j{i}", cmd = "echo {i}", gpus = 0 }},  # job {i}\n' for i in range(n)
    )
    return "jobs = [\n" + rows + "]\n"


def _ms(fn: Callable[[], object], before: Callable[[], object] = lambda: None) -> float:
    times = []
    for _ in range(5):
        before()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def _edit(p: Path, counter: Iterator[int], reader: QueueReader | None = None) -> None:
    writeback.update_job(p, "j5000", {"priority": next(counter)}, reader=reader)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for label, text in (("[[jobs]] tables", tables()), ("inline array", inline())):
            p = Path(tmp) / "q.toml"
            p.write_text(text)
            counter = iter(range(1, 100))
            load = _ms(lambda p=p: load_queue(p))
            cold = _ms(lambda p=p, c=counter: _edit(p, c))  # a reader of its own: nothing kept
            reader = QueueReader()  # the scheduler's queue source's, kept from edit to edit
            warm = _ms(lambda p=p, c=counter, r=reader: _edit(p, c, r))
            print(
                f"{label:16} one load {load:5.0f} ms   edit, cold {cold:5.0f} ms   "
                f"edit, warm {warm:5.0f} ms"
            )


if __name__ == "__main__":
    main()
