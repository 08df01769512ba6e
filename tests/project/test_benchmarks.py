"""The benchmark suite runs and writes its table (CI runs the whole ``--quick`` suite beside the
tests, .ci/run; this checks the machinery on its fastest benchmark). No timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def run_suite(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_quick_run_writes_its_table(tmp_path: Path) -> None:
    out = tmp_path / "BENCHMARKS.md"
    proc = run_suite("--quick", "--only", "simulate", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = out.read_text()
    assert "| what | target | measured |" in text
    assert "## Machine" in text and "## Method and figures" in text
    assert "sample sweep (pack)" in text and "mixed workload" in text
    assert "best_fit" in text and "most_available" in text  # every figure, both rules
    assert "| what | target | measured |" in proc.stdout  # the table is printed too


def test_a_full_run_rewrites_the_page_the_docs_link_to() -> None:
    """Without --out the suite writes docs/benchmarks.md, the page README.md and docs/ link to
    for every figure, not a file beside them that nobody reads."""
    from benchmarks.__main__ import DEFAULT_OUT

    assert DEFAULT_OUT == REPO / "docs" / "benchmarks.md"
    assert DEFAULT_OUT.is_file()
    linked = (REPO / "README.md").read_text(encoding="utf-8")
    assert "](docs/benchmarks.md)" in linked


def test_unknown_benchmark_is_refused(tmp_path: Path) -> None:
    proc = run_suite("--only", "nosuch", "--out", str(tmp_path / "B.md"))
    assert proc.returncode == 2
    assert "unknown benchmark nosuch" in proc.stderr
    assert not (tmp_path / "B.md").exists()


def test_where_time_goes_sorts_samples_into_costs_and_leaves_idle_pool_threads_out(
    tmp_path: Path,
) -> None:
    """py-spy's raw lines ("stack count") go to the first category their stack names; a pool
    thread waiting for work is no cost of the scheduler's."""
    from benchmarks.where_time_goes import categorize

    raw = tmp_path / "raw.txt"
    raw.write_text(
        "main (app/cli.py:1);Runs._start_job (r.py:1);Popen._execute_child (s.py:1) 7\n"
        "main (app/cli.py:1);Runs._start_job (r.py:1);launch (runner.py:2);"
        "create_time_of (runner.py:9) 3\n"
        "main (app/cli.py:1);JobBook.commit (b.py:1);Store._write (store.py:3) 5\n"
        "main (app/cli.py:1);BaseEventLoop._run_once (a.py:1);EpollSelector.select (s.py:4) 4\n"
        "Thread.run (t.py:1);_worker (concurrent/futures/thread.py:81) 50\n"
        "main (app/cli.py:1);something_else (x.py:1) 1\n"
    )
    counts, total = categorize(raw)
    assert total == 20
    assert counts["fork + exec of the job's wrapper (subprocess.Popen)"] == 7
    assert counts["the new process's start time from /proc (waits out its exec)"] == 3
    assert counts["SQLite: records and attempts history committed"] == 5
    assert counts["waiting in the event loop (for the job, or a timer)"] == 4
    assert counts["other"] == 1


def test_floor_split_names_each_cause_and_puts_the_engine_back() -> None:
    """benchmarks/floor_split.py times a real chain's steps, and leaves no timer behind."""
    import subprocess as sp

    from benchmarks import floor_split
    from gtui.core.state.book import JobBook

    popen, commit = sp.Popen, JobBook.commit
    split = floor_split.split(12)
    assert sp.Popen is popen and JobBook.commit is commit
    for label in (
        "the wrapper: Popen (fork + exec, as the scheduler pays it)",
        "the start-time read from /proc",
        "the store: records committed",
        "the placement pass and the engine's bookkeeping",
        "the log file created (O_EXCL)",
        floor_split.WRAPPER_PROCS,
    ):
        assert split[label] > 0, label
    causes = sum(v for k, v in split.items() if k not in ("total", "floor", "wall"))
    assert causes <= split["total"] * 1.001
    assert split["floor"] > 0
