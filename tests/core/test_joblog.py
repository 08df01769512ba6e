"""gtui.core.joblog, the one reader of a job's log: byte ranges, tails cut at a line, where the
last N lines start, the chunks a reader copies, the decoded text, on real files. The windows and
the search are tests/ui/test_ui_logtail.py's; the dashboard, ``gtui log``, the progress reader and
the diagnosis all read through these."""

from __future__ import annotations

from pathlib import Path

from gtui.core import joblog
from gtui.core.diagnosis.diagnose import read_log_tail
from gtui.core.progress import read_progress


def test_a_byte_range_and_an_unreadable_log(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"0123456789")
    assert joblog.read_range(log, 3, 4) == b"3456"
    assert joblog.reader(log)(8, 100) == b"89"
    assert joblog.read_range(tmp_path / "none.log", 0, 10) == b""
    assert joblog.read_tail(tmp_path / "none.log", 10) is None


def test_a_tail_drops_its_cut_first_line_unless_it_is_the_only_one(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"first line\nsecond\nthird\n")
    assert joblog.read_tail(log, 12) == b"third\n"  # "econd\n" was cut: dropped
    assert joblog.read_tail(log, 5) == b"hird\n"  # the only line: kept, cut
    assert joblog.read_tail(log, 1000) == b"first line\nsecond\nthird\n"
    assert joblog.tail_start(10, 4) == 6 and joblog.tail_start(3, 4) == 0


def test_where_the_last_lines_start(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"a\nbb\nccc\n")
    assert joblog.last_lines_offset(log, 1) == 5
    assert joblog.last_lines_offset(log, 2) == 2
    assert joblog.last_lines_offset(log, 9) == 0
    assert joblog.last_lines_offset(log, 0) == log.stat().st_size
    log.write_bytes(b"a\nbb\nunfinished")  # a line still being written counts as one
    assert joblog.last_lines_offset(log, 1) == 5


def test_chunks_come_back_for_what_was_written_since(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"x" * (joblog.BLOCK + 10))
    with log.open("rb") as f:
        assert [len(c) for c in joblog.chunks(f)] == [joblog.BLOCK, 10]
        with log.open("ab") as w:
            w.write(b"more")
        assert list(joblog.chunks(f)) == [b"more"]


def test_every_reader_decodes_alike(tmp_path: Path) -> None:
    """Bytes that are not UTF-8 read as U+FFFD, the same in the panel, the diagnosis and the
    progress reader."""
    log = tmp_path / "a.log"
    log.write_bytes(b"bad \xff byte\ngtui:progress 0.5\n")
    assert joblog.decode(b"bad \xff byte") == "bad \ufffd byte"
    lines = joblog.LogTail(log).last_lines(2)
    assert lines[0].text == "bad \ufffd byte"
    assert read_log_tail(log).splitlines()[0] == "bad \ufffd byte"
    p = read_progress(joblog.reader(log), log.stat().st_size)
    assert p is not None and p.fraction == 0.5
