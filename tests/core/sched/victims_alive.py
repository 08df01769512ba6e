"""Run as a job's command by the preemption tests: print which of the pids in the file named
still live (a zombie has ended), as the preemptor starts."""

from __future__ import annotations

import sys
from pathlib import Path


def _lives(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


pids = [int(p) for p in Path(sys.argv[1]).read_text().split()]
print(f"urgent ran, alive: {[p for p in pids if _lives(p)]}")
