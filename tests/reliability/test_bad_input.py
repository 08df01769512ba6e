"""Bad input: generated queue files and command lines.

Each property runs ``GTUI_FUZZ_EXAMPLES`` cases (150 by default, so CI stays quick; ``python -m
soak`` runs thousands): exit 2 with a plain message for a wrong input, never a traceback, never
a changed file. The strategies and checks live in tests/reliability/fuzz.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gtui.core.errors import GtuiError
from gtui.core.sched.engine import Engine
from tests.reliability import fuzz

EXAMPLES = int(os.environ.get("GTUI_FUZZ_EXAMPLES", "150"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(fuzz.nested_queue())
def test_a_file_nested_to_break_the_reader_is_refused_in_one_line(text: str) -> None:
    fuzz.check_nested(text)


@settings(max_examples=max(20, EXAMPLES // 5), deadline=None, database=None)
@given(sample=st.sampled_from(fuzz.SAMPLES), cut=st.floats(0.0, 1.0))
async def test_any_prefix_of_a_queue_file_deletes_no_record(
    tmp_path_factory: pytest.TempPathFactory, sample: Path, cut: float
) -> None:
    """Scenario 14.2, generated: what a truncating writer leaves for a moment (any prefix of a
    sample queue, the empty one included), taken by a running engine, then the whole file back:
    no record is deleted and a job that had ended stays ended (no re-run)."""
    d = tmp_path_factory.mktemp("prefix")
    text = sample.read_text()
    q = d / "q.toml"
    q.write_text(text)
    engine = Engine(q, fake_gpus="8x80G", dispatch=False, control=False)
    await engine.start()
    try:
        names = [v.record.name for v in engine.jobs()]
        assert engine._book.store is not None
        ended = names[: max(1, len(names) // 2)]
        await engine.kill(ended)  # waiting jobs: marked killed, an end state (no scheduler runs)
        engine._book.save_deferred()  # never-run jobs' records are saved after the first pass
        saved = set(engine._book.store.load())
        assert set(ended) <= saved
        q.write_text(text[: int(len(text) * cut)])
        engine.parts.intake.reload_if_changed(force=True)
        q.write_text(text)
        engine.parts.intake.reload_if_changed(force=True)
        stored = engine._book.store.load()
        assert saved <= set(stored), "a record was deleted"
        assert all(stored[n].state.value == "killed" for n in ended)
        assert {v.record.name for v in engine.jobs()} == set(names)
        assert all(engine.view(n).record.state.value == "killed" for n in ended)
    finally:
        await engine.shutdown()


@SETTINGS
@given(fuzz.WRONG_VALUE)
def test_a_queue_file_wrong_in_one_way_is_refused(case: tuple[str, Any]) -> None:
    fuzz.check_wrong_queue(*case)


@SETTINGS
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode)))
def test_any_bytes_as_a_queue_file(data: bytes) -> None:
    fuzz.check_any_text(data)


@SETTINGS
@given(fuzz.edited_sample())
def test_randomly_edited_sample_queues(sample: tuple[str, str]) -> None:
    fuzz.check_edited_sample(sample)


@SETTINGS
@given(fuzz.wrong_command_line())
def test_a_wrong_command_line_is_refused(case: tuple[list[str], str | None]) -> None:
    fuzz.check_wrong_command_line(case)


def test_nul_in_a_queue_file_is_refused_before_it_can_crash_a_run() -> None:
    """Found by the fuzzing: TOML allows \\u0000, and a job's cmd, cwd or env holding one
    crashed `gtui run` (ValueError from Popen) after `gtui validate` had accepted it."""
    for where in ("jobs.cmd", "jobs.cwd", "settings.log_dir"):
        fuzz.check_wrong_queue(where, "a\0b")
    fuzz.check_wrong_queue("jobs.env", {"A": "x\0y"})
    fuzz.check_wrong_queue("jobs.matrix", {"x": ["a\0"]})


async def test_adding_a_job_no_gpu_can_take_is_refused_and_the_file_kept(tmp_path: Path) -> None:
    """Found by the fuzzing: `gtui add --gpus 9` on a 2-GPU queue (and the dashboard's add
    form) wrote the job, and the next `gtui run` refused the whole file (gpus > pool)."""
    queue = tmp_path / "q.toml"
    queue.write_text(fuzz.VALID_QUEUE)
    before = queue.read_bytes()
    for argv in (
        ["add", str(queue), "--gpus", "9", "--", "echo", "x"],
        ["add", str(queue), "--mem", "200G", "--", "echo", "x"],
    ):
        fuzz.check_refused(fuzz.run_cli(argv), "q.toml", argv)
    assert queue.read_bytes() == before
    engine = Engine(queue, control=False, dispatch=False)
    await engine.start()
    try:
        for fields in ({"cmd": "echo x", "gpus": 9}, {"cmd": "echo x", "mem": "200G"}):
            with pytest.raises(GtuiError, match="the job was not added"):
                await engine.add(dict(fields))
        assert queue.read_bytes() == before
        assert await engine.add({"cmd": "echo fits", "gpus": 2, "mem": "20G"})
    finally:
        await engine.shutdown()
    assert fuzz.run_cli(["validate", str(queue)]).code == 0
