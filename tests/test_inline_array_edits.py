"""Edits keep what the user wrote (issue 22.3): round trips over every sample queue and over a
commented inline-array queue (``jobs = [{...}, ...]``), edited by each dashboard action.

Each file is edited by the very functions the dashboard's keys call (e: update_job, d:
remove_job, K / J / t: move_job, a: append_job; p on a waiting job holds it in the state db and
writes nothing), on real files, and the result must differ from the original only in the lines
of the edited job: every comment, blank line and other job stays as written. One allowance: a
job that becomes followed by another in an inline array gains the comma TOML needs after it.

Each edit also parses the file once, not twice (it took 641 ms on a 10,000-job file where one
parse is ~256 ms): the write-back reuses the parse its check of the file made.
"""

from __future__ import annotations

import difflib
import re
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gtui.core.queue import queuefile, writeback
from gtui.core.queue.queuefile import forget_cached, load_queue
from tests.conftest import REPO

INLINE = """\
# A queue kept as one inline array, as some people write it.
jobs = [
  # prepare the data first
  { name = "prep", cmd = "python prep.py", gpus = 0 },  # CPU only

  { name = "train", cmd = "python train.py", mem = "20G", after = ["prep"] },  # the big one
  # evaluation, twice
  { name = "eval-a", cmd = "python eval.py --set a", mem = "8G" },
  { name = "eval-b", cmd = "python eval.py --set b", mem = "8G" }
]  # end of jobs

[settings]
mode = "pack"  # share GPUs
# nothing after this
"""

COMPACT = """\
# everything on one line
jobs = [{ name = "x", cmd = "echo x", gpus = 0 }, { name = "y", cmd = "echo y", gpus = 0 }, { name = "z", cmd = "echo z", gpus = 0 }]  # three
"""

SAMPLES = sorted((REPO / "sample_queues").glob("*.toml"))


def _entry_lines(text: str) -> dict[str, tuple[int, int]]:
    """Each single (non-matrix) job's lines, 0-based [start, end): its table or its inline
    element, with the comment lines right above it that belong to it."""
    path = Path("/nonexistent/q.toml")
    q = load_queue(path, text=text)
    lines = text.splitlines()
    entries: dict[int, list[str]] = {}
    for j in q.jobs:
        entries.setdefault(j.entry, []).append(j.name)
    out: dict[str, tuple[int, int]] = {}
    for j in q.jobs:
        if len(entries[j.entry]) != 1 or not j.line:
            continue
        start = end = j.line - 1
        if lines[start].lstrip().startswith("[[jobs]]"):
            end = start + 1
            while end < len(lines) and not lines[end].lstrip().startswith("["):
                end += 1
            while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
                end -= 1
        else:
            end = start + 1
        while start > 0 and lines[start - 1].lstrip().startswith("#"):
            start -= 1
        out[j.name] = (start, end)
    return out


def _rest(text: str, name: str) -> list[str]:
    """The file's lines less the job's own, blank lines left out, commas after inline tables
    left out: what must not change when that job is edited, moved, removed or added."""
    lo, hi = _entry_lines(text).get(name, (0, 0))
    return [
        re.sub(r"\}\s*,", "}", line)
        for i, line in enumerate(text.splitlines())
        if not (lo <= i < hi) and line.strip()
    ]


def assert_only_job_changed(before: str, after: str, name: str) -> None:
    """Everything but the job's lines is as it was, in the same order (whatever the job's new
    place); the job's own lines hold the job."""
    old, new = _rest(before, name), _rest(after, name)
    if old != new:
        diff = "\n".join(difflib.unified_diff(old, new, lineterm="", n=1))
        raise AssertionError(f"{name}: lines outside it changed:\n{diff}")


def _copy(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "q.toml"
    p.write_text(text)
    return p


def _single_jobs(text: str) -> list[str]:
    return list(_entry_lines(text))


Action = Callable[[Path, str], None]
ACTIONS: dict[str, Action] = {
    "edit": lambda p, n: writeback.update_job(p, n, {"cmd": "python other.py --edited"}),
    "edit-more": lambda p, n: writeback.update_job(p, n, {"priority": 5, "retries": 2}),
    "delete": lambda p, n: writeback.remove_job(p, n),
    "move-up": lambda p, n: writeback.move_job(p, n, "up"),
    "move-down": lambda p, n: writeback.move_job(p, n, "down"),
    "move-top": lambda p, n: writeback.move_job(p, n, "top"),
    "place-bottom": lambda p, n: writeback.place_job(p, n, "bottom") and None,
}


def _removable(text: str, name: str) -> bool:
    q = load_queue(Path("/nonexistent/q.toml"), text=text)
    return not any(name in j.after for j in q.jobs)


def _cases() -> list[tuple[str, str]]:
    files = [("inline", INLINE)]
    files += [(p.name, p.read_text()) for p in SAMPLES]
    return files


@pytest.mark.parametrize("action", sorted(ACTIONS))
@pytest.mark.parametrize(("label", "text"), _cases(), ids=[c[0] for c in _cases()])
def test_each_dashboard_edit_changes_only_the_edited_job(
    tmp_path: Path, label: str, text: str, action: str
) -> None:
    names = _single_jobs(text)
    if not names:
        pytest.skip(f"{label}: every job is a matrix entry's (test_writeback.py covers those)")
    for name in names:
        if action == "delete" and not _removable(text, name):
            continue
        p = _copy(tmp_path, text)
        ACTIONS[action](p, name)
        after = p.read_text()
        load_queue(p)  # still a valid queue
        assert_only_job_changed(text, after, name)
        if action == "delete":
            assert name not in [j.name for j in load_queue(p).jobs]


@pytest.mark.parametrize(("label", "text"), _cases(), ids=[c[0] for c in _cases()])
def test_adding_a_job_adds_only_its_lines(tmp_path: Path, label: str, text: str) -> None:
    p = _copy(tmp_path, text)
    writeback.append_job(p, {"name": "added-one", "cmd": "echo added", "gpus": 0})
    after = p.read_text()
    assert [j.name for j in load_queue(p).jobs][-1] == "added-one"
    assert_only_job_changed(text, after, "added-one")


def test_the_commented_inline_queue_keeps_every_comment_through_a_session(
    tmp_path: Path,
) -> None:
    p = _copy(tmp_path, INLINE)
    writeback.update_job(p, "train", {"mem": "30G"})
    writeback.move_job(p, "eval-b", "top")
    writeback.remove_job(p, "eval-a")
    writeback.append_job(p, {"name": "extra", "cmd": "echo extra", "gpus": 0})
    text = p.read_text()
    for comment in (
        "# A queue kept as one inline array",
        "# prepare the data first",
        "# CPU only",
        "# the big one",
        "# end of jobs",
        "# share GPUs",
        "# nothing after this",
    ):
        assert comment in text, (comment, text)
    assert [j.name for j in load_queue(p).jobs] == ["eval-b", "prep", "train", "extra"]
    assert 'mem = "30G"' in text and "eval-a" not in text


def test_an_edit_parses_the_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file as it is is parsed once per edit (by the check that it is valid); the
    write-back works on that parse. (The new text is parsed once more, to check it.)"""
    real_plain, real_loads = queuefile.parse_plain, tomllib.loads
    parsed: list[str] = []

    def plain(t: str, *a: Any, **k: Any) -> Any:
        got = real_plain(t, *a, **k)
        if got is not None:  # the fast parser of plain [[jobs]] files took it
            parsed.append(t)
        return got

    def loads(t: str, *a: Any, **k: Any) -> Any:
        parsed.append(t)
        return real_loads(t, *a, **k)

    monkeypatch.setattr(queuefile, "parse_plain", plain)
    monkeypatch.setattr(tomllib, "loads", loads)
    for text in (INLINE, (REPO / "sample_queues" / "pipeline.toml").read_text()):
        p = _copy(tmp_path, text)
        name = _single_jobs(text)[0]
        forget_cached()
        parsed.clear()
        writeback.update_job(p, name, {"priority": 3})
        assert parsed.count(text) == 1, f"the file was parsed {parsed.count(text)} times"


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        (lambda p: writeback.remove_job(p, "y"), 'jobs = [{ name = "x", cmd = "echo x", gpus = 0 }, { name = "z", cmd = "echo z", gpus = 0 }]  # three'),
        (lambda p: writeback.remove_job(p, "z"), 'jobs = [{ name = "x", cmd = "echo x", gpus = 0 }, { name = "y", cmd = "echo y", gpus = 0 }, ]  # three'),
        (lambda p: writeback.move_job(p, "z", "top"), 'jobs = [{ name = "z", cmd = "echo z", gpus = 0 }, { name = "x", cmd = "echo x", gpus = 0 }, { name = "y", cmd = "echo y", gpus = 0 }, ]  # three'),
        (lambda p: writeback.update_job(p, "y", {"cmd": "echo Y"}), 'jobs = [{ name = "x", cmd = "echo x", gpus = 0 }, { name = "y", cmd = "echo Y", gpus = 0 }, { name = "z", cmd = "echo z", gpus = 0 }]  # three'),
        (lambda p: writeback.append_job(p, {"name": "w", "cmd": "echo w", "gpus": 0}), 'jobs = [{ name = "x", cmd = "echo x", gpus = 0 }, { name = "y", cmd = "echo y", gpus = 0 }, { name = "z", cmd = "echo z", gpus = 0 }, {name = "w", cmd = "echo w", gpus = 0}]  # three'),
    ],
    ids=["delete-middle", "delete-last", "move-top", "edit", "add"],
)
def test_an_array_on_one_line_is_edited_in_place(
    tmp_path: Path, action: Callable[[Path], object], expected: str
) -> None:
    p = _copy(tmp_path, COMPACT)
    action(p)
    assert p.read_text() == "# everything on one line\n" + expected + "\n"
    load_queue(p)


def test_samples_exist() -> None:
    assert len(SAMPLES) >= 5
    assert shutil.which("true")  # the samples' commands are plain shell


RUNNING_INLINE = """\
# the scheduler runs this one
jobs = [
  # runs for the whole test
  { name = "long", cmd = "sleep 60", gpus = 0 },  # keeps the others waiting
  { name = "next", cmd = "echo next", gpus = 0, after = ["long"] },
]
"""


async def test_the_dashboard_actions_through_the_scheduler_on_an_inline_queue(
    tmp_path: Path,
) -> None:
    """The keys' own path (the Engine's commands, as the dashboard calls them): p holds a
    waiting job and writes nothing; a adds a job (the scheduler's fast append used to write a
    ``[[jobs]]`` table after the inline array: a file TOML refuses); e edits one."""
    import asyncio

    from gtui.core.model import JobState
    from gtui.core.sched.engine import Engine
    from tests.waiting import until as wait_for

    p = _copy(tmp_path, RUNNING_INLINE)
    engine = Engine(p)
    task = asyncio.create_task(engine.run())
    try:
        def long_runs() -> bool:
            return any(v.spec.name == "long" and v.record.state is JobState.RUNNING for v in engine.jobs())

        await wait_for(long_runs, timeout=30, what="long runs")
        await engine.pause(["next"])
        assert engine.view("next").record.state is JobState.HELD
        assert p.read_text() == RUNNING_INLINE  # holding is state, not the file
        await engine.resume(["next"])
        name = await engine.add({"name": "added-one", "cmd": "echo added", "gpus": 0, "after": ["long"]})
        assert name == "added-one"
        after_add = p.read_text()
        assert [j.name for j in load_queue(p).jobs] == ["long", "next", "added-one"]
        assert_only_job_changed(RUNNING_INLINE, after_add, "added-one")
        await engine.edit("next", {"priority": 2})
        assert_only_job_changed(after_add, p.read_text(), "next")
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()


@pytest.mark.parametrize(
    ("text", "inline"),
    [
        ("jobs = [", True),
        ("  jobs=[{cmd = 'true'}]", True),
        ('"jobs" = [', True),
        ("'jobs' = [", True),
        ("a = 1\n\tjobs\t=\t[", True),
        ("[settings]\n jobs = [\n", True),
        ("'jobs\" = [", False),  # quotes that do not pair
        ('"jobs = [', False),
        ('jobs" = [', False),
        ("xjobs = [", False),
        ("myjobs = [", False),
        ("# jobs = [", False),
        ("jobs = 3", False),
        ("[[jobs]]\nname = 'jobs = ['", False),
    ],
)
def test_an_inline_jobs_array_is_found_only_at_a_lines_start(text: str, inline: bool) -> None:
    """`gtui add` appends a [[jobs]] table only where no `jobs = [...]` array is (a table after
    the array would break the file); the check is a literal search, not a line-anchored one."""
    from gtui.core.queue.writeback import has_inline_jobs

    assert has_inline_jobs(text) is inline


BOM = b"\xef\xbb\xbf"
TABLES = """\
# A queue kept as [[jobs]] tables.
[[jobs]]
name = "prep"  # CPU only
cmd = "python prep.py"
gpus = 0

[[jobs]]
name = "train"
cmd = "python train.py"
mem = "20G"
after = ["prep"]

[[jobs]]
name = "eval"
cmd = "python eval.py"
"""
TABLES_ONLY = {"add-fast", "edit-text"}  # the fast append and the text edit take no inline array


def _add_known(p: Path, _name: str) -> None:
    q = load_queue(p)
    added = writeback.append_known(
        p,
        {"name": "added-one", "cmd": "echo added", "gpus": 0},
        runs=lambda text: True,
        settings=q.settings,
        known=[j.name for j in q.jobs],
        entry=max(j.entry for j in q.jobs) + 1,
    )
    assert added is not None  # the fast path itself, not append_job behind it


def _edit_text(p: Path, name: str) -> None:
    old = writeback.job_text(p, name)
    writeback.replace_job_text(p, name, old, old.text.replace("python train.py", "python t2.py"))


BOM_ACTIONS: dict[str, Action] = {
    **ACTIONS,
    "add": lambda p, n: writeback.append_job(p, {"name": "added-one", "cmd": "echo a", "gpus": 0})
    and None,
    "add-fast": _add_known,
    "edit-text": _edit_text,
}


@pytest.mark.parametrize("action", sorted(BOM_ACTIONS))
@pytest.mark.parametrize("text", [TABLES, INLINE], ids=["tables", "inline"])
def test_an_edit_keeps_the_files_byte_order_mark(tmp_path: Path, action: str, text: str) -> None:
    """A queue saved with a UTF-8 BOM (Notepad) keeps it through every write-back: the edit
    writes what it writes to the same file without one, the mark in front (dropping it would
    change the file outside the edited job)."""
    if text is INLINE and action in TABLES_ONLY:
        pytest.skip("[[jobs]] tables only")
    plain, marked = tmp_path / "plain", tmp_path / "marked"
    plain.mkdir()
    marked.mkdir()
    (plain / "q.toml").write_bytes(text.encode())
    (marked / "q.toml").write_bytes(BOM + text.encode())
    for d in (plain, marked):
        BOM_ACTIONS[action](d / "q.toml", "train")
    before = BOM + text.encode()
    after = (marked / "q.toml").read_bytes()
    assert after != before, "nothing was edited"
    assert after == BOM + (plain / "q.toml").read_bytes()
    assert "prep" in [j.name for j in load_queue(marked / "q.toml").jobs]  # read as before
