"""Pure pieces of the dashboard fed with engine values built by hand: text, events, forms."""

from __future__ import annotations

import pytest

from gtui.core.api import GpusRead, JobChanged, JobRemoved, JobView, LogGrew, Notice, QueueChanged
from gtui.core.gpus.snapshot import GpuInfo, GpuSnapshot
from gtui.core.model import Diagnosis, JobRecord, JobSpec, JobState, Mode, Settings
from gtui.ui.events import EventBuffer
from gtui.ui.format import (
    FREE_CHAR,
    OTHERS_CHAR,
    OURS_CHAR,
    GpuMarks,
    gpu_line,
    header_text,
    job_cells,
    jobs_tail,
    memory_bar,
    short_gpu_name,
)
from gtui.ui.forms import FormError, changed_fields, fields_from_form, form_from_spec
from gtui.ui.widgets.diagnosis import diagnosis_text

G = 1024


def view(name: str, state: JobState = JobState.QUEUED, order: int = 0, **rec: object) -> JobView:
    spec_kw = {k[5:]: rec.pop(k) for k in list(rec) if k.startswith("spec_")}
    spec = JobSpec(name=name, cmd="true", **spec_kw)  # type: ignore[arg-type]
    return JobView(spec=spec, record=JobRecord(name=name, state=state, **rec), order=order)  # type: ignore[arg-type]


def a800(index: int = 0, used: int | None = 52 * G, util: int | None = 71) -> GpuInfo:
    return GpuInfo(index, "NVIDIA A800-SXM4-80GB", "u", 80 * G, used, util, 54)


# -- GPUs ---------------------------------------------------------------------------------------


def test_memory_bar_has_three_parts_in_proportion() -> None:
    bar = memory_bar(80 * G, others=16 * G, ours=36 * G, width=20).plain
    assert bar == OTHERS_CHAR * 4 + OURS_CHAR * 9 + FREE_CHAR * 7
    assert memory_bar(80 * G, 0, 0, 10).plain == FREE_CHAR * 10
    # a sliver of use still shows
    assert OTHERS_CHAR in memory_bar(80 * G, others=100, ours=0, width=10).plain


@pytest.mark.parametrize("width", [76, 116, 196])
def test_gpu_line_says_everything_in_words_and_numbers(width: int) -> None:
    line = gpu_line(a800(), ours_names=("lr0.1", "lr0.01"), ours_mib=36 * G, width=width).plain
    assert "52/80G" in line and "71%" in line and "54°C" in line and "lr0.1" in line
    assert len(line) <= width
    if width >= 110:
        assert "others 16G ours 36G" in line and "A800-SXM4-80GB" in line


def test_gpu_marks_and_unknown_fields() -> None:
    reserved = gpu_line(a800(3, used=0, util=0), marks=GpuMarks(reserved=True)).plain
    assert "reserved" in reserved and "0%" in reserved
    excluded = gpu_line(a800(2), marks=GpuMarks(excluded=True)).plain
    assert "excluded" in excluded
    outside = gpu_line(a800(2), marks=GpuMarks(in_pool=False)).plain
    assert "not in pool" in outside
    na = gpu_line(GpuInfo(1, "X", "u", 80 * G, None, None, None)).plain
    assert na.count("n/a") >= 3
    lost = gpu_line(GpuInfo(1, "X", "u", None, None, None, None, lost=True, error="fell off")).plain
    assert "LOST" in lost and "fell off" in lost


def test_colour_follows_thresholds_and_the_number_is_always_written() -> None:
    hot = gpu_line(a800(used=78 * G, util=99), width=120)
    cool = gpu_line(a800(used=1 * G, util=3), width=120)
    styles_hot = {str(s.style) for s in hot.spans}
    styles_cool = {str(s.style) for s in cool.spans}
    assert "bold red" in styles_hot and "bold red" not in styles_cool
    assert "78/80G" in hot.plain and "99%" in hot.plain


def test_short_names_and_job_lists() -> None:
    assert short_gpu_name("NVIDIA A800-SXM4-80GB") == "A800-SXM4-80GB"
    assert short_gpu_name("NVIDIA A800-SXM4-80GB", compact=True) == "A800"
    assert jobs_tail(["a", "b", "c"], 20) == "a b c"
    assert jobs_tail(["alpha", "beta", "gamma"], 12) == "alpha +2"


# -- jobs ----------------------------------------------------------------------------------------


def test_job_cells() -> None:
    running = view(
        "lr0.1",
        JobState.RUNNING,
        gpus=(0,),
        mem_mib=12 * G,
        started_at=1000.0,
        attempt=1,
        spec_mem_mib=12 * G,
    )
    c = job_cells(running, now=1000.0 + 723)
    assert (c.state.plain, c.gpu.plain, c.mem.plain, c.tries.plain, c.time.plain) == (
        "running",
        "0",
        "12G",
        "1",
        "12:03",
    )
    ddp = view("big", JobState.HELD, spec_gpus=2, spec_mem_mib=70 * G, mem_mib=70 * G)
    c = job_cells(ddp, now=0)
    assert (c.gpu.plain, c.mem.plain, c.note.plain) == ("-", "70Gx2", "held by you")
    cpu = view("prep", spec_gpus=0, reason="after fetch")
    assert job_cells(cpu, 0).mem.plain == "cpu" and job_cells(cpu, 0).note.plain == "after fetch"
    failed = view(
        "e",
        JobState.FAILED,
        attempt=3,
        spec_retries=2,
        diagnosis=Diagnosis("cuda_oom", "CUDA out of memory", "lower the batch"),
    )
    c = job_cells(failed, 0)
    assert c.note.plain == "CUDA OOM" and c.tries.plain == "3/3"
    whole = view("w", spec_mem_mib=None)
    assert job_cells(whole, 0).mem.plain == "whole"


def test_diagnosis_text_for_an_oom_with_a_bigger_retry() -> None:
    v = view(
        "eval",
        JobState.QUEUED,
        attempt=1,
        exit_code=1,
        mem_mib=int(12.5 * G),
        peak_mib=int(14.2 * G),
        spec_mem_mib=10 * G,
        spec_retries=2,
        diagnosis=Diagnosis(
            "cuda_oom", "torch.OutOfMemoryError: CUDA out of memory", "lower the batch size"
        ),
        warnings=["CUDA OOM: the retry asks 12800 MiB instead of 10240"],
    )
    text = diagnosis_text(v, 1.25)
    assert text is not None
    plain = text.plain
    assert plain.startswith("CUDA OOM  (exit 1, attempt 1)")
    assert "torch.OutOfMemoryError" in plain and "hint: lower the batch size" in plain
    assert "asked 10G; peak 14.2G; the retry asks 12.5G (oom_grow 1.25)" in plain
    assert "12800 MiB" not in plain  # said once, in GiB
    assert diagnosis_text(view("ok", JobState.DONE), 1.25) is None


def test_header_fits_80_columns_and_keeps_the_state_words() -> None:
    counts = {JobState.RUNNING: 3, JobState.QUEUED: 12, JobState.FAILED: 1, JobState.DONE: 20}
    settings = Settings(mode=Mode.PACK, reserve=1)
    wide = header_text(
        host="lab-3",
        queue="~/exp/queue.toml",
        settings=settings,
        paused=False,
        fake=True,
        counts=counts,
        width=160,
    ).plain
    assert "lab-3" in wide and "pack" in wide and "reserve 1" in wide and "dispatch ON" in wide
    assert "SIMULATED GPUs" in wide and "3 running 12 queued 1 failed 20 done" in wide
    narrow = header_text(
        host="lab-3",
        queue="~/exp/queue.toml",
        settings=settings,
        paused=True,
        fake=True,
        counts=counts,
        width=80,
    ).plain
    assert len(narrow) <= 80 and "PAUSED" in narrow and "3 run" in narrow and "1 fail" in narrow


# -- events --------------------------------------------------------------------------------------


def test_event_buffer_keeps_the_latest_of_each() -> None:
    buf = EventBuffer()
    assert buf.add(JobChanged(view("a", JobState.QUEUED))) is True
    assert buf.add(JobChanged(view("a", JobState.RUNNING))) is False
    buf.add(JobChanged(view("b")))
    buf.add(JobRemoved("b"))
    for size in (10, 20, 30):
        buf.add(LogGrew("a", "/x", size))
    snap = GpuSnapshot(gpus=(), taken_at=0, source="fake")
    buf.add(GpusRead(snap))
    last = GpusRead(snap, reserved=(1,))
    buf.add(last)
    buf.add(Notice("error", "disk full"))
    batch = buf.take()
    assert batch.jobs["a"].record.state == JobState.RUNNING and "b" not in batch.jobs
    assert batch.removed == {"b"} and batch.logs == {"a": 30} and batch.gpus is last
    assert batch.events == 10 and [n.text for n in batch.notices] == ["disk full"]
    assert not buf.take()


def test_a_whole_queue_supersedes_earlier_job_changes() -> None:
    buf = EventBuffer()
    buf.add(JobChanged(view("old")))
    buf.add(QueueChanged((view("a"), view("b"))))
    buf.add(JobChanged(view("b", JobState.RUNNING)))
    batch = buf.take()
    assert batch.queue is not None and [v.spec.name for v in batch.queue] == ["a", "b"]
    assert list(batch.jobs) == ["b"]


# -- forms ---------------------------------------------------------------------------------------


def test_form_fields_become_queue_file_keys() -> None:
    fields = fields_from_form(
        {
            "name": " x ",
            "cmd": "python t.py",
            "gpus": "2",
            "mem": "20G",
            "after": "a, b c",
            "env": "SEED=1 MSG='two words'",
            "retries": "-1",
            "timeout": "",
        }
    )
    assert fields == {
        "name": "x",
        "cmd": "python t.py",
        "gpus": 2,
        "mem": "20G",
        "after": ["a", "b", "c"],
        "env": {"SEED": "1", "MSG": "two words"},
        "retries": -1,
    }


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"cmd": ""}, "cmd"),
        ({"cmd": "x", "gpus": "two"}, "gpus"),
        ({"cmd": "x", "env": "NOEQUALS"}, "env"),
        ({"cmd": "x", "priority": "1.5"}, "priority"),
    ],
)
def test_form_shape_errors_name_the_field(values: dict[str, str], key: str) -> None:
    with pytest.raises(FormError) as e:
        fields_from_form(values)
    assert e.value.key == key and key in str(e.value)


def test_edit_sends_only_what_changed() -> None:
    spec = JobSpec(
        name="j", cmd="python t.py", gpus=1, mem_mib=20 * G, timeout_s=5400, env={"A": "1 2"}
    )
    before = form_from_spec(spec)
    assert before["mem"] == "20G" and before["timeout"] == "1h30m" and before["env"] == "A='1 2'"
    after = dict(before, priority="5", mem="")
    assert changed_fields(before, after) == {"priority": 5, "mem": None}
