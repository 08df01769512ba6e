"""``gtui edit``: ``$EDITOR`` on one job's table, checked on save, written back with
every other byte of the file kept; a running scheduler takes it at once."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

from tests.cli_helpers import (
    Procs,
    final_state,
    gate,
    gtui,
    live_state,
    release,
    status,
)
from tests.conftest import write_queue
from tests.waiting import wait_for

# An editor: each call appends what it was given to seen.txt, then applies the next step of
# steps.txt (one Python expression per line, of `text`) to the file; with no step left it
# exits 1.
EDITOR = textwrap.dedent(
    """
    import pathlib, sys
    here = pathlib.Path(__file__).parent
    path = pathlib.Path(sys.argv[-1])
    text = path.read_text()
    with open(here / "seen.txt", "a") as f:
        f.write(text + "\\n=====\\n")
    steps = (here / "steps.txt").read_text().splitlines()
    done = here / "done.txt"
    n = len(done.read_text().splitlines()) if done.exists() else 0
    if n >= len(steps):
        sys.exit(1)
    with open(done, "a") as f:
        f.write("x\\n")
    path.write_text(eval(steps[n]))
    """
)


def editor(tmp: Path, *steps: str) -> dict[str, str]:
    script = tmp / "ed" / "editor.py"
    script.parent.mkdir()
    script.write_text(EDITOR)
    (script.parent / "steps.txt").write_text("\n".join(steps) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("EDITOR", "VISUAL")}
    env["EDITOR"] = f"{sys.executable} {script}"
    return env


def seen(tmp: Path) -> list[str]:
    return (tmp / "ed" / "seen.txt").read_text().split("\n=====\n")[:-1]


QUEUE = f"""
    # my queue
    [settings]
    poll = "0.2s"

    [[jobs]]
    name = "keeper"
    gpus = 0
    cmd = "{gate("keeper")}"

    # the job to edit
    [[jobs]]
    name = "target"   # keep this comment
    gpus = 0
    after = ["keeper"]
    cmd = "echo old"

    [[jobs]]
    name = "last"
    gpus = 0
    cmd = "true"
    """


def test_edit_reopens_on_an_error_then_writes_the_table_back(tmp_path: Path, procs: Procs) -> None:
    q = write_queue(tmp_path, QUEUE)
    before = q.read_text()
    procs.scheduler(q)
    wait_for(lambda: live_state(q, "keeper") == "running", what="keeper running")
    env = editor(
        tmp_path,
        "text.replace('gpus = 0', 'gpus = \"two\"')",
        "text.replace('gpus = \"two\"', 'gpus = 0\\nretries = 2').replace('echo old', 'echo new')",
    )
    r = gtui("edit", str(q), "target", env=env)
    assert (r.returncode, r.stdout) == (0, "edited target in q.toml\n"), r.stderr
    first, second = seen(tmp_path)
    table = '# the job to edit\n[[jobs]]\nname = "target"   # keep this comment\n'
    assert first.startswith("# gtui: target in q.toml, line 11: save and quit")
    assert table in first
    # Opened again with the error on top, on the line of the editor's text that has it.
    lines = second.splitlines()
    assert lines[0] == (
        "# gtui: error: line 7: gpus: expected an integer, got a string ('two') "
        "(the file was not changed)"
    )
    assert lines[6] == 'gpus = "two"'
    expected = before.replace(
        'gpus = 0\nafter = ["keeper"]\ncmd = "echo old"',
        'gpus = 0\nretries = 2\nafter = ["keeper"]\ncmd = "echo new"',
    )
    assert q.read_text() == expected  # every other byte kept
    # Taken at once by the scheduler.
    job = next(j for j in status(q)["jobs"] if j["name"] == "target")
    assert job["state"] == "queued"
    release(q, "keeper")
    wait_for(lambda: final_state(q, "target") == "done", what="target done")
    log = next(j for j in status(q)["jobs"] if j["name"] == "target")["log"]
    assert Path(log).read_text() == "new\n"


def test_edit_unchanged_emptied_or_the_editor_failing_changes_nothing(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    before = q.read_text()
    r = gtui("edit", str(q), "target", env=editor(tmp_path, "text"))
    assert (r.returncode, r.stdout) == (0, "no change to target\n")
    (tmp_path / "ed" / "done.txt").unlink()
    (tmp_path / "ed" / "steps.txt").write_text("''\n")
    r = gtui("edit", str(q), "target", env=editor_env(tmp_path))
    assert (r.returncode, r.stdout) == (0, "the text was emptied: q.toml was not changed\n")
    (tmp_path / "ed" / "done.txt").unlink()
    (tmp_path / "ed" / "steps.txt").write_text("text.replace('gpus = 0', 'gpus = -1')\n")
    r = gtui("edit", str(q), "target", env=editor_env(tmp_path))  # invalid, then exits 1
    assert r.returncode == 1 and "the editor exited with status 1" in r.stderr
    (tmp_path / "ed" / "done.txt").unlink()
    (tmp_path / "ed" / "steps.txt").write_text("text + '[[jobs]]\\ncmd = \"x\"\\n'\ntext\n")
    r = gtui("edit", str(q), "target", env=editor_env(tmp_path))  # two tables: refused
    assert r.returncode == 1 and "saved unchanged with the error" in r.stderr
    assert "the text must be exactly one [[jobs]] table" in seen(tmp_path)[-1]
    assert q.read_text() == before


def editor_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("EDITOR", "VISUAL")}
    env["EDITOR"] = f"{sys.executable} {tmp / 'ed' / 'editor.py'}"
    return env


def test_edit_falls_back_to_visual(tmp_path: Path) -> None:
    q = write_queue(tmp_path, QUEUE)
    env = editor(tmp_path, "text.replace('echo old', 'echo visual')")
    env["VISUAL"] = env.pop("EDITOR")
    r = gtui("edit", str(q), "target", env=env)
    assert r.returncode == 0, r.stderr
    assert 'cmd = "echo visual"' in q.read_text()
