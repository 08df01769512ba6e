"""A user's own ``[[diagnose]]`` pattern cannot freeze the scheduler.

Python's ``re`` backtracks: ``(a+)+b`` on a few thousand ``a``s runs for ages, holding the GIL,
so neither the event loop nor a thread can stop it. User patterns therefore see lines cut to
USER_LINE_MAX characters and run in a worker process killed at a deadline; a rule that runs
over is switched off for this scheduler with a warning that names it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from gtui.core.diagnosis.diagnose import USER_LINE_MAX, diagnose
from gtui.core.diagnosis.rulematch import PatternWorker
from gtui.core.model import DiagnosisRule
from tests.conftest import gtui, write_queue

SLOW = DiagnosisRule(kind="regex bomb", hint="never", pattern="(a+)+b")
MINE = DiagnosisRule(kind="mine", hint="my own", pattern=r"MARKER-\d+")


def test_a_catastrophic_pattern_is_stopped_at_the_deadline_and_named() -> None:
    worker = PatternWorker(deadline=1.0)
    try:
        off: list[DiagnosisRule] = []
        t0 = time.monotonic()
        d = diagnose(
            1,
            None,
            "a" * 50_000 + "\nMARKER-7\n",
            rules=(SLOW, MINE),
            matcher=worker.search,
            on_overrun=off.append,
        )
        took = time.monotonic() - t0
        assert off == [SLOW]
        # The next rule still ran (in a fresh worker), and decided.
        assert d is not None and d.kind == "mine" and d.line == "MARKER-7"
        # Bounded: the deadline plus a worker's start, with room for a loaded machine.
        assert took < 20, took
    finally:
        worker.close()


def test_the_worker_answers_like_re_for_benign_patterns() -> None:
    worker = PatternWorker(deadline=5.0)
    try:
        d = diagnose(1, None, "x\nMARKER-1 here\ny\n", rules=(MINE,), matcher=worker.search)
        assert d is not None and d.kind == "mine" and d.line == "MARKER-1 here"
        # Same worker again (it stays up between diagnoses): no match, the defaults decide.
        d = diagnose(1, None, "Traceback\nValueError: nope\n", rules=(MINE,), matcher=worker.search)
        assert d is not None and d.kind == "python_exception"
    finally:
        worker.close()


def test_user_patterns_see_lines_cut_to_the_cap() -> None:
    """A match that starts past the cap is not seen; the defaults keep reading the whole line."""
    late = "x" * (USER_LINE_MAX + 10) + "MARKER-9"
    d = diagnose(1, None, late + "\n", rules=(MINE,))
    assert d is not None and d.kind != "mine", d
    early = "MARKER-9 " + "x" * 50_000
    d = diagnose(1, None, early + "\n", rules=(MINE,))
    assert d is not None and d.kind == "mine", d


def test_gtui_run_finishes_with_a_regex_bomb_rule_and_names_it(tmp_path: Path) -> None:
    """The real command line: two failing jobs print a 50 KB line of ``a``s. The run ends,
    both get a diagnosis, and the warning naming the rule is given once: the job diagnosed
    first switched it off, so the other's diagnosis did not run it (jobs end one at a time
    in the engine's loop)."""
    q = write_queue(
        tmp_path,
        """
        [[diagnose]]
        kind = "regex bomb"
        pattern = "(a+)+b"
        hint = "never"

        [[jobs]]
        name = "first"
        gpus = 0
        cmd = "python3 -c \\"print('a' * 50000)\\"; exit 3"

        [[jobs]]
        name = "second"
        gpus = 0
        cmd = "python3 -c \\"print('a' * 50000)\\"; exit 4"
        """,
    )
    t0 = time.monotonic()
    out = gtui("run", str(q), "--fake-gpus", "1x80G", timeout=180)
    took = time.monotonic() - t0
    text = out.stdout + out.stderr
    assert out.returncode == 1, text
    warnings = [ln for ln in text.splitlines() if "warning:" in ln and "regex bomb" in ln]
    assert len(warnings) == 1, text
    assert "(a+)+b" in warnings[0] and "switched off" in warnings[0], warnings
    status = json.loads(gtui("status", "--json", str(q)).stdout)
    jobs = {j["name"]: j for j in status["jobs"]}
    assert jobs["first"]["state"] == "failed" and jobs["second"]["state"] == "failed", jobs
    for name in ("first", "second"):
        assert jobs[name]["diagnosis"] is not None, jobs[name]
        assert jobs[name]["diagnosis"]["kind"] != "regex bomb", jobs[name]
    assert took < 170, took
