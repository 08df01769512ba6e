"""Sizes and durations as people write them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gtui.core.errors import QueueFileError
from gtui.core.queue.queuefile import load_queue
from gtui.core.units import UnitError, parse_duration_s, parse_size_mib


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        ("80Gi", 81920),
        ("80GiB", 81920),
        ("80 GB", 81920),
        ("80G", 81920),
        ("81920M", 81920),
        ("81920Mi", 81920),
        ("0.5T", 524288),
        ("1Ti", 1048576),
        ("35", 35840),
    ],
)
def test_sizes_as_people_write_them(text: str, mib: int) -> None:
    assert parse_size_mib(text) == mib


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h30m", 5400.0), ("90m", 5400.0), ("5400s", 5400.0), ("2d4h", 187200.0), ("250ms", 0.25)],
)
def test_durations_as_people_write_them(text: str, seconds: float) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["1h1h", "30m1h", "1m1m30s", "5x", "h", "80Gb of memory"])
def test_what_is_not_a_duration_is_an_error_not_a_guess(text: str) -> None:
    with pytest.raises(UnitError):
        parse_duration_s(text)


@pytest.mark.parametrize("text", ["80 G B", "80Gx", "eighty G", "-1G"])
def test_what_is_not_a_size_is_an_error(text: str) -> None:
    with pytest.raises(UnitError):
        parse_size_mib(text)


def test_a_queue_file_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    q = tmp_path / "q.toml"
    q.write_bytes(b'\xef\xbb\xbf[[jobs]]\nname = "a"\ncmd = "true"\ngpus = 0\n')
    assert [j.name for j in load_queue(q).jobs] == ["a"]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ('[[jobs]]\ncmd = "true"\n'.encode("utf-16"), "UTF-16"),
        ('[[jobs]]\ncmd = "café"\n'.encode("latin-1"), "not a UTF-8 text file"),
    ],
)
def test_another_encoding_is_named_in_one_line(tmp_path: Path, data: bytes, said: str) -> None:
    q = tmp_path / "q.toml"
    q.write_bytes(data)
    with pytest.raises(QueueFileError) as err:
        load_queue(q)
    assert said in str(err.value) and "\n" not in str(err.value)
