"""The scan for what ended jobs left running is paced by its own cost (sched/leftovers.py):
cheap scans keep the short batch, a costly one spaces the next so that scanning never takes
more than a small share of a core, and no job's end waits past the cap."""

from __future__ import annotations

import pytest

from gtui.core.sched.leftovers import (
    LEFTOVER_BATCH_S,
    SCAN_SHARE,
    SCAN_WAIT_MAX_S,
    next_wait,
)


def test_a_cheap_scan_keeps_the_short_batch() -> None:
    assert next_wait(0.0) == LEFTOVER_BATCH_S
    assert next_wait(0.0005) == LEFTOVER_BATCH_S


def test_a_costly_scan_spaces_the_next_one_to_its_share_of_a_core() -> None:
    spent = 0.01  # 10 ms of CPU: a machine with thousands of processes
    wait = next_wait(spent)
    assert wait > LEFTOVER_BATCH_S
    assert spent / (spent + wait) == pytest.approx(SCAN_SHARE)


def test_no_end_waits_past_the_cap() -> None:
    assert next_wait(10.0) == SCAN_WAIT_MAX_S
