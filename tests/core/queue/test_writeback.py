"""Write-back: edits reach the queue file atomically, checked first, with the user's comments."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gtui.core.errors import GtuiError, QueueFileError
from gtui.core.queue.queuefile import load_queue
from gtui.core.queue.writeback import append_job, move_job, remove_job, update_job

QUEUE = """\
# My experiments -- keep this header
[settings]
mode = "pack"   # pack the evals

# ---- training ----

# the baseline, run it first
[[jobs]]
name = "base"      # short name
cmd = "python train.py --gpu {gpu}"
mem = "20G"        # measured 17G

[jobs.env]
SEED = "1"         # fixed seed

# prep is CPU only
[[jobs]]
name = "prep"
cmd = "python prep.py"
gpus = 0
# (prep writes data/)

# ---- evaluation ----

[[jobs]]
name = "eval"
cmd = "python eval.py"
after = ["base"]   # needs the baseline
# trailing note about eval
"""

COMMENTS = [
    "# My experiments -- keep this header",
    "# pack the evals",
    "# ---- training ----",
    "# the baseline, run it first",
    "# short name",
    "# measured 17G",
    "# fixed seed",
    "# prep is CPU only",
    "# (prep writes data/)",
    "# ---- evaluation ----",
    "# needs the baseline",
    "# trailing note about eval",
]


@pytest.fixture
def q(tmp_path: Path) -> Path:
    path = tmp_path / "q.toml"
    path.write_text(QUEUE)
    return path


def names(path: Path) -> list[str]:
    return [j.name for j in load_queue(path).jobs]


def comments_kept(path: Path, *, except_: tuple[str, ...] = ()) -> None:
    text = path.read_text()
    for c in COMMENTS:
        if c not in except_:
            assert c in text, f"lost {c!r}:\n{text}"


def test_append_keeps_everything_and_goes_last(q: Path) -> None:
    name = append_job(q, {"name": "new", "cmd": "echo hi", "gpus": 0, "env": {"A": "1"}})
    assert name == "new"
    assert names(q) == ["base", "prep", "eval", "new"]
    comments_kept(q)
    text = q.read_text()
    assert text.startswith(QUEUE.split("# trailing note")[0].rstrip("\n"))
    assert load_queue(q).jobs[-1].env == {"A": "1"}


def test_append_without_a_name_returns_the_derived_one(q: Path) -> None:
    name = append_job(q, {"cmd": "python train.py --lr 0.5", "mem": "8G"})
    assert name == names(q)[-1] and name.startswith("train-0.5-")


def test_append_a_matrix_entry(q: Path) -> None:
    name = append_job(q, {"name": "s{lr}", "cmd": "t --lr {lr}", "matrix": {"lr": [1, 2]}})
    assert name == "s1" and names(q)[-2:] == ["s1", "s2"]


def test_append_to_an_empty_or_settings_only_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    append_job(empty, {"cmd": "echo a", "name": "a"})
    assert names(empty) == ["a"]
    only = tmp_path / "only.toml"
    only.write_text(
        '[settings]\nmode = "pack"  # keep\n[[diagnose]]\nkind = "k"\nexit_codes = [3]\n'
    )
    append_job(only, {"cmd": "echo a", "name": "a"})
    assert names(only) == ["a"] and "# keep" in only.read_text()
    assert load_queue(only).settings.diagnose[0].kind == "k"


def test_a_bad_append_never_reaches_the_disk(q: Path) -> None:
    before = q.read_bytes()
    mtime = q.stat().st_mtime_ns
    for fields, words in (
        ({"name": "base", "cmd": "x"}, "already the name"),
        ({"cmd": "x", "after": ["nope"]}, "no job named `nope`"),
        ({"cmd": "x", "mem": "lots"}, "expected a size"),
        ({"cmd": "x", "gpus": -1}, "must be 0 or more"),
        ({"cmd": "x", "mme": "1G"}, "did you mean `mem`"),
    ):
        with pytest.raises(QueueFileError, match=words):
            append_job(q, fields)
    with pytest.raises(QueueFileError, match="the pool has 1"):
        append_job(q, {"cmd": "x", "gpus": 2}, pool=[81920])
    assert q.read_bytes() == before and q.stat().st_mtime_ns == mtime
    assert not [p for p in q.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_broken_file_is_refused(q: Path) -> None:
    q.write_text(QUEUE.replace('cmd = "python prep.py"', 'cmmd = "python prep.py"'))
    before = q.read_bytes()
    with pytest.raises(QueueFileError, match="fix the file first"):
        append_job(q, {"cmd": "echo a"})
    assert q.read_bytes() == before


def test_update_keeps_comments_and_layout(q: Path) -> None:
    update_job(q, "base", {"mem": "24G", "priority": 3, "env": {"SEED": "2", "X": "y"}})
    job = load_queue(q).jobs[0]
    assert (job.mem_mib, job.priority, job.env) == (24 * 1024, 3, {"SEED": "2", "X": "y"})
    text = q.read_text()
    assert 'mem = "24G"        # measured 17G' in text
    comments_kept(q, except_=("# fixed seed",))  # the value it described changed
    assert names(q) == ["base", "prep", "eval"]


def test_update_unchanged_values_stay_as_written(q: Path) -> None:
    q.write_text(QUEUE.replace('mem = "20G"', "mem = 20"))
    update_job(q, "base", {"mem": 20, "cmd": "python train.py --gpu {gpu}", "priority": 1})
    assert "mem = 20        # measured 17G" in q.read_text()


def test_update_deletes_keys_given_none(q: Path) -> None:
    update_job(q, "eval", {"after": None, "mem": None})
    job = load_queue(q).jobs[2]
    assert job.after == () and "needs the baseline" not in q.read_text()
    comments_kept(q, except_=("# needs the baseline",))


def test_a_bad_update_never_reaches_the_disk(q: Path) -> None:
    before = q.read_bytes()
    with pytest.raises(QueueFileError, match="cycle"):
        update_job(q, "base", {"after": ["eval"]})
    with pytest.raises(QueueFileError, match="expected a duration"):
        update_job(q, "base", {"timeout": "soon"})
    with pytest.raises(GtuiError, match="no job named 'nope'"):
        update_job(q, "nope", {"priority": 1})
    assert q.read_bytes() == before


def test_rename_through_update(q: Path) -> None:
    update_job(q, "prep", {"name": "prep-data"})
    assert names(q) == ["base", "prep-data", "eval"]


@pytest.mark.parametrize(
    ("name", "order", "gone"),
    [
        (
            "base",
            ["prep", "eval"],
            ("# the baseline, run it first", "# short name", "# measured 17G", "# fixed seed"),
        ),
        ("prep", ["base", "eval"], ("# prep is CPU only", "# (prep writes data/)")),
        ("eval", ["base", "prep"], ("# needs the baseline", "# trailing note about eval")),
    ],
)
def test_remove(q: Path, name: str, order: list[str], gone: tuple[str, ...]) -> None:
    if name == "base":
        before = q.read_bytes()
        with pytest.raises(QueueFileError, match="eval waits for it"):
            remove_job(q, name)
        assert q.read_bytes() == before
        update_job(q, "eval", {"after": []})
        gone = (*gone, "# needs the baseline")
    remove_job(q, name)
    assert names(q) == order
    comments_kept(q, except_=gone)
    for c in gone:
        assert c not in q.read_text()


def test_remove_everything_leaves_the_rest(q: Path) -> None:
    for name in ("eval", "prep", "base"):
        remove_job(q, name)
    assert names(q) == []
    text = q.read_text()
    assert "# My experiments" in text and "# ---- evaluation ----" in text


@pytest.mark.parametrize(
    ("name", "where", "order"),
    [
        ("prep", "up", ["prep", "base", "eval"]),
        ("prep", "down", ["base", "eval", "prep"]),
        ("eval", "top", ["eval", "base", "prep"]),
        ("base", "up", ["base", "prep", "eval"]),
        ("eval", "down", ["base", "prep", "eval"]),
    ],
)
def test_move(q: Path, name: str, where: str, order: list[str]) -> None:
    move_job(q, name, where)  # type: ignore[arg-type]
    assert names(q) == order
    comments_kept(q)


def test_a_moved_job_takes_its_own_comments_and_section_dividers_stay(q: Path) -> None:
    move_job(q, "prep", "up")
    text = q.read_text()
    # prep's own comments come with it, above the baseline's
    assert (
        text.index("# prep is CPU only")
        < text.index('name = "prep"')
        < text.index("# the baseline")
    )
    assert text.index("# (prep writes data/)") < text.index('name = "base"')
    # the divider lines stay where they were
    assert text.index("# ---- training ----") < text.index("# prep is CPU only")
    assert (
        text.index('SEED = "1"')
        < text.index("# ---- evaluation ----")
        < text.index('name = "eval"')
    )
    # sub-tables move with their job
    jobs = load_queue(q).jobs
    assert jobs[1].name == "base" and jobs[1].env == {"SEED": "1"}


def test_moves_and_back_restore_the_file(q: Path) -> None:
    move_job(q, "eval", "up")
    move_job(q, "eval", "up")
    move_job(q, "eval", "down")
    move_job(q, "eval", "down")
    assert q.read_text() == QUEUE


MATRIX = """\
[[jobs]]
name = "first"
cmd = "echo first"

# the sweep
[[jobs]]
name = "sweep-lr{lr}"
cmd = "python train.py --lr {lr}"
matrix = { lr = [0.1, 0.01, 0.001] }  # three rates
mem = "12G"

[[jobs]]
name = "grid"
cmd = "python train.py --lr {lr} --bs {bs}"
matrix = { lr = [0.1], bs = [32, 64] }
gpus = 0
"""


@pytest.fixture
def m(tmp_path: Path) -> Path:
    path = tmp_path / "m.toml"
    path.write_text(MATRIX)
    return path


def test_remove_one_matrix_job_drops_its_value(m: Path) -> None:
    remove_job(m, "sweep-lr0.01")
    assert names(m)[:3] == ["first", "sweep-lr0.1", "sweep-lr0.001"]
    assert "# three rates" in m.read_text() and "# the sweep" in m.read_text()
    remove_job(m, "sweep-lr0.1")
    remove_job(m, "sweep-lr0.001")
    assert names(m) == ["first", "grid-lr=0.1-bs=32", "grid-lr=0.1-bs=64"]
    assert "sweep" not in m.read_text()


def test_a_combination_of_a_several_key_matrix_is_refused(m: Path) -> None:
    before = m.read_bytes()
    with pytest.raises(QueueFileError, match="cannot be removed alone") as e:
        remove_job(m, "grid-lr=0.1-bs=32")
    assert e.value.key == "matrix" and e.value.line == 12
    with pytest.raises(QueueFileError, match="cannot be edited alone"):
        update_job(m, "grid-lr=0.1-bs=64", {"priority": 1})
    assert m.read_bytes() == before


def test_editing_one_matrix_job_splits_it_out(m: Path) -> None:
    update_job(m, "sweep-lr0.01", {"priority": 9, "mem": "16G"})
    jobs = {j.name: j for j in load_queue(m).jobs}
    assert [n for n in jobs][:4] == ["first", "sweep-lr0.1", "sweep-lr0.001", "sweep-lr0.01"]
    split = jobs["sweep-lr0.01"]
    assert (split.priority, split.mem_mib, split.cmd) == (9, 16 * 1024, "python train.py --lr 0.01")
    assert not split.matrix
    assert (jobs["sweep-lr0.1"].priority, jobs["sweep-lr0.1"].mem_mib) == (0, 12 * 1024)
    assert "# three rates" in m.read_text()


def test_moving_a_matrix_job_moves_its_entry(m: Path) -> None:
    move_job(m, "grid-lr=0.1-bs=64", "top")
    assert names(m) == [
        "grid-lr=0.1-bs=32",
        "grid-lr=0.1-bs=64",
        "first",
        "sweep-lr0.1",
        "sweep-lr0.01",
        "sweep-lr0.001",
    ]
    move_job(m, "sweep-lr0.001", "up")
    assert names(m)[:5] == [
        "grid-lr=0.1-bs=32",
        "grid-lr=0.1-bs=64",
        "sweep-lr0.1",
        "sweep-lr0.01",
        "sweep-lr0.001",
    ]
    text = m.read_text()
    assert (
        text.index("# the sweep")
        < text.index('name = "sweep-lr{lr}"')
        < text.index('name = "first"')
    )


def test_inline_jobs_array(tmp_path: Path) -> None:
    path = tmp_path / "inline.toml"
    path.write_text(
        textwrap.dedent(
            """\
            # inline style
            jobs = [
              { name = "a", cmd = "echo a" },
              { name = "b", cmd = "echo b", matrix = { x = [1, 2] } },
            ]
            """
        )
    )
    append_job(path, {"name": "c", "cmd": "echo c"})
    move_job(path, "c", "top")
    update_job(path, "a", {"priority": 2})
    remove_job(path, "b-x=1")
    assert names(path) == ["c", "a", "b-x=2"]
    assert load_queue(path).jobs[1].priority == 2 and "# inline style" in path.read_text()


def test_mode_symlink_and_crlf_are_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_bytes(b'# crlf file\r\n[[jobs]]\r\nname = "a"\r\ncmd = "echo a"\r\n')
    os.chmod(real, 0o600)
    link = tmp_path / "link.toml"
    link.symlink_to(real)
    append_job(link, {"name": "b", "cmd": "echo b"})
    assert link.is_symlink() and names(real) == ["a", "b"]
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    data = real.read_bytes()
    assert b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    """Two real processes append at once: the file lock serialises them."""
    path = tmp_path / "q.toml"
    path.write_text("# shared\n")
    code = (
        "import sys\n"
        "from gtui.core.queue.writeback import append_job\n"
        "for i in range(15):\n"
        "    append_job(sys.argv[1], {'name': f'{sys.argv[2]}-{i}', 'cmd': 'true', 'gpus': 0})\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), tag]) for tag in ("p", "q")]
    for p in procs:
        assert p.wait(timeout=120) == 0
    got = names(path)
    assert len(got) == 30 and {f"p-{i}" for i in range(15)} <= set(got)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
