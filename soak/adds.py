"""Parallel adds at scale: tests/reliability/adds.py's ``burst``, round after round, half of
them with the scheduler SIGKILLed several times during the burst."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from tests.reliability.adds import burst, clean

# SIGKILLs of the scheduler in a killed round (the bug report that led to this soak saw 7 to 15)
KILLS = 7


def run_adds(rounds: int, *, adders: int = 10, per_adder: int = 15) -> dict[str, Any]:
    """``rounds`` rounds of ``adders`` processes adding ``per_adder`` jobs each; every odd
    round kills the scheduler during the burst. The figures, and the failures in full."""
    t0 = time.monotonic()
    failed: list[dict[str, Any]] = []
    kills = adds = refused = 0
    with tempfile.TemporaryDirectory(prefix="gtui-soak-adds-") as tmp:
        for r in range(rounds):
            where = Path(tmp) / f"round{r}"
            where.mkdir()
            try:
                b = burst(
                    where, r, adders=adders, per_adder=per_adder, kills=KILLS * (r % 2), seed=r
                )
            finally:
                clean(where)
            kills += b.kills
            adds += len(b.added)
            refused += sum(1 for rc in b.added.values() if rc != 0)
            if b.problems:
                failed.append({"round": r, "kills": b.kills, "problems": b.problems})
    return {
        "rounds": rounds,
        "failures": len(failed),
        "adds": adds,
        "adds_failed_loudly": refused,
        "sigkills_landed": kills,
        "seconds": round(time.monotonic() - t0, 1),
        "failed": failed,
    }
