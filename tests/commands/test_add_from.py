"""``gtui add QUEUE --from FILE``: many jobs in one call, one edit of the queue file, all or
none; into a running scheduler and with none running."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gtui.core.queue.names import command_words
from gtui.core.queue.queuefile import load_queue
from gtui.core.queue.tomlkitedit import job_table_text, new_table, table_text
from tests.cli_helpers import ONE_GATED_JOB, Procs, gate, gtui, release, status
from tests.conftest import write_queue


def _lines(n: int) -> list[str]:
    """Plain command lines and JSON lines, mixed, with a blank line and a comment."""
    out = ["# seeds", ""]
    for i in range(n):
        if i % 3 == 0:
            out.append(json.dumps({"name": f"named-{i}", "cmd": f"echo {i}", "priority": 1}))
        else:
            out.append(f"python train.py --seed {i}")
    return out


def test_a_thousand_lines_land_in_a_running_queue_in_one_request(
    tmp_path: Path, procs: Procs
) -> None:
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate=gate("first")))
    procs.scheduler(q)
    src = tmp_path / "cmds.txt"
    src.write_text("\n".join(_lines(1000)) + "\n")
    r = gtui("add", str(q), "--from", str(src), "--gpus", "0")
    assert r.returncode == 0, r.stderr
    assert "added 1000 jobs" in r.stdout
    # The scheduler answered once it held them all: one request, one take-in.
    jobs = {j["name"]: j for j in status(q)["jobs"]}
    assert len(jobs) == 1001
    on_disk = load_queue(q).jobs
    assert len(on_disk) == 1001
    assert len({j.name for j in on_disk}) == 1001  # every name distinct
    assert [(j.cmd, j.priority) for j in on_disk if j.name == "named-999"] == [("echo 999", 1)]
    assert all(j.gpus == 0 for j in on_disk)  # the command line's --gpus applies to each line
    release(q, "first")


def test_a_wrong_line_adds_nothing_and_names_its_line(tmp_path: Path, procs: Procs) -> None:
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate=gate("first")))
    procs.scheduler(q)
    before = q.read_bytes()
    src = tmp_path / "cmds.txt"
    lines = ["echo a", "echo b", json.dumps({"cmd": "echo c", "gpus": 0, "mem": "2G"})]
    src.write_text("\n".join(lines) + "\n")
    r = gtui("add", str(q), "--from", str(src))
    assert r.returncode == 2
    assert "line 3" in r.stderr and "nothing was added" in r.stderr
    assert "Traceback" not in r.stderr
    assert q.read_bytes() == before
    assert len(status(q)["jobs"]) == 1


def test_an_unknown_key_or_bad_json_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate="true"))
    before = q.read_bytes()
    src = tmp_path / "cmds.txt"
    src.write_text('echo a\n{"cmd": "echo b", "gpu": 1}\n')
    r = gtui("add", str(q), "--from", str(src))
    assert r.returncode == 2 and "line 2" in r.stderr and "`gpu`" in r.stderr, r.stderr
    src.write_text('echo a\n\n{"cmd": "echo b",\n')
    r = gtui("add", str(q), "--from", str(src))
    assert r.returncode == 2 and "line 3" in r.stderr and "not valid JSON" in r.stderr, r.stderr
    r = gtui("add", str(q), "--from", str(tmp_path / "missing.txt"))
    assert r.returncode == 2 and "no such file" in r.stderr
    assert q.read_bytes() == before


def test_stdin_with_no_scheduler_is_one_edit_of_the_file(tmp_path: Path) -> None:
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate="true"))
    r = subprocess.run(
        [sys.executable, "-m", "gtui", "add", str(q), "--from", "-", "--mem", "1G"],
        input="echo one\necho two\n" + json.dumps({"name": "three", "cmd": "echo 3"}) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "added 3 jobs" in r.stdout
    jobs = load_queue(q).jobs
    assert [j.cmd for j in jobs[1:]] == ["echo one", "echo two", "echo 3"]
    assert jobs[-1].name == "three"
    assert "no scheduler runs" in r.stderr


def test_names_given_twice_in_one_file_add_nothing(tmp_path: Path) -> None:
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate="true"))
    before = q.read_bytes()
    src = tmp_path / "cmds.txt"
    src.write_text(
        json.dumps({"name": "x", "cmd": "echo 1"}) + "\n" + json.dumps({"name": "x", "cmd": "a"})
    )
    r = gtui("add", str(q), "--from", str(src))
    assert r.returncode == 2 and "already the name" in r.stderr and "line 2" in r.stderr
    assert q.read_bytes() == before


_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0, max_codepoint=0x2FFF, blacklist_categories=("Cs",)),
    max_size=20,
)
_FIELDS = st.fixed_dictionaries(
    {"cmd": _TEXT},
    optional={
        "name": _TEXT,
        "gpus": st.integers(-5, 10**12),
        "mem": _TEXT,
        "priority": st.integers(),
        "after": st.lists(_TEXT, max_size=3),
        "isolate": st.booleans(),
        "env": st.dictionaries(_TEXT, _TEXT, max_size=3),
        "cwd": _TEXT,
    },
)


@settings(max_examples=300, deadline=None)
@given(_FIELDS)
def test_the_plain_table_writer_writes_what_tomlkit_writes(fields: dict[str, object]) -> None:
    assert job_table_text(fields) == table_text(new_table(fields, inline=False))  # type: ignore[arg-type]


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab -=/.\t\r\n$&|;é\u3000\x0b'\"\\#")), max_size=30))
def test_a_commands_words_are_shlexs_words(cmd: str) -> None:
    try:
        expected = shlex.split(cmd, comments=True)
    except ValueError:
        expected = cmd.split()
    assert command_words(cmd) == expected


def test_the_same_command_twice_is_two_jobs_with_and_without_a_scheduler(
    tmp_path: Path, procs: Procs
) -> None:
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate=gate("first")))
    src = tmp_path / "cmds.txt"
    src.write_text("python train.py\npython train.py\n")
    r = gtui("add", str(q), "--from", str(src), "--gpus", "0")  # no scheduler
    assert r.returncode == 0, r.stderr
    procs.scheduler(q)
    r = gtui("add", str(q), "--from", str(src), "--gpus", "0")  # into the running one
    assert r.returncode == 0, r.stderr
    names = [j.name for j in load_queue(q).jobs if j.cmd == "python train.py"]
    assert len(names) == 4 and len(set(names)) == 4
    base = names[0]
    assert names[1:] == [f"{base}-2", f"{base}-3", f"{base}-4"]
    assert {j["name"] for j in status(q)["jobs"]} >= set(names)
    release(q, "first")


def test_add_into_a_running_queue_imports_no_textual_and_no_tomlkit(
    tmp_path: Path, procs: Procs
) -> None:
    """A single add into a running queue is one request: nothing of the dashboard or of the
    queue file's editor is loaded for it (its start-up is most of its time)."""
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate=gate("first")))
    procs.scheduler(q)
    probe = (
        "import sys; from gtui import cli; code = cli.main(sys.argv[1:]); "
        "bad = sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'tomlkit', 'rich'}); "
        "print(bad); sys.exit(code)"
    )
    for args in (["--", "true"], ["--from", str(tmp_path / "one.txt")]):
        (tmp_path / "one.txt").write_text("echo one\necho two\n")
        r = subprocess.run(
            [sys.executable, "-c", probe, "add", str(q), "--gpus", "0", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[-1] == "[]"
    release(q, "first")
