"""A live edit of one job is taken without reading the whole queue file again.

The new text is compared with the one the scheduler runs: when only one ``[[jobs]]`` table
changed (same lines, same explicit name, no matrix) only that table is parsed and checked, as
``gtui add`` checks a new entry; anything else is a whole load, as before. The engine tests run
real files through a real scheduler on the in-memory executor and count whole loads.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gtui.core.errors import GtuiError
from gtui.core.exec.memory import MemoryExecutor
from gtui.core.queue.incremental import edited_job, one_table
from gtui.core.queue.queuefile import load_queue
from gtui.core.queue.reader import QueueReader
from gtui.core.sched.engine import Engine
from tests.conftest import write_queue
from tests.waiting import until

SETTINGS = '[settings]\npoll = "0.1s"\nmax_parallel = 1\n\n'


def body(n: int, mem: dict[int, str] | None = None, cmd: dict[int, str] | None = None) -> str:
    mem, cmd = mem or {}, cmd or {}
    return SETTINGS + "".join(
        f'[[jobs]]\nname = "j{i}"\ncmd = "{cmd.get(i, "sleep 3600")}"\ngpus = 1\n'
        f'mem = "{mem.get(i, "10G")}"\n\n'
        for i in range(n)
    )


def test_one_table_finds_the_edited_table_and_only_it() -> None:
    old = body(50)
    change = one_table(old, body(50, mem={20: "12G"}))
    assert change is not None
    assert change.old["name"] == "j20" and change.new["mem"] == "12G"
    assert change.line == old.splitlines().index('name = "j20"')  # the header, 1-based
    assert one_table(old, body(50, mem={0: "12G"})) is not None  # the first table
    assert one_table(old, body(50, mem={49: "12G"})) is not None  # the last one
    # Two tables, the settings, a header, lines added: only a whole load can say.
    assert one_table(old, body(50, mem={3: "12G", 4: "12G"})) is None
    assert one_table(old, old.replace("max_parallel = 1", "max_parallel = 2")) is None
    assert one_table(old, old.replace("[[jobs]]", "[[jobz]]", 1)) is None
    assert one_table(old, old.replace('name = "j7"\n', 'name = "j7"\nretries = 1\n')) is None
    assert one_table(old, old) is None


@pytest.mark.parametrize(
    "edit",
    [
        {"mem": {20: "12G"}},
        {"cmd": {20: "python train.py --lr 0.1"}},
        {"mem": {0: "500M"}},
    ],
)
def test_the_edited_job_is_the_one_a_whole_load_gives(tmp_path: Path, edit: dict) -> None:
    q = tmp_path / "q.toml"
    old, new = body(50), body(50, **edit)
    before = load_queue(q, text=old)
    got = edited_job(q, old, new, before.settings, {j.name: j for j in before.jobs}, None)
    assert got is not None
    after = {j.name: j for j in load_queue(q, text=new).jobs}
    assert got[0] == after[got[0].name]


def test_a_renamed_or_matrix_job_needs_the_whole_load(tmp_path: Path) -> None:
    q = tmp_path / "q.toml"
    old = body(5)
    specs = {j.name: j for j in load_queue(q, text=old).jobs}
    renamed = old.replace('name = "j2"', 'name = "k2"')
    assert edited_job(q, old, renamed, load_queue(q, text=old).settings, specs, None) is None


def test_a_broken_edit_says_where(tmp_path: Path) -> None:
    q = tmp_path / "q.toml"
    old = body(5)
    first = load_queue(q, text=old)
    specs = {j.name: j for j in first.jobs}
    with pytest.raises(GtuiError) as err:
        edited_job(q, old, body(5, mem={2: "lots"}), first.settings, specs, None)
    with pytest.raises(GtuiError) as whole:
        load_queue(q, text=body(5, mem={2: "lots"}))
    assert str(err.value) == str(whole.value)  # the same words, file, line and key


def count_loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the whole loads the queue source makes (through its reader)."""
    calls: list[int] = []
    real = QueueReader.load

    def counting(self: QueueReader, *a: object, **kw: object) -> object:
        calls.append(1)
        return real(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(QueueReader, "load", counting)
    return calls


async def test_the_scheduler_takes_one_jobs_edit_without_a_whole_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    q = write_queue(tmp_path, body(40))
    engine = Engine(q, fake_gpus="1x80G", executor=MemoryExecutor(), control=False)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: engine.started and engine.view("j0").record.active)
        loads = count_loads(monkeypatch)
        q.write_text(body(40, mem={30: "30G"}, cmd={}))
        await engine.reload()
        assert engine.view("j30").spec.mem_mib == 30 * 1024
        assert engine.view("j30").record.mem_mib == 30 * 1024
        assert loads == []
        # The planner changed that one Candidate in place: the same as made anew from all.
        planner = engine._planner
        assert planner is not None
        kept = list(planner._waiting_candidates())
        assert planner._cands_at == engine._book.version  # followed, not rebuilt
        planner._cands_at = -1
        assert planner._waiting_candidates() == kept
        assert next(c for c in kept if c.name == "j30").mem_mib == 30 * 1024
        # The running job keeps its spec; the edit waits for its next attempt.
        q.write_text(body(40, mem={30: "30G", 0: "20G"}))
        await engine.reload()
        assert engine.view("j0").spec.mem_mib == 10 * 1024
        assert engine._book.pending_specs["j0"].mem_mib == 20 * 1024
        assert loads == []
        # A broken edit: said, the last good version kept.
        q.write_text(body(40, mem={30: "30G", 0: "20G", 5: "lots"}))
        await engine.reload()
        assert engine.view("j5").spec.mem_mib == 10 * 1024
        assert engine._source.error is not None
        # Two tables at once: the whole load, as before.
        q.write_text(body(40, mem={30: "31G", 0: "20G", 6: "11G"}))
        await engine.reload()
        assert loads == [1]
        assert engine.view("j30").spec.mem_mib == 31 * 1024
        assert engine.view("j6").spec.mem_mib == 11 * 1024
    finally:
        await engine.shutdown(kill_jobs=True)
        task.cancel()
