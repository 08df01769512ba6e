"""The claims reader fuzzed: whatever another local user leaves on the board
(corrupt, huge, symlinked, foreign-owned, a FIFO, a directory, JSON of every shape), reading it
never raises, never blocks, never follows a link, and never yields a claim whose fields are out
of range. Only a file owned by the user it names, holding that user's uid, counts at all."""

from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gtui.core.gpus import claims as claims_mod
from gtui.core.gpus.claims import MAX_FILE_BYTES, Claim, ClaimBoard, parse_claims

UID = os.geteuid()


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "300"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def good_entry(pid: int = 4242, **kw: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "gpu": "GPU-0",
        "index": 0,
        "mem_mib": 61440,
        "pid": pid,
        "start": 1716912345.67,
        "job": "train-vit",
        "since": 1716912345.7,
        "queue": "q",
    }
    entry.update(kw)
    return entry


def doc(*entries: dict[str, Any], uid: int = UID) -> bytes:
    return json.dumps({"gtui_claims": 1, "uid": uid, "claims": list(entries)}).encode()


def board_with(tmp_path: Path) -> tuple[Path, ClaimBoard]:
    d = tmp_path / "board"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    return d, ClaimBoard(d, queue="reader")


def well_formed(c: Claim) -> bool:
    return (
        0 < len(c.gpu) <= 128
        and c.gpu.isprintable()
        and 0 < c.mem_mib <= 1 << 30
        and 0 < c.pid <= 1 << 22
        and math.isfinite(c.start)
        and c.start > 0
        and math.isfinite(c.since)
        and 0 < len(c.job) <= claims_mod.MAX_JOB_CHARS
        and c.job.isprintable()
        and c.uid == UID
    )


# ------------------------------------------------------------------------------- contents
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_any_bytes_are_read_without_raising(raw: bytes) -> None:
    claims, _note = parse_claims(raw, UID, "me")
    assert all(well_formed(c) for c in claims)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
    | st.just("x" * 300),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
FIELD = st.sampled_from(["gpu", "index", "mem_mib", "pid", "start", "job", "since", "queue"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.dictionaries(FIELD, JSON), max_size=6), JSON)
def test_entries_of_any_shape_yield_only_well_formed_claims(entries: list[Any], top: Any) -> None:
    raw = json.dumps({"gtui_claims": 1, "uid": UID, "claims": entries, "x": top}).encode()
    claims, note = parse_claims(raw, UID, "me")
    assert all(well_formed(c) for c in claims)
    assert len(claims) + (int(note.split()[0]) if note and "malformed" in note else 0) == len(
        entries
    )


@settings(max_examples=200, deadline=None)
@given(
    FIELD,
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.floats(),
        st.text(max_size=400),
        st.lists(st.integers(), max_size=2),
    ),
)
def test_one_bad_field_drops_the_claim_not_the_file(field: str, value: Any) -> None:
    raw = doc(good_entry(**{field: value}), good_entry(job="fine"))
    claims, _note = parse_claims(raw, UID, "me")
    assert "fine" in [c.job for c in claims]
    assert all(well_formed(c) for c in claims)


def test_corrupt_and_hostile_contents(tmp_path: Path) -> None:
    cases: list[tuple[bytes, str]] = [
        (b"", "not valid JSON"),
        (b"\xff\xfe\x00garbage", "not valid JSON"),
        (b"{" * 10, "not valid JSON"),
        (b"[" * 200_000 + b"]" * 200_000, "not valid JSON"),  # deeper than json can go
        (b"[]", "not a gtui claims file"),
        (b'{"gtui_claims": 2, "uid": 0, "claims": []}', "not a gtui claims file"),
        (doc(good_entry(), uid=UID + 1), f"names uid {UID + 1} inside"),
        (b'{"gtui_claims": 1, "uid": %d, "claims": {}}' % UID, "no list of claims"),
        (doc(*[good_entry(pid=p) for p in range(1, 600)]), "only the first 512 are read"),
    ]
    for raw, words in cases:
        claims, note = parse_claims(raw, UID, "me")
        assert note is not None and words in note, (raw[:40], note)
        assert len(claims) <= claims_mod.MAX_CLAIMS_PER_FILE
    # A job name with escape sequences cannot reach a terminal as such.
    (c,), _ = parse_claims(doc(good_entry(job="x\x1b]0;pwned\x07\x1b[2J" + "y" * 500)), UID, "me")
    assert c.job.isprintable() and "\x1b" not in c.job and len(c.job) == claims_mod.MAX_JOB_CHARS
    # JSON's true is not a pid, nor 1e400 a start time.
    assert parse_claims(doc(good_entry(pid=True)), UID, "me")[0] == []
    assert (
        parse_claims(
            b'{"gtui_claims":1,"uid":%d,"claims":[%s]}'
            % (UID, json.dumps(good_entry()).replace("1716912345.67", "1e400").encode()),
            UID,
            "me",
        )[0]
        == []
    )


# ------------------------------------------------------------------------------- files
def test_only_regular_files_of_the_user_they_name_are_read(tmp_path: Path, sleeper) -> None:
    d, board = board_with(tmp_path)
    (d / f"{UID}.json").write_bytes(doc(good_entry(pid=sleeper.pid, job="mine")))
    # A file named for another user but owned by us: a forgery of their claims.
    (d / f"{UID + 1}.json").write_bytes(doc(good_entry(job="forged"), uid=UID + 1))
    # A symlink to a real claims file: not followed.
    real = tmp_path / "elsewhere.json"
    real.write_bytes(doc(good_entry(job="linked"), uid=UID + 2))
    (d / f"{UID + 2}.json").symlink_to(real)
    # A FIFO: reading it would block forever; a directory; files with other names.
    os.mkfifo(d / f"{UID + 3}.json")
    (d / f"{UID + 4}.json").mkdir()
    (d / "notes.txt").write_text("hello")
    (d / f".{UID}.abc.tmp").write_bytes(doc(good_entry(job="half-written")))
    t0 = time.monotonic()
    read = board.read()
    assert time.monotonic() - t0 < 5  # the FIFO did not block (generous: a hang is minutes)
    assert [c.job for c in read.claims] == ["mine"]
    notes = "\n".join(read.notes)
    assert (
        f"{UID + 1}.json: owned by" in notes
        and f"not by the user it names (uid {UID + 1})" in notes
    )
    assert f"{UID + 2}.json: a symlink; ignored" in notes
    assert f"{UID + 3}.json: not a regular file; ignored" in notes
    assert f"{UID + 4}.json: not a regular file; ignored" in notes
    assert "notes.txt" not in notes and "half-written" not in notes


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another uid needs root")
def test_a_file_owned_by_someone_else_is_ignored(tmp_path: Path) -> None:
    d, board = board_with(tmp_path)
    other = 54321  # no such user: the owner is named by uid
    path = d / f"{UID}.json"
    path.write_bytes(doc(good_entry(job="planted")))
    os.chown(path, other, other)
    read = board.read()
    assert read.claims == []
    assert read.notes == [
        f"{path}: owned by uid {other}, not by the user it names (uid {UID}); ignored"
    ]


def test_huge_files_are_not_read(tmp_path: Path) -> None:
    for size in (10 << 30, MAX_FILE_BYTES + 1):  # 10 GB (sparse: minutes to read), just over
        d, board = board_with(tmp_path / str(size))
        path = d / f"{UID}.json"
        path.write_bytes(doc(good_entry(job="x" * 10)))
        with open(path, "r+b") as f:
            f.truncate(size)
        t0 = time.monotonic()
        read = board.read()
        assert time.monotonic() - t0 < 5
        assert read.claims == []
        assert read.notes == [f"{path}: {size} bytes, more than {MAX_FILE_BYTES}; ignored"]


def test_the_number_of_files_read_is_bounded(tmp_path: Path, monkeypatch) -> None:
    d, board = board_with(tmp_path)
    monkeypatch.setattr(claims_mod, "MAX_FILES", 5)
    for i in range(20):
        (d / f"{UID + 100 + i}.json").write_bytes(b"{}")
    read = board.read()
    assert sum(n.endswith("; ignored") for n in read.notes) == 5
    assert any("more than 5 files" in n for n in read.notes)


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.binary(max_size=512), min_size=1, max_size=5))
def test_a_board_of_random_files_reads_without_raising(tmp_path: Path, blobs: list[bytes]) -> None:
    d, board = board_with(tmp_path)
    for p in d.iterdir():
        p.unlink()
    for i, blob in enumerate(blobs):
        path = d / f"{UID}.json" if i == 0 else d / f"{UID + i}.json"
        path.write_bytes(blob)
    read = board.read()
    assert all(well_formed(c) for c in read.claims)
    assert all(isinstance(n, str) for n in read.notes)


def test_a_board_that_is_a_file_or_missing_is_no_error(tmp_path: Path) -> None:
    missing = ClaimBoard(tmp_path / "nothing-here", queue="q").read()
    assert (missing.claims, missing.notes) == ([], [])
    not_dir = tmp_path / "file"
    not_dir.write_text("")
    read = ClaimBoard(not_dir, queue="q").read()
    assert read.claims == [] and "not usable" in read.notes[0]
    assert stat.S_ISREG(not_dir.stat().st_mode)


def test_a_planted_lock_file_is_never_followed_nor_blocks(tmp_path: Path) -> None:
    for plant in ("symlink", "fifo"):
        d, board = board_with(tmp_path / plant)
        lock = d / claims_mod.LOCK_NAME
        if plant == "symlink":
            target = tmp_path / "target"
            lock.symlink_to(target)
        else:
            os.mkfifo(lock)
        t0 = time.monotonic()
        with board.lock():  # runs without the lock, and says why
            pass
        assert time.monotonic() - t0 < 5
        assert board.lock_note is not None and str(lock) in board.lock_note
        if plant == "symlink":
            assert not target.exists()
