"""One reader of queue-file text, whose cache belongs to whoever holds it.

Every place that reads a queue file's TOML goes through gtui.core.queue.parse (a load, the
write-back of edits, the live edit of one job, ``gtui edit``'s text, the command line's sweep
names); the last parse and expansion are kept by a QueueReader its owner holds (the queue
source, one edit, one command), never by a module: a second owner reads the file again, and an
owner's ``forget`` drops what it kept.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from gtui.core.bus import EventBus
from gtui.core.queue import parse, writeback
from gtui.core.queue.queuefile import QueueFile, QueueReader, load_queue
from gtui.core.queue.source import QueueSource
from tests.conftest import PACKAGE_DIR as APP
from tests.conftest import write_queue

QUEUE = """\
[settings]
fake_gpus = "2x80G"

[[jobs]]
name = "a"
cmd = "python train.py --gpu {gpu}"
mem = "10G"

[[jobs]]
name = "b"
cmd = "echo b"
gpus = 0
after = ["a"]
"""


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every text the one reader reads (the plain path and tomllib's alike)."""
    seen: list[str] = []
    real = parse.read_document

    def counting(text: str, shown: str) -> parse.Document:
        seen.append(text)
        return real(text, shown)

    monkeypatch.setattr(parse, "read_document", counting)
    import gtui.core.queue.reader as reader_module

    monkeypatch.setattr(reader_module, "read_document", counting)
    monkeypatch.setattr(writeback, "read_document", counting)
    yield seen


def test_a_reader_reads_a_text_once_and_only_its_own(tmp_path: Path, reads: list[str]) -> None:
    """A second load of the same text through one reader reuses its parse (the start's and
    validate's second load, against the GPUs); another reader, or a load without one, reads
    the file again: nothing is kept at module level."""
    path = write_queue(tmp_path, QUEUE)
    mine = QueueReader()
    first = mine.load(path)
    again = mine.load(path, pool=[81920, 81920])
    assert len(reads) == 1
    assert first.jobs == again.jobs
    QueueReader().load(path)
    assert len(reads) == 2
    load_queue(path)
    load_queue(path)
    assert len(reads) == 4
    mine.forget()
    mine.load(path)
    assert len(reads) == 5


def test_the_queue_source_owns_the_cache_of_its_loads(tmp_path: Path, reads: list[str]) -> None:
    """The scheduler's start loads the file twice (without and then with the GPUs) through
    its source: one read. After ``forget`` (the start done) or a reload, nothing is kept."""
    path = write_queue(tmp_path, QUEUE)
    source = QueueSource(path, EventBus(), pool=lambda: None)
    _queue, text = source.first()
    source.first([81920, 81920])
    assert reads == [text]
    other = QueueSource(path, EventBus(), pool=lambda: None)
    other.first()
    assert len(reads) == 2  # another source: its own reader
    source.forget()
    source.first()
    assert len(reads) == 3
    source.taken(text)
    path.write_text(QUEUE.replace('"echo b"', '"echo bb"'))
    took = source.check(force=True, on_settled=lambda: None)
    assert took is not None and len(reads) == 4
    source.first()  # the reload forgot its parse: the file is read again
    assert len(reads) == 5


def test_an_edit_with_the_sources_reader_is_checked_and_reloaded_from_one_read(
    tmp_path: Path, reads: list[str]
) -> None:
    """An edit handed the source's reader (as the scheduler's edits are) reads the file as it
    is once, and its new text once, and the reload that follows reads nothing again."""
    path = write_queue(tmp_path, QUEUE)
    source = QueueSource(path, EventBus(), pool=lambda: None)
    _queue, text = source.first()
    source.taken(text)
    writeback.update_job(path, "b", {"priority": 2}, reader=source.reader)
    assert len(reads) == 2 and reads[0] == text
    took = source.check(force=True, on_settled=lambda: None)
    assert isinstance(took, QueueFile)
    assert [j.priority for j in took.jobs] == [0, 2]
    assert len(reads) == 2


# Who may read queue-file TOML: the one reader, and the two readers it is made of.
READERS = {"core/queue/parse.py", "core/queue/plaintoml.py", "core/queue/tomlscan.py"}
# tomllib elsewhere reads other files (the dashboard's own preferences, the fleet's list of
# hosts), not a queue file.
OTHER_TOML = {"ui/prefs.py", "fleet/config.py"}


def test_no_other_module_parses_toml_text() -> None:
    """No module but the reader calls ``tomllib.loads`` or takes the plain reader or the
    scanner: a second reader of the queue file would read some texts differently, or word
    their errors otherwise."""
    readers = {"gtui.core.queue.plaintoml": "parse_plain", "gtui.core.queue.tomlscan": "scan"}
    offenders = []
    for path in APP.rglob("*.py"):
        rel = str(path.relative_to(APP))
        if rel in READERS or rel in OTHER_TOML:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in readers:
                taken = {a.name for a in node.names} & {readers[node.module]}
                offenders.extend(f"{rel}:{node.lineno}: imports {n}" for n in taken)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and (node.func.value.id, node.func.attr) == ("tomllib", "loads")
            ):
                offenders.append(f"{rel}:{node.lineno}: tomllib.loads")
    assert not offenders, "\n".join(offenders)


def test_the_queue_package_keeps_no_module_state() -> None:
    """No module of gtui.core.queue rebinds a global or keeps a mutable container at module
    level (a cache there would outlive its owner and be shared by every reader)."""
    offenders = []
    for path in (APP / "core" / "queue").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                offenders.append(f"{path.name}:{node.lineno}: global {', '.join(node.names)}")
        for node in tree.body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign):
                targets, value = [node.target], node.value
            else:
                continue
            if [getattr(n, "id", None) for n in targets] == ["__all__"]:
                continue
            if isinstance(value, ast.Dict | ast.Set | ast.List | ast.DictComp | ast.SetComp):
                offenders.append(f"{path.name}:{node.lineno}: a mutable container")
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") in {
                "dict",
                "set",
                "list",
            }:
                offenders.append(f"{path.name}:{node.lineno}: a mutable container")
    assert not offenders, "\n".join(offenders)
