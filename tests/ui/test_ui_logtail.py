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


# -- long tqdm lines: only the latest redraw, never stale fragments ---------------------------


def _tqdm_run(n: int, *, width: int = 80) -> tuple[bytes, str]:
    """``n`` tqdm-like redraws on one line (``\\r`` before each, as tqdm writes to a file), and
    the last one as a terminal shows it."""
    states = [
        f"{i * 100 // (n - 1):3d}%|{'#' * (i * 40 // (n - 1)):<40}| {i}/{n - 1} [it/s]"
        for i in range(n)
    ]
    return b"".join(b"\r" + s.encode() for s in states), states[-1]


def test_a_64_kb_run_of_carriage_return_redraws_shows_only_the_last_one(tmp_path: Path) -> None:
    run, last = _tqdm_run(1100)
    assert len(run) > 64 * 1024 > MAX_LINE
    t = write(tmp_path / "a.log", b"epoch 1\n" + run + b"\nepoch 2\n" + run)
    # Following: the bar still being redrawn (no newline yet) and the finished one above.
    assert texts(t.last_lines(10)) == ["epoch 1", last, "epoch 2", last]
    assert texts(t.last_lines(1)) == [last]
    # Scrolling: the same lines from the top, and up from the end.
    assert texts(t.lines_from(0, 10)) == ["epoch 1", last, "epoch 2", last]
    second = t.last_lines(2)[0]
    assert texts(t.lines_before(second.start, 10)) == ["epoch 1", last]
    # The offsets chain: the window advances over each long line in one step.
    window = t.lines_from(0, 4)
    assert all(a.end == b.start for a, b in itertools.pairwise(window))
    assert window[-1].end == t.size()


def test_a_redrawn_line_longer_than_the_cap_shows_pieces_of_its_last_redraw_only(
    tmp_path: Path,
) -> None:
    """A last redraw longer than max_line comes in pieces, and none of them is older output."""
    stale = b"\r" + b"old " * 5000  # 20 KB of a redraw that was overwritten
    final = b"".join(f"[{i:05d}]".encode() for i in range(3000))  # 21 KB shown
    t = write(tmp_path / "a.log", b"top\n" + stale + b"\r" + final + b"\nend\n")
    shown = texts(t.last_lines(10))
    assert shown[0] == "top" and shown[-1] == "end"
    assert "".join(shown[1:-1]) == final.decode()
    assert not any("old" in s for s in shown)
    ahead = texts(t.lines_from(0, 10))
    assert ahead == shown  # forward, the same pieces


def test_a_line_without_newline_beyond_the_scan_shows_its_end_and_nothing_stale(
    tmp_path: Path,
) -> None:
    from gtui.core import joblog

    run, last = _tqdm_run(200)
    t = write(tmp_path / "a.log", b"before\n" + run * 40)  # ~0.5 MB, no newline
    old = joblog.LINE_SCAN
    joblog.LINE_SCAN = 64 * 1024  # the line is longer than the scan (the reader is joblog's)
    try:
        assert texts(t.last_lines(5)) == [last]  # not "before", not an older redraw
    finally:
        joblog.LINE_SCAN = old
    assert texts(t.last_lines(5)) == ["before", last]


# -- search ------------------------------------------------------------------------------------


def test_search_finds_forward_and_backward_from_a_position(tmp_path: Path) -> None:
    from gtui.ui.logtail import SearchQuery

    body = b"".join(f"step {i} loss {i / 10:.1f}\n".encode() for i in range(5000))
    body = body.replace(b"step 1234 ", b"step 1234 \x1b[31mNaN\x1b[0m detected ")
    body = body.replace(b"step 4321 ", b"step 4321 nan again ")
    t = write(tmp_path / "a.log", body)
    q = SearchQuery("nan")  # lower case: any case
    first = t.search(q, 0, chunk=4096)
    assert first is not None and first.text.startswith("step 1234")
    assert body[first.start : first.end].startswith(b"step 1234")
    second = t.search(q, first.end, chunk=4096)
    assert second is not None and second.text.startswith("step 4321")
    assert t.search(q, second.end, chunk=4096) is None
    back = t.search(q, t.size(), forward=False, chunk=4096)
    assert back == second
    assert t.search(q, second.start, forward=False, chunk=4096) == first
    assert t.search(q, first.start, forward=False, chunk=4096) is None
    assert t.search(SearchQuery("NaN detected"), 0) == first  # a capital: exact case
    assert t.search(SearchQuery("NAN"), 0) is None


def test_search_matches_the_shown_text_not_what_a_redraw_overwrote(tmp_path: Path) -> None:
    from gtui.ui.logtail import SearchQuery

    t = write(tmp_path / "a.log", b"a\nold words\rnew words\nerr\x00or here\n")
    assert t.search(SearchQuery("old"), 0) is None
    found = t.search(SearchQuery("new"), 0)
    assert found is not None and found.text == "new words"
    hit = t.search(SearchQuery("error"), 0)  # a NUL the panel drops does not hide a match
    assert hit is not None and hit.text == "error here"


def test_search_reads_a_large_log_by_chunks_not_whole(tmp_path: Path) -> None:
    from gtui.ui.logtail import SearchQuery

    big = tmp_path / "big.log"
    line = b"x" * 99 + b"\n"
    with big.open("wb") as f:
        for _ in range(64):
            f.write(line * 10_000)  # 64 MB
        f.write(b"the needle\n")
    t = LogTail(big)
    tracemalloc.start()
    try:
        found = t.search(SearchQuery("needle"), 0)
        back = t.search(SearchQuery("needle"), t.size(), forward=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found is not None and found.text == "the needle" and back == found
    assert peak < 8 * 1024 * 1024, peak  # a few chunks, not 64 MB
    stop = [False]
    calls = []

    def cancelled() -> bool:
        calls.append(1)
        stop[0] = len(calls) > 2
        return stop[0]

    assert t.search(SearchQuery("absent"), 0, cancelled=cancelled) is None
    assert len(calls) == 3  # it stopped when asked, long before the end
