"""Edits keep what the user wrote: round trips over every sample queue and over
commented inline-array queues (``jobs = [{...}, ...]``), edited by each dashboard action.

Each file is edited by the very functions the dashboard's keys call (e: update_job, with the
fields the form changed, a cleared field as None and a new name as a rename; d: remove_job;
K / J / t: move_job; a: append_job; p on a waiting job holds it in the state db and writes
nothing), on real files, for every job of the file, and the result must differ from the original
only in the lines of the edited job: every comment, blank line and other job stays as written.
One allowance: a job that becomes followed by another in an inline array gains the comma TOML
needs after it.

A job expanded from a ``matrix`` entry shares its table with its siblings, and the edits do
what gtui.core.queue.writeback's docstring says: removing it takes its value out of the matrix
list (that line, and nothing else, changes); editing it (a field, a cleared field, a new name)
takes its value out and writes the job on its own right after the entry; moving it moves the
whole entry; with several matrix keys, editing or removing one combination is refused and the
file is left as it was. A refusal is expected only where the file would otherwise break or
change meaning (a job waits for the one removed or renamed), and is checked to happen.

Each edit also parses the file once, not twice (it took 641 ms on a 10,000-job file where one
parse is ~256 ms): the write-back reuses the parse its check of the file made.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import re
import shutil
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from gtui.core.errors import QueueFileError
from gtui.core.model import JobSpec
from gtui.core.queue import parse, writeback
from gtui.core.queue.queuefile import QueueFile, load_queue, scalar_text
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

# The same, with matrix entries: one key (its jobs can be edited one by one) and two keys.
INLINE_MATRIX = """\
# A sweep kept as one inline array, commented throughout.
jobs = [
  # the data first
  { name = "prep", cmd = "python prep.py", gpus = 0 },  # CPU only
  # one run per learning rate, each after prep
  { name = "lr-{lr}", cmd = "python train.py --lr {lr}", matrix = { lr = [0.1, 0.01, 0.001] }, mem = "8G", after = ["prep"], timeout = "2h" },  # three runs

  # a small grid: its combinations go together
  { name = "grid", cmd = "python grid.py --a {a} --b {b}", matrix = { a = [1, 2], b = ["x", "y"] }, gpus = 0 },
  # one evaluation per set, the set in its environment too
  { name = "eval-{set}", cmd = "python eval.py --set {set}", matrix = { set = ["val", "test"] }, mem = "4G", env = { SET = "{set}" } }
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
NOWHERE = Path("/nonexistent/q.toml")


def _load(text: str) -> QueueFile:
    return load_queue(NOWHERE, text=text)


def _job(text: str, name: str) -> JobSpec:
    return next(j for j in _load(text).jobs if j.name == name)


def _raw(text: str) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = tomllib.loads(text)["jobs"]
    return jobs


def _spans(text: str) -> dict[int, tuple[int, int]]:
    """Each entry's lines, 0-based [start, end): its ``[[jobs]]`` table (sub-tables included)
    or its inline element, with the comment lines right above it that belong to it."""
    lines = text.splitlines()
    first: dict[int, int] = {}
    for j in _load(text).jobs:
        first.setdefault(j.entry, j.line)
    out: dict[int, tuple[int, int]] = {}
    for entry, line in first.items():
        start = end = line - 1
        if lines[start].lstrip().startswith("[[jobs]]"):
            end = start + 1
            while end < len(lines) and not (
                lines[end].lstrip().startswith("[") and not lines[end].lstrip().startswith("[jobs.")
            ):
                end += 1
            while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
                end -= 1
        else:
            end = start + 1
        while start > 0 and lines[start - 1].lstrip().startswith("#"):
            start -= 1
        out[entry] = (start, end)
    return out


def _comma_free(lines: list[str]) -> list[str]:
    return [re.sub(r"\}\s*,", "}", line) for line in lines]


def _rest(text: str, name: str) -> list[str]:
    """The file's lines less those of the job's entry, blank lines left out, commas after inline
    tables left out: what must not change when that job is edited, moved, removed or added."""
    jobs = {j.name: j.entry for j in _load(text).jobs}
    lo, hi = _spans(text)[jobs[name]] if name in jobs else (0, 0)
    return _comma_free([line for i, line in enumerate(text.splitlines()) if not (lo <= i < hi) and line.strip()])


def assert_only_job_changed(before: str, after: str, name: str, new_name: str | None = None) -> None:
    """Everything but the job's lines is as it was, in the same order (whatever the job's new
    place, or name); the job's own lines hold the job."""
    old, new = _rest(before, name), _rest(after, new_name or name)
    if old != new:
        diff = "\n".join(difflib.unified_diff(old, new, lineterm="", n=1))
        raise AssertionError(f"{name}: lines outside it changed:\n{diff}")


def _applied(table: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """A job table with the edit's fields set (None, or an empty ``after``, deletes the key)."""
    out = copy.deepcopy(dict(table))
    for key, value in fields.items():
        if value is None or (key == "after" and not value):
            out.pop(key, None)
        else:
            out[key] = value
    return out


def _on_its_own(entry: Mapping[str, Any], job: JobSpec, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The table a matrix job split out of ``entry`` must have (writeback's docstring): the
    entry's keys but ``matrix``, with the job's own name, command, after, cwd and env, and the
    edit on top."""
    own = {k: v for k, v in entry.items() if k != "matrix"}
    own["name"], own["cmd"] = job.name, job.cmd
    if job.after:
        own["after"] = list(job.after)
    else:
        own.pop("after", None)
    if "cwd" in entry:
        own["cwd"] = job.cwd
    if job.env:
        own["env"] = dict(job.env)
    return _applied(own, fields)


def _less_value(entry: Mapping[str, Any], job: JobSpec) -> dict[str, Any]:
    """``entry`` with ``job``'s value taken out of its (one-key) matrix."""
    ((key, value),) = job.matrix.items()
    out = copy.deepcopy(dict(entry))
    out["matrix"][key] = [v for v in out["matrix"][key] if scalar_text(v) != value]
    return out


def _same_jobs(before: str, after: str, skip: set[str]) -> None:
    """Every job but ``skip`` is the very same job (its place in the file aside)."""

    def specs(text: str) -> dict[str, JobSpec]:
        return {
            j.name: dataclasses.replace(j, line=0, entry=0)
            for j in _load(text).jobs
            if j.name not in skip
        }

    assert specs(before) == specs(after)


def _matrix_line(before: str, entry: int) -> int:
    lo, hi = _spans(before)[entry]
    lines = before.splitlines()
    return next(i for i in range(lo, hi) if re.search(r"(^|[{,]\s*)matrix\s*=", lines[i].strip()))


def assert_value_dropped(before: str, after: str, name: str) -> None:
    """``name``'s value left its entry's matrix: that line changed, nothing else."""
    job = _job(before, name)
    b, a = _comma_free(before.splitlines()), _comma_free(after.splitlines())
    assert len(a) == len(b), f"{name}: lines were added or removed:\n{after}"
    changed = [i for i, (x, y) in enumerate(zip(b, a, strict=True)) if x != y]
    assert changed == [_matrix_line(before, job.entry)], f"{name}: lines {changed} changed"
    assert _raw(after)[job.entry] == _less_value(_raw(before)[job.entry], job)
    _same_jobs(before, after, {name})
    assert name not in [j.name for j in _load(after).jobs]


def assert_split(before: str, after: str, name: str, fields: Mapping[str, Any]) -> None:
    """``name``'s value left its entry's matrix (that line changed, nothing else), and the job,
    edited, is written on its own right after the entry."""
    job = _job(before, name)
    new_name = fields.get("name") or name
    split = _job(after, new_name)
    assert split.entry == job.entry + 1 and not split.matrix, f"{new_name} is not right after its entry"
    lines = after.splitlines()
    lo, hi = _spans(after)[split.entry]
    if not writeback.has_inline_jobs(before):
        assert lo > 0 and not lines[lo - 1].strip(), "a blank line sets the new table apart"
        lo -= 1
    without = _comma_free(lines[:lo] + lines[hi:])
    b = _comma_free(before.splitlines())
    assert len(without) == len(b), f"{name}: more than its own table was added:\n{after}"
    changed = [i for i, (x, y) in enumerate(zip(b, without, strict=True)) if x != y]
    assert changed == [_matrix_line(before, job.entry)], f"{name}: lines {changed} changed"
    raw_before, raw_after = _raw(before), _raw(after)
    assert raw_after[job.entry] == _less_value(raw_before[job.entry], job)
    assert raw_after[split.entry] == _on_its_own(raw_before[job.entry], job, fields)
    _same_jobs(before, after, {name, new_name})


def assert_entry_moved(before: str, after: str, name: str) -> None:
    """The job's entry moved whole (all its lines as written, its jobs together in matrix
    order); every other line stays in its order."""
    assert_only_job_changed(before, after, name)
    entry_b, entry_a = _job(before, name).entry, _job(after, name).entry
    (lo, hi), (lo2, hi2) = _spans(before)[entry_b], _spans(after)[entry_a]
    assert _comma_free(before.splitlines()[lo:hi]) == _comma_free(after.splitlines()[lo2:hi2])
    siblings = [j.name for j in _load(before).jobs if j.entry == entry_b]
    assert [j.name for j in _load(after).jobs if j.entry == entry_a] == siblings
    _same_jobs(before, after, set())


def _copy(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "q.toml"
    p.write_text(text)
    return p


def _clearable(table: Mapping[str, Any]) -> str:
    """A key the job's table sets that the form can clear (an emptied field is sent as None)."""
    keys = ("timeout", "mem", "after", "env", "priority", "retries", "gpus")
    return next((k for k in keys if k in table), "mem")


# The form's edits: the fields it sends for a job (its table as written, its name).
EDITS: dict[str, Callable[[Mapping[str, Any], str], dict[str, Any]]] = {
    "edit": lambda table, n: {"cmd": "python other.py --edited"},
    "edit-more": lambda table, n: {"priority": 5, "retries": 2},
    "clear": lambda table, n: {_clearable(table): None},
    "rename": lambda table, n: {"name": f"{n}-renamed"},
}
MOVES: dict[str, Callable[[Path, str], object]] = {
    "move-up": lambda p, n: writeback.move_job(p, n, "up"),
    "move-down": lambda p, n: writeback.move_job(p, n, "down"),
    "move-top": lambda p, n: writeback.move_job(p, n, "top"),
    "place-bottom": lambda p, n: writeback.place_job(p, n, "bottom"),
}
ACTIONS = sorted([*EDITS, "delete", *MOVES])


def _refusal(text: str, name: str, action: str) -> str | None:
    """Why the action on ``name`` must be refused (a pattern of the message), or None."""
    q = _load(text)
    job = next(j for j in q.jobs if j.name == name)
    waiters = [w.name for w in q.jobs if name in w.after]
    several_keys = len(job.matrix) > 1 and sum(j.entry == job.entry for j in q.jobs) > 1
    if action == "delete":
        if waiters:
            return f"{re.escape(name)} cannot be removed: .* for it"
        if several_keys:
            return "cannot be removed alone"
    if action in EDITS:
        if several_keys:
            return "cannot be edited alone"
        if action == "rename" and waiters:
            return f"no job named `{re.escape(name)}`"  # its waiters' after would name nothing
    return None


def _act(p: Path, name: str, action: str, fields: Mapping[str, Any]) -> None:
    if action in EDITS:
        writeback.update_job(p, name, fields)
    elif action == "delete":
        writeback.remove_job(p, name)
    else:
        MOVES[action](p, name)


def _cases() -> list[tuple[str, str]]:
    files = [("inline", INLINE), ("inline-matrix", INLINE_MATRIX)]
    files += [(p.name, p.read_text()) for p in SAMPLES]
    return files


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize(("label", "text"), _cases(), ids=[c[0] for c in _cases()])
def test_each_dashboard_edit_changes_only_the_edited_job(
    tmp_path: Path, label: str, text: str, action: str
) -> None:
    """Every job of the file, matrix entries' included, through each action."""
    raw = _raw(text)
    for job in _load(text).jobs:
        name = job.name
        p = _copy(tmp_path, text)
        fields = EDITS[action](raw[job.entry], name) if action in EDITS else {}
        refused = _refusal(text, name, action)
        if refused:
            with pytest.raises(QueueFileError, match=refused):
                _act(p, name, action, fields)
            assert p.read_text() == text, f"{name}: a refused {action} changed the file"
            continue
        _act(p, name, action, fields)
        after = p.read_text()
        load_queue(p)  # still a valid queue
        single = sum(j.entry == job.entry for j in _load(text).jobs) == 1
        if action in MOVES:
            assert_entry_moved(text, after, name)
        elif single and action == "delete":
            assert_only_job_changed(text, after, name)
            assert name not in [j.name for j in _load(after).jobs]
            _same_jobs(text, after, {name})
        elif single:
            new_name = fields.get("name") or name
            assert_only_job_changed(text, after, name, new_name)
            assert _raw(after)[_job(after, new_name).entry] == _applied(raw[job.entry], fields)
            _same_jobs(text, after, {name, new_name})
        elif action == "delete":
            assert_value_dropped(text, after, name)
        else:
            assert_split(text, after, name, fields)


def _full_line_comments(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("#")]


def _one_key_entries(text: str) -> list[list[str]]:
    """The jobs of each matrix entry with one key, for entries of more than one job."""
    entries: dict[int, list[JobSpec]] = {}
    for j in _load(text).jobs:
        entries.setdefault(j.entry, []).append(j)
    return [[j.name for j in js] for js in entries.values() if len(js) > 1 and len(js[0].matrix) == 1]


MATRIX_CASES = [(label, text) for label, text in _cases() if _one_key_entries(text)]


@pytest.mark.parametrize(("label", "text"), MATRIX_CASES, ids=[c[0] for c in MATRIX_CASES])
def test_editing_each_job_of_a_matrix_entry_in_turn(tmp_path: Path, label: str, text: str) -> None:
    """Each job of an entry edited in turn: each is split out on its own; the last one left
    turns the entry itself into its table, in place, so the entry's comments stay with it (they
    were lost with the entry). No comment of the file is lost on the way."""
    for names in _one_key_entries(text):
        p = _copy(tmp_path, text)
        *firsts, last = names
        for n in firsts:
            before = p.read_text()
            writeback.update_job(p, n, {"priority": 7})
            assert_split(before, p.read_text(), n, {"priority": 7})
        before = p.read_text()
        job = _job(before, last)
        writeback.update_job(p, last, {"priority": 7})
        after = p.read_text()
        assert _job(after, last).entry == job.entry, "the last job stays where its entry was"
        lo, hi = _spans(before)[job.entry]
        lo2, hi2 = _spans(after)[job.entry]
        b, a = before.splitlines(), after.splitlines()
        assert _comma_free(b[:lo] + b[hi:]) == _comma_free(a[:lo2] + a[hi2:]), "lines outside the entry changed"
        # the entry's comments, and its lines whose keys did not change, are kept as written
        kept = [line for line in b[lo:hi] if not re.match(r"\s*(name|cmd|matrix|after|env|cwd)\s*=", line)]
        if not writeback.has_inline_jobs(before):
            assert [line for line in a[lo2:hi2] if line in kept] == kept
        assert _raw(after)[job.entry] == _on_its_own(_raw(before)[job.entry], job, {"priority": 7})
        _same_jobs(before, after, {last})
        assert [j.name for j in _load(after).jobs if j.name in names] == [last, *reversed(firsts)]
        assert _full_line_comments(after) == _full_line_comments(text)


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
    real_plain, real_loads = parse.parse_plain, tomllib.loads
    parsed: list[str] = []

    def plain(t: str, *a: Any, **k: Any) -> Any:
        got = real_plain(t, *a, **k)
        if got is not None:  # the fast parser of plain [[jobs]] files took it
            parsed.append(t)
        return got

    def loads(t: str, *a: Any, **k: Any) -> Any:
        parsed.append(t)
        return real_loads(t, *a, **k)

    monkeypatch.setattr(parse, "parse_plain", plain)
    monkeypatch.setattr(tomllib, "loads", loads)
    for text in (INLINE, (REPO / "sample_queues" / "pipeline.toml").read_text()):
        p = _copy(tmp_path, text)
        name = _load(text).jobs[0].name
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


TEMPLATE_WAIT = """\
# one run per dataset
[[jobs]]
name = "train-{ds}"
cmd = "python train.py --data {ds}"
matrix = { ds = ["a", "b"] }
gpus = 0

# waits for every train job: `after` names the entry as written
[[jobs]]
name = "summary"
cmd = "echo done"
gpus = 0
after = ["train-{ds}"]
"""


@pytest.mark.parametrize("inline", [False, True], ids=["tables", "inline"])
def test_a_job_waited_for_through_its_entrys_name_is_not_split_out(
    tmp_path: Path, inline: bool
) -> None:
    """summary waits for every job of train-{ds}; split out, train-a would no longer be one of
    them and summary could start before it ends. The edit is refused, the file kept; editing
    the entry (gtui edit) or naming the runs in summary's after is the way."""
    text = TEMPLATE_WAIT
    if inline:
        text = """\
jobs = [
  # one run per dataset
  { name = "train-{ds}", cmd = "python train.py --data {ds}", matrix = { ds = ["a", "b"] }, gpus = 0 },
  # waits for every train job
  { name = "summary", cmd = "echo done", gpus = 0, after = ["train-{ds}"] },
]
"""
    p = _copy(tmp_path, text)
    assert set(_job(text, "summary").after) == {"train-a", "train-b"}
    for fields in ({"cmd": "python train.py --data a --fast"}, {"priority": 2}, {"gpus": None}):
        with pytest.raises(QueueFileError, match=r"summary waits for every job of train-\{ds\}"):
            writeback.update_job(p, "train-a", fields)
        assert p.read_text() == text
    writeback.move_job(p, "summary", "top")  # the rest still works
    assert [j.name for j in load_queue(p).jobs] == ["summary", "train-a", "train-b"]


def test_an_edit_that_changes_nothing_leaves_a_matrix_entry_whole(tmp_path: Path) -> None:
    """Fields equal to what the job has already: no split, the file as it was."""
    text = (REPO / "sample_queues" / "ddp.toml").read_text()
    p = _copy(tmp_path, text)
    writeback.update_job(p, "ddp-balanced", {})
    writeback.update_job(p, "ddp-balanced", {"gpus": 2, "mem": "22G", "priority": None})
    writeback.update_job(p, "ddp-balanced", {"name": "ddp-balanced"})
    assert p.read_text() == text


ONE_LEFT = """\
[[jobs]]
name = "first"
cmd = "echo first"
gpus = 0

# the only run left of a sweep
# (its entry's own comment)
[[jobs]]
name = "run-{x}"
cmd = "python run.py --x {x}"  # the command
matrix = { x = ["a"] }  # one value
gpus = 0
# a note inside the table
timeout = "1h"
# a note after it, before a blank line

[[jobs]]
name = "last"
cmd = "echo last"
gpus = 0
"""


def test_the_last_job_of_a_matrix_entry_is_edited_in_place(tmp_path: Path) -> None:
    """An entry with one job left becomes that job's table where it is: every comment of it,
    and each line whose key did not change, stays as written (the entry went, and with it its
    comments, before the split job was written after where it had been)."""
    p = _copy(tmp_path, ONE_LEFT)
    writeback.update_job(p, "run-a", {"priority": 3})
    assert p.read_text() == ONE_LEFT.replace(
        'name = "run-{x}"\ncmd = "python run.py --x {x}"  # the command\nmatrix = { x = ["a"] }  # one value\n',
        'name = "run-a"\ncmd = "python run.py --x a"  # the command\n',
    ).replace("before a blank line\n", "before a blank line\npriority = 3\n")  # a new key goes last, as for any job
    assert [j.name for j in load_queue(p).jobs] == ["first", "run-a", "last"]


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


Action = Callable[[Path, str], None]


def _dashboard_action(action: str) -> Action:
    """One of ACTIONS as a callable on (file, job name), with the fields the form would send."""

    def run(p: Path, name: str) -> None:
        tables = _raw(p.read_text(encoding="utf-8-sig"))
        table = next((t for t in tables if t.get("name") == name), {})
        _act(p, name, action, EDITS[action](table, name) if action in EDITS else {})

    return run


BOM_ACTIONS: dict[str, Action] = {
    **{action: _dashboard_action(action) for action in ACTIONS},
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
