"""``gtui log`` / ``gtui follow`` to a terminal on a log whose last line never ends: a tqdm bar
written to a file (carriage returns only, no newline) and a line with neither (dots).

    python -m benchmarks.log_lines [--quick]

The terminal printer (``gtui.commands._logs``) gets the file in the 64 KiB reads ``gtui log``
makes. Target: linear, 10 times the log takes about 10 times as long (a ratio, so the machine's
speed cancels out; under 30 on a loaded machine, where quadratic is 100). Before the printer
kept a line's parts apart, 2 MB took 1.2 s and 20 MB 94 s (a ratio of 78).
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory

from benchmarks.common import Row, Section
from gtui.commands._logs import LogPrinter
from gtui.commands.log import print_log

MB = 1024 * 1024
BAR = b"\r 42%|####      | 420/1000 [00:10<00:14, 41.2it/s]"
LIMIT = 30.0  # 10 times the log: linear is 10, quadratic 100; the rest is a loaded machine


def _log(path: Path, size: int, kind: str) -> None:
    unit = BAR if kind == "bar" else b"."
    path.write_bytes((unit * (size // len(unit) + 1))[:size])


def _seconds(path: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        out = io.StringIO()
        t0 = time.perf_counter()
        print_log(path, None, LogPrinter(out, terminal=True))
        times.append(time.perf_counter() - t0)
    return min(times)  # the least disturbed run: the other users of the machine only add


def run(quick: bool) -> Section:
    small, big = (1 * MB, 10 * MB) if quick else (2 * MB, 20 * MB)
    repeat = 5
    rows: list[Row] = []
    figures: dict[str, float] = {}
    with TemporaryDirectory() as tmp:
        for kind, what in (("bar", "a tqdm bar (\\r only)"), ("dots", "no \\r, no newline")):
            path = Path(tmp) / f"{kind}.log"
            _log(path, small, kind)
            t_small = _seconds(path, repeat)
            _log(path, big, kind)
            t_big = _seconds(path, repeat)
            ratio = t_big / t_small if t_small else float("nan")
            figures[f"{kind}_{small // MB}MB_s"] = t_small
            figures[f"{kind}_{big // MB}MB_s"] = t_big
            figures[f"{kind}_ratio"] = ratio
            rows.append(
                Row(
                    f"gtui log to a terminal, one unended line, {what}: "
                    f"{big // MB} MB vs {small // MB} MB",
                    f"ratio < {LIMIT:.0f} (linear: 10)",
                    f"{ratio:.1f} ({t_small:.3f} s, {t_big:.3f} s)",
                    "before: 2 MB 1.2 s, 20 MB 94 s (ratio 78)",
                    ratio < LIMIT,
                )
            )
    return Section(
        title="A log's endless last line, to a terminal",
        method=(
            "A file of one line that never ends, printed through gtui log's terminal printer "
            f"in its 64 KiB reads into memory, the fastest of {repeat} runs at each size."
        ),
        rows=rows,
        figures=figures,
    )


if __name__ == "__main__":
    section = run("--quick" in sys.argv)
    for row in section.rows:
        print(f"{row.what}: {row.measured} (target {row.target})")
