"""``gtui log`` and ``gtui follow``, driven as real commands: against a real
headless scheduler, and with none running."""

from __future__ import annotations

import io
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gtui.commands._logs import BLOCK, LogPrinter, tail_offset
from tests.cli_helpers import (
    FAKE,
    Procs,
    gate,
    gtui,
    in_pty,
    live_state,
    release,
)
from tests.conftest import write_queue
from tests.waiting import wait_for

# A job whose first attempt fails and second succeeds, writing escapes a terminal would obey.
TWO_TRIES = (
    "n=$(cat tries 2>/dev/null || echo 0); n=$((n+1)); echo $n > tries; "
    "echo attempt $n; printf 'title\\033]0;pwned\\007 \\033[31mred\\033[0m\\n'; "
    "printf '10%%\\r50%%\\r100%%\\n'; [ $n -ge 2 ]"
)


def two_tries_queue(tmp: Path) -> Path:
    return write_queue(
        tmp,
        f"""
        [settings]
        poll = "0.2s"

        [[jobs]]
        name = "a"
        gpus = 0
        retries = 1
        cmd = '''{TWO_TRIES}'''

        [[jobs]]
        name = "never"
        gpus = 0
        after = ["a"]
        cmd = "exit 1"
        """,
    )


def test_log_latest_attempt_and_older_ones_raw_into_a_pipe(tmp_path: Path) -> None:
    q = two_tries_queue(tmp_path)
    assert gtui("run", str(q), "--fake-gpus", FAKE).returncode == 1  # `never` fails
    raw = subprocess.run(
        [sys.executable, "-m", "gtui", "log", str(q), "a"], capture_output=True, timeout=60
    )
    assert raw.returncode == 0, raw.stderr
    # Piped: the job's bytes, escapes and carriage returns as written.
    assert raw.stdout == b"attempt 2\ntitle\x1b]0;pwned\x07 \x1b[31mred\x1b[0m\n10%\r50%\r100%\n"
    r = gtui("log", str(q), "a", "--attempt", "1")
    assert r.returncode == 0 and r.stdout.startswith("attempt 1\n")
    r = gtui("log", str(q), "a", "-n", "1")
    assert r.stdout == "10%\n50%\n100%\n"  # (text mode reads each \r as a newline)
    r = gtui("log", str(q), "a", "-n", "2", "--attempt", "1")
    assert r.stdout.startswith("title") and r.stdout.endswith("100%\n")
    r = gtui("log", str(q), "a", "--attempt", "3")
    assert r.returncode == 2 and "a has no attempt 3: it has 2 attempts" in r.stderr
    r = gtui("log", str(q), "nope")
    assert r.returncode == 2 and "no job named 'nope'" in r.stderr


def _piped(*args: str, no_color: str | None) -> bytes:
    """``gtui ARGS`` into a pipe (as ``| cat``), with NO_COLOR as given (None: unset)."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    if no_color is not None:
        env["NO_COLOR"] = no_color
    r = subprocess.run(
        [sys.executable, "-m", "gtui", *args], capture_output=True, timeout=60, env=env
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_no_color_drops_the_logs_colours_in_a_pipe_too(tmp_path: Path) -> None:
    """NO_COLOR (no-color.org) asks for no colour wherever it goes: `NO_COLOR=1 gtui log q a |
    less` shows none. Only the colours go; every other byte stays as the job wrote it. Without
    NO_COLOR (or with it empty, which no-color.org reads as unset) a pipe gets the exact bytes."""
    q = two_tries_queue(tmp_path)
    assert gtui("run", str(q), "--fake-gpus", FAKE).returncode == 1
    exact = b"attempt 2\ntitle\x1b]0;pwned\x07 \x1b[31mred\x1b[0m\n10%\r50%\r100%\n"
    uncoloured = b"attempt 2\ntitle\x1b]0;pwned\x07 red\n10%\r50%\r100%\n"
    for command in ("log", "follow"):
        assert _piped(command, str(q), "a", no_color="1") == uncoloured, command
        assert _piped(command, str(q), "a", no_color=None) == exact, command
        assert _piped(command, str(q), "a", no_color="") == exact, command


def test_a_colour_cut_between_two_reads_is_dropped_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    p = LogPrinter(out, terminal=False)
    for chunk in (b"a\x1b", b"[3", b"1;1mred\x1b[", b"0m \x1b[2Kkept\n", b"cut at the end\x1b["):
        p.feed(chunk)
    p.close()
    assert out.buffer.getvalue() == b"ared \x1b[2Kkept\ncut at the end\x1b["  # type: ignore[attr-defined]


def test_log_to_a_terminal_is_made_safe_as_in_the_dashboard(tmp_path: Path) -> None:
    q = two_tries_queue(tmp_path)
    assert gtui("run", str(q), "--fake-gpus", FAKE).returncode == 1
    code, out = in_pty("log", str(q), "a")
    assert code == 0
    text = out.decode()
    assert "\x1b]0;pwned" not in text and "\x07" not in text  # the title escape is gone
    assert "title \x1b[31mred\x1b[0m" in text  # colours are kept
    assert "100%" in text and "10%" not in text.replace("100%", "")  # the last redraw only


def test_log_of_a_job_that_has_not_started(tmp_path: Path) -> None:
    q = two_tries_queue(tmp_path)
    r = gtui("log", str(q), "never")
    assert r.returncode == 1
    assert "never has not started yet" in r.stderr and f"gtui follow {q.name} never" in r.stderr


def test_the_terminal_printer_redraws_a_line_in_progress() -> None:
    out = io.StringIO()
    p = LogPrinter(out, terminal=True)
    p.feed(b" 10%|#")
    p.feed(b"\r 50%|#####")
    p.feed(b"\r100%|##########\nnext \xe2\x9c")  # a UTF-8 character cut between two reads
    p.feed(b"\x93 line\x1bc\n")
    p.close()
    assert out.getvalue() == (
        "\r\x1b[K 10%|#"
        "\r\x1b[K 50%|#####"
        "\r\x1b[K100%|##########\n"
        "\r\x1b[Knext "
        "\r\x1b[Knext \u2713 line\n"
    )


def test_tail_offset(tmp_path: Path) -> None:
    f = tmp_path / "log"
    f.write_bytes(b"a\nb\nc\n")
    assert [tail_offset(f, n) for n in (1, 2, 3, 9)] == [4, 2, 0, 0]
    f.write_bytes(b"a\nb\nc")  # a last line still being written counts
    assert [tail_offset(f, n) for n in (1, 2)] == [4, 2]


def test_follow_waits_for_the_start_then_streams_until_done(tmp_path: Path, procs: Procs) -> None:
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.2s"

        [[jobs]]
        name = "first"
        gpus = 0
        cmd = "{gate("first")}"

        [[jobs]]
        name = "b"
        gpus = 0
        after = ["first"]
        cmd = "echo one; {gate("b")}; echo two"
        """,
    )
    sched = procs.scheduler(q)
    f = procs.start("follow", str(q), "b")
    f.wait_for("b has not started yet (queued")
    release(q, "first")
    f.wait_for("one")
    assert f.proc.poll() is None  # it follows: the job still runs
    r = gtui("log", str(q), "b")  # the log so far, from the running scheduler's record
    assert (r.returncode, r.stdout) == (0, "one\n"), r.stderr
    release(q, "b")
    assert f.proc.wait(30) == 0
    assert f.text().endswith("one\ntwo\n")
    sched.live.wait_for("done b")


def test_follow_goes_into_the_next_attempt_and_exits_1_when_the_job_fails(
    tmp_path: Path, procs: Procs
) -> None:
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.2s"

        [[jobs]]
        name = "flaky"
        gpus = 0
        retries = 1
        cmd = "echo try $GTUI_ATTEMPT; {gate("flaky")}; exit 3"
        """,
    )
    procs.scheduler(q)
    wait_for(lambda: live_state(q, "flaky") == "running", what="flaky running")
    f = procs.start("follow", str(q), "flaky")
    f.wait_for("try 1")
    release(q, "flaky")  # both attempts end at once: the file stays
    assert f.proc.wait(30) == 1
    out = f.text()
    assert "try 1\n" in out and "attempt 2 started" in out and "try 2\n" in out
    assert out.rstrip().endswith("flaky failed (exit 3): error: try 2")


def test_follow_with_no_scheduler_prints_an_ended_job_and_its_end(tmp_path: Path) -> None:
    q = two_tries_queue(tmp_path)
    assert gtui("run", str(q), "--fake-gpus", FAKE).returncode == 1
    r = gtui("follow", str(q), "a")
    assert (r.returncode, r.stdout.splitlines()[0]) == (0, "attempt 2")
    r = gtui("follow", str(q), "never")
    assert r.returncode == 1 and "never failed (exit 1)" in r.stderr


def _reference_terminal(chunks: list[bytes]) -> str:
    """What the terminal printer wrote before it kept a line's parts apart: every read
    rebuilt the whole unfinished line and showed it again (quadratic in a long line, and the
    model its output is held to on short ones)."""
    import codecs

    from gtui.commands._logs import _CLEAR_LINE, _ended, shown_line

    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending, shown, out = "", False, []
    for data in chunks:
        if not data:
            continue
        lines = (pending + decoder.decode(data)).split("\n")
        pending = lines.pop()
        if lines and shown:
            out.append(_CLEAR_LINE)
            shown = False
        out.extend(_ended(shown_line(raw)) + "\n" for raw in lines)
        if pending:
            partial = shown_line(pending)
            if partial or shown:
                out.append(_CLEAR_LINE + _ended(partial))
                shown = True
    rest = pending + decoder.decode(b"", final=True)
    if rest or shown:
        out.append(_CLEAR_LINE + _ended(shown_line(rest)) + "\n")
    return "".join(out)


def _terminal(chunks: list[bytes]) -> str:
    out = io.StringIO()
    p = LogPrinter(out, terminal=True)
    for chunk in chunks:
        p.feed(chunk)
    p.close()
    return out.getvalue()


_PIECES = [
    b"a",
    b"bc",
    b" ",
    b"\r",
    b"\n",
    b"\r\n",
    b"\x1b",
    b"[31m",
    b"[0m",
    b"]0;t",
    b"\x07",
    b"\x1bc",
    b"\xe2\x9c\x93",
    b"\xe2",
    b"\t",
    b"\x9b",
    b"\xc2\x9b",
    b"50%|##",
]


@given(
    pieces=st.lists(st.sampled_from(_PIECES), max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
@settings(max_examples=300, deadline=None)
def test_the_terminal_printer_shows_what_it_always_showed_on_short_lines(
    pieces: list[bytes], cuts: list[int]
) -> None:
    """Whatever the bytes and wherever the reads cut them (between the bytes of a UTF-8
    character, of an escape, of ``\\r\\n``), a log of short lines reaches the terminal as
    it did when every read rebuilt the whole line."""
    data = b"".join(pieces)
    at = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    chunks = [data[a:b] for a, b in itertools.pairwise(at)]
    assert _terminal(chunks) == _reference_terminal(chunks)


def _blocks(data: bytes, size: int = BLOCK) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_a_long_line_of_redraws_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tqdm bar written to a file: megabytes of ``\\r`` redraws and no newline. Each read
    hands the line's cleaner only what it has not seen (and the redraw on the screen), not
    the whole line again: the text cleaned grows with the log, not with its square."""
    import gtui.commands._logs as logs

    cleaned = [0]
    real = logs.shown_line

    def counting(raw: str, *, colour: bool = True) -> str:
        cleaned[0] += len(raw)
        return real(raw, colour=colour)

    monkeypatch.setattr(logs, "shown_line", counting)
    bar = b"\r 42%|####      | 420/1000 [00:10<00:14, 41.2it/s]"
    data = bar * (2 * 1024 * 1024 // len(bar))
    out = _terminal(_blocks(data))
    assert out.endswith("\r\x1b[K 42%|####      | 420/1000 [00:10<00:14, 41.2it/s]\n")
    assert cleaned[0] <= 2 * len(data)  # rebuilt at every read: 32 reads, ~17 times the log


def test_a_long_line_without_carriage_returns_is_written_once() -> None:
    """2 MB with neither newline nor ``\\r`` (dots, a JSON blob): its redraws while it grows
    stay bounded, and when it ends the whole line is there, once."""
    data = b"." * (2 * 1024 * 1024)
    out = _terminal(_blocks(data))
    assert out.endswith("\r\x1b[K" + "." * len(data) + "\n")
    assert len(out) <= 2 * len(data)  # the whole line at every read: ~16 times the log
