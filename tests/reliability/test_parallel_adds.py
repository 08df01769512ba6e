"""Adds from several shells (a sweep launcher's ``xargs -P``, two terminals) into one running
scheduler: one job name, one record, one run, whatever the interleaving, and a SIGKILLed
scheduler in the middle changes none of it (tests/reliability/adds.py does the rounds and the
counting). ``GTUI_ADDS_ROUNDS`` runs more rounds; the soak (``python -m soak --only adds``) runs
many more, with kills."""

from __future__ import annotations

import os
from pathlib import Path

from tests.reliability.adds import burst, clean

ROUNDS = int(os.environ.get("GTUI_ADDS_ROUNDS", "1"))


def _rounds(tmp_path: Path, rounds: int, **kw: int) -> list[str]:
    problems: list[str] = []
    for r in range(rounds):
        where = tmp_path / f"round{r}"
        where.mkdir()
        try:
            problems += [f"round {r}: {p}" for p in burst(where, r, **kw).problems]
        finally:
            clean(where)
    return problems


def test_ten_shells_adding_at_once_run_every_job_exactly_once(tmp_path: Path) -> None:
    problems = _rounds(tmp_path, ROUNDS, adders=10, per_adder=15)
    assert not problems, "\n".join(problems)


def test_adds_through_a_sigkilled_scheduler_land_once_or_fail_loudly(tmp_path: Path) -> None:
    problems = _rounds(tmp_path, 1, adders=10, per_adder=10, kills=2)
    assert not problems, "\n".join(problems)
