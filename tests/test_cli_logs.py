"""``gtui log`` and ``gtui follow`` (issue 18.1), driven as real commands: against a real
headless scheduler, and with none running."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gtui.commands._logs import LogPrinter, tail_offset
from tests.conftest import write_queue
from tests.test_cli_support import (
    FAKE,
    Procs,
    cleaned_procs,
    gate,
    gtui,
    in_pty,
    live_state,
    release,
)
from tests.waiting import wait_for

# A job whose first attempt fails and second succeeds, writing escapes a terminal would obey.
TWO_TRIES = (
    "n=$(cat tries 2>/dev/null || echo 0); n=$((n+1)); echo $n > tries; "
    "echo attempt $n; printf 'title\\033]0;pwned\\007 \\033[31mred\\033[0m\\n'; "
    "printf '10%%\\r50%%\\r100%%\\n'; [ $n -ge 2 ]"
)


@pytest.fixture(name="procs")
def _procs() -> Iterator[Procs]:
    yield from cleaned_procs()


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
        "\r\x1b[K 10%|#" "\r\x1b[K 50%|#####" "\r\x1b[K100%|##########\n"
        "\r\x1b[Knext " "\r\x1b[Knext \u2713 line\n"
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
