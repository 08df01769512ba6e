"""The log tailer on real files: windows by byte offset, tqdm and ANSI, bounded memory."""

from __future__ import annotations

import itertools
import tracemalloc
from pathlib import Path

from rich.text import Text

from gtui.ui.logtail import MAX_LINE, LogTail, clean_line


def write(path: Path, data: bytes) -> LogTail:
    path.write_bytes(data)
    return LogTail(path)


def texts(lines: list) -> list[str]:  # type: ignore[type-arg]
    return [line.text for line in lines]


def test_last_lines_with_and_without_a_final_newline(tmp_path: Path) -> None:
    t = write(tmp_path / "a.log", b"one\ntwo\nthree\n")
    assert texts(t.last_lines(2)) == ["two", "three"]
    assert texts(t.last_lines(10)) == ["one", "two", "three"]
    t = write(tmp_path / "b.log", b"one\ntwo\nthree (still writing)")
    assert texts(t.last_lines(2)) == ["two", "three (still writing)"]


def test_offsets_chain_forward_and_backward(tmp_path: Path) -> None:
    body = b"".join(f"line {i}\n".encode() for i in range(1000))
    t = write(tmp_path / "a.log", body)
    window = t.lines_from(0, 5)
    assert texts(window) == [f"line {i}" for i in range(5)]
    assert all(a.end == b.start for a, b in itertools.pairwise(window))
    middle = body.index(b"line 500\n")
    assert texts(t.lines_from(middle, 2)) == ["line 500", "line 501"]
    assert texts(t.lines_before(middle, 3)) == ["line 497", "line 498", "line 499"]
    assert t.line_start(middle + 3) == middle
    assert texts(t.lines_before(0, 3)) == []


def test_reads_backwards_across_block_boundaries(tmp_path: Path) -> None:
    lines = [("x" * (i % 300)) + f" {i}" for i in range(3000)]
    t = write(tmp_path / "a.log", ("\n".join(lines) + "\n").encode())
    assert texts(t.last_lines(700)) == lines[-700:]


def test_tqdm_carriage_returns_show_the_last_redraw() -> None:
    assert clean_line(" 10%|#   |\r 50%|##  |\r100%|####|\n") == "100%|####|"
    assert clean_line("epoch 1\r\n") == "epoch 1"
    assert clean_line("done\r") == "done"
    assert clean_line("\r\r") == ""


def test_ansi_colours_kept_cursor_moves_dropped() -> None:
    line = clean_line("\x1b[31mred\x1b[0m \x1b[2K\x1b[1Abar\x1b]0;title\x07\ttab")
    assert "\x1b[1A" not in line and "\x1b[2K" not in line and "title" not in line
    text = Text.from_ansi(line)
    text.expand_tabs(8)
    assert text.plain == "red bar tab"
    assert text.spans[0].style.color.number == 1 and text.spans[0].end == 3  # type: ignore[union-attr]


def test_a_line_longer_than_the_cap_is_cut_not_read_whole(tmp_path: Path) -> None:
    t = write(tmp_path / "a.log", b"start\n" + b"y" * (MAX_LINE * 5) + b"\nend\n")
    last = t.last_lines(2)
    assert MAX_LINE - 1 <= len(last[0].text) <= MAX_LINE and last[1].text == "end"
    ahead = t.lines_from(6, 3)  # the long line comes in pieces, and the window advances
    assert all(len(x.text) <= MAX_LINE for x in ahead)
    assert ahead[0].end > ahead[0].start


def test_a_missing_file_is_empty(tmp_path: Path) -> None:
    t = LogTail(tmp_path / "nope.log")
    assert t.size() == 0 and t.last_lines(5) == [] and t.lines_from(0, 5) == []


def test_a_1_gb_log_costs_no_more_memory_than_a_small_one(tmp_path: Path) -> None:
    """A sparse 1 GB file (no newline in its first GiB, then a tail of lines): the window reads
    a few pages, wherever it is, so memory stays bounded by the window, not the file."""
    big = tmp_path / "big.log"
    with big.open("wb") as f:
        f.truncate(1 << 30)
        f.seek(1 << 30)
        f.write(b"".join(f"epoch {i}\n".encode() for i in range(50)))
    t = LogTail(big)
    tracemalloc.start()
    try:
        tail = t.last_lines(40)
        head = t.lines_from(0, 40)  # NUL bytes with no newline: cut lines, never the whole GiB
        middle = t.lines_from(1 << 29, 40)
        before = t.lines_before(1 << 29, 40)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert texts(tail)[-1] == "epoch 49"
    assert len(head) == 40 and len(middle) == 40 and len(before) == 40
    # 40 lines x 8 KiB each at most, plus overhead: far below the file's 1 GiB.
    assert peak < 4 * 1024 * 1024, peak
