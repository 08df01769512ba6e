"""Progress read from a job's log: real tqdm output, Lightning's and Hugging Face's
bars as tests/progress_logs/make.py writes them with the real tqdm, and the job's own line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gtui.core.progress import TAIL_BYTES, parse_progress, read_progress
from tests.conftest import TESTS

LOGS = TESTS / "progress_logs"


def _file_reader(path: Path):  # type: ignore[no-untyped-def]
    def read(offset: int, limit: int) -> bytes:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read(limit)

    return read


def _progress_of(path: Path):  # type: ignore[no-untyped-def]
    return read_progress(_file_reader(path), path.stat().st_size)


def test_plain_tqdm_bar_with_carriage_returns() -> None:
    p = _progress_of(LOGS / "plain.log")
    assert p is not None
    assert p.source == "tqdm" and p.text == "450/1000"
    assert p.fraction == pytest.approx(0.45)


def test_lightning_epoch_bar_counts_the_epochs_and_skips_validation() -> None:
    p = _progress_of(LOGS / "lightning.log")
    assert p is not None and p.source == "lightning"
    # Epoch index 3 of 0..9, 176 of its 391 batches.
    assert p.fraction == pytest.approx((3 + 176 / 391) / 10)
    assert p.text == "epoch 3/9 · 176/391"


def test_huggingface_trainer_bar_outlasts_its_evaluation_bar() -> None:
    p = _progress_of(LOGS / "huggingface.log")
    assert p is not None and p.fraction == pytest.approx(0.45)


def test_epoch_line_then_a_bar_per_epoch() -> None:
    p = _progress_of(LOGS / "epochs.log")
    assert p is not None and p.source == "epoch"
    assert p.fraction == pytest.approx((2 + 0.5) / 10)


def test_the_jobs_own_line_wins_over_any_bar() -> None:
    text = "  10%|#         | 10/100 [00:01<00:09]\ngtui:progress 0.42\n 20%|##  | 20/100\r"
    p = parse_progress(text)
    assert p is not None and p.source == "gtui" and p.fraction == pytest.approx(0.42)
    assert parse_progress("gtui:progress 73%\n").fraction == pytest.approx(0.73)  # type: ignore[union-attr]
    assert parse_progress("gtui:progress 150\n").fraction == 1.0  # type: ignore[union-attr]


def test_no_progress_at_all() -> None:
    assert parse_progress("loading data\nstep 3 loss 0.2\n") is None
    assert parse_progress("") is None
    # A bar with an unknown total says nothing about the whole.
    assert parse_progress("120it [00:03, 39.2it/s]\r") is None
    assert read_progress(lambda o, n: b"", 0) is None


def test_unit_scaled_counts_and_tqdm_remaining_time() -> None:
    p = parse_progress("train: 12%|#2        | 1.2k/10.0k [01:00<07:20, 20.0it/s]")
    assert p is not None and p.fraction == pytest.approx(0.12)
    assert p.remaining_s == 440


def test_only_the_tail_is_read_by_byte_offset(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    with log.open("w") as f:
        f.write("gtui:progress 0.10\n")  # far above the tail: not seen
        for _ in range(2000):
            f.write("noise line " * 5 + "\n")
        f.write(" 60%|######    | 60/100 [00:06<00:04]\r")
    seen: list[tuple[int, int]] = []
    read = _file_reader(log)

    def spy(offset: int, limit: int) -> bytes:
        seen.append((offset, limit))
        return read(offset, limit)

    p = read_progress(spy, log.stat().st_size)
    assert p is not None and p.fraction == pytest.approx(0.6)
    assert seen == [(log.stat().st_size - TAIL_BYTES, TAIL_BYTES)]


def test_a_real_tqdm_process_writing_its_log(tmp_path: Path) -> None:
    """A real process, tqdm on its stderr into the log as a job's would be."""
    pytest.importorskip("tqdm")
    log = tmp_path / "job.log"
    code = (
        "import sys\nfrom tqdm import tqdm\n"
        "for _ in tqdm(range(300), total=1200, mininterval=0): pass\n"
    )
    with log.open("wb") as f:
        subprocess.run([sys.executable, "-c", code], stdout=f, stderr=f, check=True, timeout=60)
    p = _progress_of(log)
    assert p is not None and p.source == "tqdm"
    assert p.fraction == pytest.approx(0.25)


@pytest.mark.parametrize("name", ["keras3", "keras2"])
def test_keras_bar_after_its_epoch_line(name: str) -> None:
    """Keras 3 (``━`` cells, backspaces and ANSI on a terminal) and Keras 2 (``[===>...]``,
    one line per update into a file): epoch 3 of 10 (from 1), 120 of its 500 steps."""
    p = _progress_of(LOGS / f"{name}.log")
    assert p is not None and p.source == "epoch"
    assert p.fraction == pytest.approx((2 + 120 / 500) / 10)
    assert p.text == "epoch 3/10 · 120/500"
