"""``mem = "auto"`` and the notes on a ``mem`` far from what the last runs used,
and an OOM retry that grows from the real (NVML) peak."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gtui.core.errors import GtuiError
from gtui.core.gpus.nvml import NvmlBackend
from gtui.core.model import JobRecord, JobState
from gtui.core.paths import queue_paths
from gtui.core.queue.queuefile import load_queue
from gtui.core.sched.engine import Engine
from gtui.core.state.history import record_attempt
from gtui.core.state.store import Store
from gtui.core.state.usage import auto_mem
from tests.conftest import gtui, jobs_of, write_queue
from tests.core.sched.test_engine import load_fake_pynvml, states
from tests.waiting import until

G = 1024
WAIT = "while [ ! -e release ]; do sleep 0.05; done"


def remember(q: Path, name: str, *peaks: int) -> None:
    """Runs of ``name`` recorded in the queue's history, as a scheduler would have."""
    with Store(queue_paths(q).db) as store:
        for n, peak in enumerate(peaks, 1):
            rec = JobRecord(
                name=name,
                state=JobState.DONE,
                attempt=n,
                gpus=(0,),
                started_at=0.0,
                ended_at=60.0,
                peak_mib=peak,
            )
            record_attempt(store, rec)


def test_auto_mem_is_the_peak_plus_a_margin() -> None:
    assert auto_mem([]) is None and auto_mem([None, 0]) is None  # first run: whole GPU
    assert auto_mem([10 * G, 12 * G]) == 15 * G  # 12G * 1.2 = 14.4G, up to a whole GiB
    assert auto_mem([2 * G]) == 3 * G  # at least 1G more
    assert auto_mem([70 * G], gpu_total_mib=80 * G) == 80 * G  # never above the GPU


def test_mem_auto_in_the_queue_file(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[[jobs]]\nname = "a"\ncmd = "x"\nmem = "auto"\n')
    (job,) = load_queue(q).jobs
    assert job.mem_auto and job.mem_mib is None
    bad = write_queue(tmp_path, '[[jobs]]\ncmd = "x"\ngpus = 0\nmem = "auto"\n', "cpu.toml")
    with pytest.raises(GtuiError, match="CPU job"):
        load_queue(bad)
    r = gtui("validate", str(q), "--fake-gpus", "1x80G")
    assert r.returncode == 0 and "mem auto" in r.stdout and "whole GPU until" in r.stdout


async def test_first_auto_run_has_the_whole_gpu_and_the_next_asks_its_peak(
    tmp_path: Path,
) -> None:
    nv = load_fake_pynvml()
    nv.fake_reset([nv.FakeGpu()])
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "a"
        mem = "auto"
        cmd = "{WAIT}"
        """,
    )
    engine = Engine(q, backend=NvmlBackend(nvml=nv))
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: states(engine).get("a") == "running", what="a running")
        rec = engine.view("a").record
        assert rec.mem_mib is None  # its first run: the whole GPU
        nv.fake_state.gpus[0].compute = [(rec.pid, 12 * G)]
        nv.fake_state.gpus[0].used_mib = 12 * G
        await until(lambda: engine.view("a").record.peak_mib == 12 * G, what="peak 12G")
        (tmp_path / "release").touch()
        await until(lambda: states(engine)["a"] == "done", what="a done")
        assert engine.view("a").record.mem_mib == 15 * G  # its next run asks peak + margin
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)
        task.cancel()
        nv.fake_reset()


def test_a_waiting_auto_job_asks_its_recorded_peak_at_start(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[[jobs]]\nname = "a"\nmem = "auto"\ncmd = "true"\n')
    remember(q, "a", 9 * G, 20 * G, 11 * G)
    r = gtui("run", str(q), "--fake-gpus", "1x80G")
    assert r.returncode == 0, r.stderr
    assert "start a (attempt 1) on GPU 0, 24G/GPU" in r.stdout  # 20G * 1.2


def test_validate_and_run_point_out_mem_far_from_the_last_runs(tmp_path: Path) -> None:
    q = write_queue(
        tmp_path,
        """
        [[jobs]]
        name = "big"
        mem = "40G"
        cmd = "true"
        [[jobs]]
        name = "small"
        mem = "8G"
        cmd = "true"
        [[jobs]]
        name = "right"
        mem = "14G"
        cmd = "true"
        """,
    )
    remember(q, "big", 30 * G, 11 * G, 12 * G, 10 * G)  # the last 3 count: 12G at most
    remember(q, "small", 10 * G)
    remember(q, "right", 12 * G)
    r = gtui("validate", str(q), "--fake-gpus", "1x80G")
    assert r.returncode == 0, r.stderr
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("gtui: warning:")]
    assert notes == [
        "gtui: warning: big: mem 40G is far above its last 3 runs' peak 12G; "
        '15G would do (or mem = "auto")',
        "gtui: warning: small: mem 8G is below its last run's peak 10G; "
        'ask for 12G (or mem = "auto")',
    ]
    r = gtui("run", str(q), "--fake-gpus", "1x80G")
    assert r.returncode == 0, r.stderr
    (line,) = [ln for ln in r.stdout.splitlines() if "far above" in ln]
    assert "warning: big: mem 40G is far above" in line and "small: mem 8G is below" in line


async def test_an_oom_retry_grows_from_the_real_peak(tmp_path: Path) -> None:
    """mem 10G, NVML saw the job at 14G, then CUDA OOM: the retry asks max(10G * 1.25,
    14G * 1.1) = 15.4G, rounded up to 16G: from the measured peak, not the declared mem."""
    nv = load_fake_pynvml()
    nv.fake_reset([nv.FakeGpu()])
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB."
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "a"
        mem = "10G"
        retries = 1
        cmd = "[ -e second ] && exit 0; {WAIT}; touch second; echo '{oom}' >&2; exit 1"
        """,
    )
    engine = Engine(q, backend=NvmlBackend(nvml=nv))
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: states(engine).get("a") == "running", what="a running")
        nv.fake_state.gpus[0].compute = [(engine.view("a").record.pid, 14 * G)]
        await until(lambda: engine.view("a").record.peak_mib == 14 * G, what="peak 14G")
        nv.fake_state.gpus[0].compute = []
        (tmp_path / "release").touch()
        await until(lambda: engine.view("a").record.attempt == 2, what="the retry")
        assert engine.view("a").record.mem_mib == 16 * G
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)
        task.cancel()
        nv.fake_reset()


async def test_a_run_far_below_its_request_is_pointed_out_when_it_ends(tmp_path: Path) -> None:
    from gtui.core.api import Notice

    nv = load_fake_pynvml()
    nv.fake_reset([nv.FakeGpu()])
    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "a"
        mem = "40G"
        cmd = "{WAIT}"
        """,
    )
    engine = Engine(q, backend=NvmlBackend(nvml=nv))
    notices: list[str] = []
    engine.subscribe(lambda e: notices.append(e.text) if isinstance(e, Notice) else None)
    task = asyncio.create_task(engine.run())
    try:
        await until(lambda: states(engine).get("a") == "running", what="a running")
        nv.fake_state.gpus[0].compute = [(engine.view("a").record.pid, 6 * G)]
        await until(lambda: engine.view("a").record.peak_mib == 6 * G, what="peak 6G")
        nv.fake_state.gpus[0].compute = []
        (tmp_path / "release").touch()
        words = "a: mem 40G is far above its last run's peak 6G; 8G would do"
        await until(lambda: any(words in n for n in notices), what=words)
    finally:
        (tmp_path / "release").touch()
        await engine.shutdown(kill_jobs=True)
        task.cancel()
        nv.fake_reset()


def test_the_edit_form_keeps_auto(tmp_path: Path) -> None:
    from gtui.ui.forms import changed_fields, form_from_spec

    q = write_queue(tmp_path, '[[jobs]]\nname = "a"\ncmd = "x"\nmem = "auto"\n')
    (job,) = load_queue(q).jobs
    form = form_from_spec(job)
    assert form["mem"] == "auto"
    assert changed_fields(form, {**form, "priority": "3"}) == {"priority": 3}  # mem untouched


def test_on_simulated_gpus_a_job_uses_what_gtui_fake_use_declares(tmp_path: Path) -> None:
    """End to end on ``--fake-gpus`` (a real ``gtui run``, real jobs): a job whose env says
    ``GTUI_FAKE_USE = "12G"`` is seen at 12G whatever it asked for. So a ``mem = "auto"`` job's
    first run (the whole GPU) records a 12G peak and its second run asks 12G + 20 % = 15G, not
    the GPU; and a job that asked 70G is pointed out, by the scheduler when it ends and by
    ``gtui validate``, as far above the 12G it used."""
    from tests.reliability.live import start_live
    from tests.waiting import wait_for

    def jobs() -> dict[str, dict[str, object]]:
        return jobs_of(q)

    def wait_rel(name: str) -> str:
        return f"while [ ! -e release-{name} ]; do sleep 0.05; done"

    q = write_queue(
        tmp_path,
        f"""
        [settings]
        poll = "0.1s"
        [[jobs]]
        name = "sweep"
        mem = "auto"
        retries = 1
        cmd = "[ -e second ] && exit 0; {wait_rel("sweep")}; touch second; exit 1"
        env = {{ GTUI_FAKE_USE = "12G" }}
        [[jobs]]
        name = "big"
        mem = "70G"
        after = ["sweep"]
        cmd = "{wait_rel("big")}"
        env = {{ GTUI_FAKE_USE = "12G" }}
        """,
    )
    live = start_live("run", str(q), "--fake-gpus", "1x80G")
    try:
        first = live.wait_for("start sweep (attempt 1)")
        assert "/GPU" not in first, first  # its first run: the whole GPU
        wait_for(lambda: jobs()["sweep"]["peak_mib"] == 12 * G, what="sweep seen at 12G")
        (tmp_path / "release-sweep").touch()
        second = live.wait_for("start sweep (attempt 2)")
        assert "on GPU 0, 15G/GPU" in second, second  # 12G * 1.2 = 14.4G, up to a whole GiB
        live.wait_for("start big (attempt 1) on GPU 0, 70G/GPU")
        wait_for(lambda: jobs()["big"]["peak_mib"] == 12 * G, what="big seen at 12G")
        (tmp_path / "release-big").touch()
        out = live.finish(60)
    finally:
        for name in ("sweep", "big"):
            (tmp_path / f"release-{name}").touch()
        if live.proc.poll() is None:
            live.proc.kill()
    assert live.proc.returncode == 0, out
    far = "big: mem 70G is far above its last run's peak 12G; 15G would do"
    assert far in out, out  # said when its run ended
    r = gtui("validate", str(q), "--fake-gpus", "1x80G")
    assert r.returncode == 0, r.stderr
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("gtui: warning:")]
    assert notes == [f'gtui: warning: {far} (or mem = "auto")'], r.stderr


def test_gtui_fake_use_must_be_a_size(tmp_path: Path) -> None:
    q = write_queue(tmp_path, '[[jobs]]\ncmd = "x"\nenv = { GTUI_FAKE_USE = "lots" }\n')
    with pytest.raises(GtuiError, match=r"GTUI_FAKE_USE .*expected a size"):
        load_queue(q)


def test_the_dashboards_peak_book_reads_only_the_rows_written_since(tmp_path: Path) -> None:
    """The dashboard asks every 2 s; it must agree with the one rule (mem_advice) on whatever
    the history holds: new runs, an attempt recorded again, a db made anew."""
    from gtui.core.model import JobSpec
    from gtui.core.state.history import attempts
    from gtui.core.state.usage import PeakBook, mem_advice

    q = write_queue(tmp_path, '[[jobs]]\nname = "a"\nmem = "40G"\ncmd = "true"\n')
    db = queue_paths(q).db
    spec = JobSpec(name="a", cmd="true", mem_mib=40 * G)
    book = PeakBook(db)
    book.refresh()  # no db yet
    assert book.advice(spec) is None

    def agrees() -> bool:
        book.refresh()
        return book.advice(spec) == mem_advice(spec, attempts(db, "a"))

    remember(q, "a", 12 * G)
    assert agrees() and book.advice(spec) is not None
    remember(q, "a", 12 * G, 38 * G)  # attempt 1 recorded again, then a run near its mem
    assert agrees() and book.advice(spec) is None
    with Store(db) as store:  # attempt 2 recorded again (the last row), now with a low peak
        record_attempt(store, JobRecord("a", JobState.DONE, attempt=2, gpus=(0,), peak_mib=G))
    assert agrees() and book.advice(spec) is not None
    for f in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        f.unlink(missing_ok=True)  # the state made anew: one row
    remember(q, "a", 39 * G)
    assert agrees() and book.advice(spec) is None
