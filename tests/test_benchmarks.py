"""The benchmark suite runs and writes its table (CI runs the whole ``--quick`` suite through
scripts/check; this checks the machinery on its fastest benchmark). No timing is asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


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


def test_unknown_benchmark_is_refused(tmp_path: Path) -> None:
    proc = run_suite("--only", "nosuch", "--out", str(tmp_path / "B.md"))
    assert proc.returncode == 2
    assert "unknown benchmark nosuch" in proc.stderr
    assert not (tmp_path / "B.md").exists()
