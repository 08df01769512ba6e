"""gtui.core.paths' own rules, checked against what they stand in for: the temp folder that
tempfile would give, and hashlib's SHA-1 (the names of every queue's state and socket files
must not change with how they are computed)."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gtui.core.paths import sha1_hex, temp_dir


@pytest.fixture
def fresh_tempfile(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """tempfile without its cached answer, so that it looks at the environment again."""
    for var in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)
    yield


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"TMPDIR": "{tmp}/t"},
        {"TMPDIR": "{tmp}/missing", "TEMP": "{tmp}/t"},
        {"TMPDIR": "{tmp}/ro", "TMP": "{tmp}/t"},
        {"TMPDIR": "{tmp}/a-file"},
    ],
    ids=["none", "tmpdir", "missing-then-temp", "read-only-then-tmp", "a-file"],
)
def test_the_temp_folder_is_the_one_tempfile_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_tempfile: None, env: dict[str, str]
) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "ro").mkdir(mode=0o500)
    (tmp_path / "a-file").write_text("")
    for var, value in env.items():
        monkeypatch.setenv(var, value.format(tmp=tmp_path))
    # (root writes in the 0500 folder, as tempfile finds by trying: both then take it)
    assert temp_dir() == tempfile.gettempdir()


@pytest.mark.parametrize("text", ["", "/home/u/q.toml", "/tmp/é ü/ß.toml", "x" * 5000])
def test_sha1_hex_is_hashlibs(text: str) -> None:
    assert sha1_hex(text) == hashlib.sha1(text.encode()).hexdigest()
