"""The dashboard on a cluster: GPU bars grouped under their node, each numbered as
on its node; the job table says which node a job runs on."""

from __future__ import annotations

from gtui.core.api import GpusRead, JobView
from gtui.core.gpus.snapshot import NODE_GPU_STRIDE, GpuInfo, GpuSnapshot
from gtui.core.model import JobRecord, JobSpec, JobState, Settings
from gtui.ui.widgets.gpu_panel import GpuPanel
from tests.ui.test_ui_widgets import Harness

S = NODE_GPU_STRIDE  # node 1's first GPU in the pool

G = 1024


def gpu(node: str, k: int, i: int) -> GpuInfo:
    return GpuInfo(
        k * NODE_GPU_STRIDE + i, "fake", f"u{k}{i}", 24 * G, 0, 0, 40, node=node, node_index=i
    )


async def test_gpu_bars_are_grouped_under_their_node() -> None:
    panel = GpuPanel(Settings())
    snap = GpuSnapshot(
        (gpu("node1", 0, 0), gpu("node1", 0, 1), gpu("node2", 1, 0)), 0, "fake"
    )
    read = GpusRead(snap, ours={S: ("lr0.1",)}, ours_mib={S: 12 * G})
    async with Harness(panel).run_test(size=(130, 10)) as pilot:
        panel.set_read(read)
        await pilot.pause()
        lines = panel.render().plain.splitlines()
    assert len(lines) == 5
    assert lines[0].strip().startswith("node1") and lines[3].strip().startswith("node2")
    assert lines[1].lstrip().startswith("0 ") and lines[2].lstrip().startswith("1 ")
    assert lines[4].lstrip().startswith("0 ") and "lr0.1" in lines[4]


def test_the_job_table_names_the_node_of_a_running_job() -> None:
    from gtui.ui.format import gpu_cell

    view = JobView(
        JobSpec(name="a", cmd="true"),
        JobRecord(name="a", state=JobState.RUNNING, gpus=(S + 1,), node="node2"),
        0,
    )
    assert gpu_cell(view) == "node2:1"
    cpu = JobView(
        JobSpec(name="c", cmd="true", gpus=0),
        JobRecord(name="c", state=JobState.DONE, node="node3"),
        1,
    )
    assert gpu_cell(cpu) == "node3:cpu"


async def test_the_job_table_widens_its_gpu_column_for_node_names() -> None:
    from gtui.ui.widgets.job_table import JobTable
    from tests.ui.test_ui_widgets import line_text

    table = JobTable(clock=lambda: 0.0)
    running = JobView(
        JobSpec(name="a", cmd="true"),
        JobRecord(name="a", state=JobState.RUNNING, gpus=(S, S + 1), node="node2"),
        0,
    )
    async with Harness(table).run_test(size=(120, 10)) as pilot:
        table.set_jobs([JobView(JobSpec(name="a", cmd="true"), JobRecord(name="a"), 0)])
        table.update_jobs([running])
        await pilot.pause()
        assert "node2:0,1" in line_text(table, 1)


def test_the_bars_marks_follow_node_names_and_numbers_as_placement_does() -> None:
    from gtui.ui.widgets.gpu_panel import gpu_marks

    settings = Settings(exclude=(1,), cluster_exclude=("node2:0",), cluster_gpus=("node1", "node2"))
    marks = {
        f"{g.node}:{g.node_index}": gpu_marks(g, settings, ())
        for g in (gpu("node1", 0, 0), gpu("node1", 0, 1), gpu("node2", 1, 0), gpu("node3", 2, 0))
    }
    assert {k for k, m in marks.items() if m.excluded} == {"node1:1", "node2:0"}
    assert {k for k, m in marks.items() if not m.in_pool} == {"node3:0"}
