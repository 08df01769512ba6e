"""Fake GPUs: the spec grammar, our jobs on simulated GPUs, and @FILE re-reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gtui.core.errors import EXIT_BAD_INPUT, GtuiError
from gtui.core.gpus.backend import open_backend
from gtui.core.gpus.fake import FakeBackend, FakeGpu, parse_fake_spec
from gtui.core.gpus.nvml import NvmlBackend
from gtui.core.gpus.snapshot import JobUsage

G = 1024


# ----- the grammar ----------------------------------------------------------------------------


def test_count_times_size() -> None:
    assert parse_fake_spec("4x80G") == [FakeGpu(80 * G)] * 4


def test_others_and_util_per_entry() -> None:
    assert parse_fake_spec("80G:16G@35,24G") == [FakeGpu(80 * G, 16 * G, 35), FakeGpu(24 * G)]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("80", [FakeGpu(80 * G)]),  # a bare number is GiB, as in queue files
        ("500M", [FakeGpu(500)]),
        ("2X40GiB:1.5G", [FakeGpu(40 * G, 1536)] * 2),
        (" 2 x 24G : 2G @ 50% , 1x8G ", [FakeGpu(24 * G, 2 * G, 50)] * 2 + [FakeGpu(8 * G)]),
        ("80G@0", [FakeGpu(80 * G)]),
        ("80G:80G@100", [FakeGpu(80 * G, 80 * G, 100)]),
    ],
)
def test_accepted_forms(spec: str, expected: list[FakeGpu]) -> None:
    assert parse_fake_spec(spec) == expected


@pytest.mark.parametrize(
    "spec",
    ["", " ", ",", "80G,", "80G,,24G", "0x80G", "4x", "x80G", "80Q", "0G", "80G:81G", "80G@101",
     "80G@-1", "80G:16G:2G", "80G@35@2", "@", "1000x1G", "80G:abc"],
)  # fmt: skip
def test_rejected_forms_name_the_grammar(spec: str) -> None:
    with pytest.raises(GtuiError) as info:
        FakeBackend(spec) if spec.startswith("@") else parse_fake_spec(spec)
    assert info.value.exit_code == EXIT_BAD_INPUT
    message = str(info.value)
    assert "[Nx]TOTAL[:USED_BY_OTHERS][@UTIL]" in message
    assert len(message.splitlines()) <= 2


@given(
    st.lists(
        st.tuples(
            st.integers(1, 4),
            st.integers(1, 200),
            st.one_of(st.none(), st.integers(0, 100)),
            st.one_of(st.none(), st.integers(0, 100)),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_any_well_formed_spec_reads_back(
    entries: list[tuple[int, int, int | None, int | None]],
) -> None:
    parts, expected = [], []
    for count, total_g, others_pct, util in entries:
        others = None if others_pct is None else total_g * G * others_pct // 100
        text = f"{count}x{total_g}G" + (f":{others}M" if others is not None else "")
        text += f"@{util}" if util is not None else ""
        parts.append(text)
        expected += [FakeGpu(total_g * G, others or 0, util or 0)] * count
    assert parse_fake_spec(",".join(parts)) == expected


# ----- reading: our jobs on fake GPUs ---------------------------------------------------------


def test_idle_gpus_show_others_only() -> None:
    snap = FakeBackend("80G:16G@35,24G").read()
    assert snap.source == "fake" and snap.error is None
    a, b = snap.gpus
    assert (a.index, a.mem_total_mib, a.mem_used_mib, a.util, a.processes) == (
        0,
        81920,
        16384,
        35,
        (),
    )
    assert (b.index, b.mem_total_mib, b.mem_used_mib, b.util) == (1, 24576, 0, 0)
    assert "Fake" in a.name and "80G" in a.name
    assert a.temperature is not None and b.temperature is not None and a.temperature > b.temperature
    assert a.uuid != b.uuid and a.uuid.startswith("GPU-")
    assert [g.uuid for g in FakeBackend("80G,24G").read().gpus] == [a.uuid, b.uuid]  # stable


def test_running_job_uses_its_declared_memory_on_each_of_its_gpus() -> None:
    backend = FakeBackend("3x80G:10G")
    snap = backend.read([JobUsage(pid=4242, gpus=(0, 2), mem_mib=30 * G)])
    g0, g1, g2 = snap.gpus
    for g in (g0, g2):
        assert g.mem_used_mib == 40 * G
        assert [(p.pid, p.mem_mib) for p in g.processes] == [(4242, 30 * G)]
        assert g.util is not None and g.util >= 90
    assert g1.mem_used_mib == 10 * G and g1.processes == () and g1.util == 0


def test_job_without_mem_takes_the_whole_remaining_gpu() -> None:
    snap = FakeBackend("80G:16G").read([JobUsage(pid=7, gpus=(0,), mem_mib=None)])
    (g,) = snap.gpus
    assert g.mem_used_mib == g.mem_total_mib == 80 * G
    assert g.processes[0].mem_mib == 64 * G


def test_a_job_uses_what_gtui_fake_use_says_whatever_it_asked_for() -> None:
    """GTUI_FAKE_USE (in the job's env, read by the engine into ``fake_use_mib``): a whole-GPU
    job, one that asked for more, and one that asked for less all use what it says, within
    what the GPU has left."""
    from gtui.core.gpus.fake import fake_use_mib

    assert fake_use_mib({"GTUI_FAKE_USE": "12G"}) == 12 * G
    assert fake_use_mib({"GTUI_FAKE_USE": " 500M "}) == 500
    assert fake_use_mib({"GTUI_FAKE_USE": "lots"}) is None and fake_use_mib({}) is None
    whole = JobUsage(pid=1, gpus=(0,), mem_mib=None, fake_use_mib=12 * G)
    (g,) = FakeBackend("80G").read([whole]).gpus
    assert [(p.pid, p.mem_mib) for p in g.processes] == [(1, 12 * G)]
    assert g.mem_used_mib == 12 * G
    ours = [
        JobUsage(pid=2, gpus=(0,), mem_mib=70 * G, fake_use_mib=12 * G),
        JobUsage(pid=3, gpus=(0,), mem_mib=8 * G, fake_use_mib=10 * G),
        JobUsage(pid=4, gpus=(0,), mem_mib=8 * G, fake_use_mib=90 * G),  # capped: 58G left
    ]
    (g,) = FakeBackend("80G").read(ours).gpus
    assert [(p.pid, p.mem_mib) for p in g.processes] == [(2, 12 * G), (3, 10 * G), (4, 58 * G)]


def test_packed_jobs_add_up_and_never_exceed_the_gpu() -> None:
    ours = [
        JobUsage(pid=1, gpus=(0,), mem_mib=30 * G),
        JobUsage(pid=2, gpus=(0,), mem_mib=30 * G),
        JobUsage(pid=3, gpus=(0,), mem_mib=30 * G),  # only 10G left: capped, as CUDA would OOM
    ]
    (g,) = FakeBackend("80G:10G").read(ours).gpus
    assert [(p.pid, p.mem_mib) for p in g.processes] == [(1, 30 * G), (2, 30 * G), (3, 10 * G)]
    assert g.mem_used_mib == 80 * G


def test_suspended_job_keeps_its_memory_at_zero_util() -> None:
    ours = [JobUsage(pid=9, gpus=(0,), mem_mib=20 * G, suspended=True)]
    (g,) = FakeBackend("80G@0").read(ours).gpus
    assert g.mem_used_mib == 20 * G and g.util == 0
    assert g.processes[0].pid == 9


def test_cpu_jobs_and_unknown_gpus_are_ignored() -> None:
    ours = [JobUsage(pid=1, gpus=(), mem_mib=None), JobUsage(pid=2, gpus=(5,), mem_mib=G)]
    (g,) = FakeBackend("24G").read(ours).gpus
    assert g.mem_used_mib == 0 and g.processes == ()


# ----- @FILE ----------------------------------------------------------------------------------


def test_spec_file_is_read_again_at_every_poll(tmp_path: Path) -> None:
    spec = tmp_path / "gpus.txt"
    spec.write_text("2x80G\n")
    backend = FakeBackend("@gpus.txt", tmp_path)  # relative to the base dir
    assert [g.mem_used_mib for g in backend.read().gpus] == [0, 0]
    spec.write_text("# another user arrives on GPU 1\n80G\n80G:70G@99\n")
    snap = backend.read()
    assert [g.mem_used_mib for g in snap.gpus] == [0, 70 * G]
    assert snap.gpus[1].util == 99 and snap.error is None
    spec.write_text("2x80G")  # and leaves
    assert [g.mem_used_mib for g in backend.read().gpus] == [0, 0]


def test_spec_file_that_vanishes_or_breaks_keeps_the_last_good_spec(tmp_path: Path) -> None:
    spec = tmp_path / "gpus.txt"
    spec.write_text("80G:8G")
    backend = FakeBackend(f"@{spec}", Path("/nonexistent"))  # absolute path ignores the base
    spec.unlink()
    snap = backend.read()
    assert [g.mem_used_mib for g in snap.gpus] == [8 * G]
    assert snap.error is not None and "gpus.txt" in snap.error and "last good" in snap.error
    spec.write_text("80G:lots")
    snap = backend.read()
    assert [g.mem_used_mib for g in snap.gpus] == [8 * G]
    assert snap.error is not None and "last good" in snap.error and "\n" not in snap.error
    spec.write_text("80G:9G")
    snap = backend.read()
    assert snap.error is None and [g.mem_used_mib for g in snap.gpus] == [9 * G]


def test_spec_file_problems_at_start_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(GtuiError, match="cannot read"):
        FakeBackend("@missing.txt", tmp_path)
    (tmp_path / "loop.txt").write_text("@loop.txt")
    with pytest.raises(GtuiError, match="another file") as info:
        FakeBackend("@loop.txt", tmp_path)
    assert info.value.exit_code == EXIT_BAD_INPUT
    (tmp_path / "bad.txt").write_text("80G:90G")
    with pytest.raises(GtuiError, match=r"bad\.txt"):
        FakeBackend("@bad.txt", tmp_path)


# ----- choosing the backend -------------------------------------------------------------------


def test_open_backend_picks_fake_with_a_spec_and_nvml_without(tmp_path: Path) -> None:
    fake = open_backend("2x24G", tmp_path)
    assert isinstance(fake, FakeBackend) and fake.source == "fake"
    (tmp_path / "g.txt").write_text("24G")
    assert len(open_backend("@g.txt", tmp_path).read().gpus) == 1
    for spec in (None, "", "  "):
        backend = open_backend(spec, tmp_path)
        try:
            assert isinstance(backend, NvmlBackend)
            snap = backend.read()  # whatever this machine has, it never raises
            assert snap.gpus or snap.error
        finally:
            backend.close()
    with pytest.raises(GtuiError):
        open_backend("lots", tmp_path)
