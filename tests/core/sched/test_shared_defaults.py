"""The one empty env / matrix / warnings / peaks that every job without any shares:
no change can reach another job through them, and what adds to a record's lists makes a new one.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from pathlib import Path

import pytest

from gtui.core.api import freeze
from gtui.core.model import NO_ITEMS, NO_STRINGS, JobRecord, JobSpec, JobState, Resume, copy_record
from gtui.core.sched.occupancy import record_gpu_peaks
from gtui.core.sched.outcome import leftover_warning
from gtui.core.state.store import Store, record_from_json, record_to_json


def test_specs_share_one_empty_env_and_matrix_that_refuses_changes() -> None:
    a = JobSpec(name="a", cmd="x")
    b = JobSpec(name="b", cmd="y", env={}, matrix={})  # an empty one given: swapped
    assert a.env is b.env is a.matrix is b.matrix is NO_STRINGS
    assert a.env == {} and isinstance(a.env, dict) and json.dumps(a.env) == "{}"
    for change in (
        lambda: a.env.__setitem__("K", "v"),
        lambda: a.env.update(K="v"),
        lambda: a.env.setdefault("K", "v"),
        lambda: a.matrix.pop("K"),
        lambda: a.matrix.clear(),
        lambda: a.matrix.popitem(),
    ):
        with pytest.raises(TypeError):
            change()
    with pytest.raises(TypeError):
        a.env |= {"K": "v"}  # type: ignore[misc]  # frozen: refused before the assignment
    assert b.env == {} and len(NO_STRINGS) == 0
    own = {"K": "v"}
    c = JobSpec(name="c", cmd="z", env=own, matrix={"lr": "1"})
    assert c.env is own and c.matrix == {"lr": "1"}
    assert {**c.env, **a.env} == {"K": "v"} and dict(a.env) == {} and dict(a.env) is not a.env


def test_records_share_one_empty_list_that_refuses_changes() -> None:
    a, b = JobRecord(name="a"), JobRecord(name="b")
    assert a.warnings is b.peak_gpu_mib is NO_ITEMS and a.warnings == []
    for change in (
        lambda: a.warnings.append("w"),
        lambda: a.warnings.extend(["w"]),
        lambda: a.warnings.insert(0, "w"),
        lambda: a.peak_gpu_mib.__setitem__(slice(0, 0), [1]),
    ):
        with pytest.raises(TypeError):
            change()
    with pytest.raises(TypeError):
        a.warnings += ["w"]
    assert b.warnings == [] and len(NO_ITEMS) == 0
    with pytest.raises(AttributeError):
        a.extra = 1  # type: ignore[attr-defined]  # slots: no field made up on the fly


def test_what_adds_to_a_records_lists_gives_it_lists_of_its_own() -> None:
    a, b = JobRecord(name="a", gpus=(0, 1)), JobRecord(name="b")
    leftover_warning(a, [12])
    record_gpu_peaks(a, {0: 100, 1: 50})
    assert len(a.warnings) == 1 and a.peak_gpu_mib == [100, 50]
    assert b.warnings == [] and b.peak_gpu_mib == [] and NO_ITEMS == []
    record_gpu_peaks(b, {})  # no GPUs: nothing kept, the shared one untouched
    assert b.peak_gpu_mib is NO_ITEMS


def test_copies_and_the_store_keep_the_shared_empties() -> None:
    rec = JobRecord(name="a", reason="waiting")
    for twin in (copy.copy(rec), copy.deepcopy(rec), pickle.loads(pickle.dumps(rec))):
        assert twin == rec and twin.warnings is NO_ITEMS and twin.peak_gpu_mib is NO_ITEMS
    back = record_from_json(record_to_json(rec))
    assert back == rec and back.warnings is NO_ITEMS and back.peak_gpu_mib is NO_ITEMS
    spec = JobSpec(name="a", cmd="x")
    assert pickle.loads(pickle.dumps(spec)).env is NO_STRINGS
    assert copy.deepcopy(spec).matrix is NO_STRINGS


def test_a_frozen_copy_is_out_of_the_engines_reach() -> None:
    rec = JobRecord(name="a", state=JobState.RUNNING, warnings=["first"])
    view = freeze(JobSpec(name="a", cmd="x"), rec, 0)
    rec.warnings.append("second")  # a list of its own: the engine may add in place
    rec.state = JobState.DONE
    assert view.record.warnings == ["first"] and view.record.state == JobState.RUNNING
    assert copy_record(rec) == rec and copy_record(rec) is not rec
    empty = freeze(JobSpec(name="b", cmd="y"), JobRecord(name="b"), 1)
    assert empty.record.warnings is NO_ITEMS


def test_records_read_back_share_equal_values_and_keep_their_types(tmp_path: Path) -> None:
    """A restart reads 100,000 waiting records that give the same reason, times and memory:
    one object for each value (store.record_from_json's ``shared``), and an int stays an int."""
    recs = [
        JobRecord(name=f"j{i}", mem_mib=1, reason="needs 1 GPU", reason_at=1.0, queued_since=5.0)
        for i in range(3)
    ]
    recs.append(JobRecord(name="odd", mem_mib=7, reason="other", reason_at=1.5, queued_since=1))
    with Store(tmp_path / "state.db") as s:
        s.save_many(recs)
    with Store(tmp_path / "state.db") as s:
        live, ended = s.load_split()
    assert list(live.values()) == recs and not ended
    a, b, c, odd = live.values()
    assert a.reason is b.reason is c.reason and a.reason_at is c.reason_at
    assert a.queued_since is b.queued_since and a.mem_mib is c.mem_mib
    assert type(a.mem_mib) is int and type(a.reason_at) is float and odd.reason == "other"
    assert type(odd.queued_since) is int and odd.mem_mib == 7 and odd.warnings is NO_ITEMS


@pytest.mark.parametrize(
    "values",
    [
        ("a", "true", 1, 70_000, 0, (), False, 0, None, ".", {}, {}, None, 3, 0,
         None, None, False, None, None, None, None, ""),
        ("b-x=1", "run {x}", 2, None, 5, ("a",), True, -1, 30.0, "sub", {"K": "v"},
         {"x": "1"}, False, 12, 4, 8, 65_536, False, None, None, None, None, "b-{x}"),
        ("c", "true", 0, None, 0, (), False, 0, None, ".", {}, {}, None, 5, 1, 2, None, True,
         None, None, None, None, ""),
        ("b-x=1", "run {x}", 2, None, 5, ("a",), True, -1, 30.0, "sub", {"K": "v"},
         {"x": "1"}, False, 12, 4, None, None, False, "b", "source env/bin/activate", ".env",
         Resume(preemptible=True), "b-{x}"),
    ],
)  # fmt: skip
def test_jobspec_make_equals_the_constructor(values: tuple) -> None:
    """The load's fast constructor gives the constructor's spec, frozen, with the shared empty
    env / matrix for empty ones."""
    names = [f.name for f in dataclasses.fields(JobSpec)]
    made = JobSpec.make(*values)
    built = JobSpec(**dict(zip(names, values, strict=True)))
    assert made == built
    assert [getattr(made, n) for n in names] == [getattr(built, n) for n in names]
    if not values[10]:
        assert made.env is NO_STRINGS and made.matrix is NO_STRINGS
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.cmd = "x"  # type: ignore[misc]
