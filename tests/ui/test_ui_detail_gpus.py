"""The job detail view on a cluster and on MIG: its GPUs named as the table names
them (``node2:3``, ``0:1``), the node it runs on, and the CUDA_VISIBLE_DEVICES the engine really
set (the node's own index, a MIG instance's UUID), from the engine's own rule. And every key of
``gtui status --json`` for a job has its place on the screen."""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from gtui.core.api import JobView
from gtui.core.gpus.fake import FakeBackend
from gtui.core.gpus.snapshot import NODE_GPU_STRIDE, GpuInfo
from gtui.core.model import Diagnosis, JobRecord, JobSpec, JobState, Settings
from gtui.core.progress import Progress
from gtui.core.sched.eta import Estimate, short_duration
from gtui.core.sched.forecast import estimate_json
from gtui.core.state.status import job_dict
from gtui.core.trackers import links_line
from gtui.core.units import format_mib
from gtui.ui.detail import detail_renderable, gtui_env, how_it_ended, when
from gtui.ui.format import display_path, kind_label
from tests.conftest import write_queue
from tests.dashboard_helpers import dashboard, screen_text, state
from tests.ui.test_ui_detail import flat, open_detail
from tests.waiting import pilot_until as until

S = NODE_GPU_STRIDE  # node 1's first GPU in the pool: pool GPU S + 3 is node2's GPU 3
G = 1024
NOW = time.time()
QUEUE_PATH = Path("/tmp/gtui-detail-gpus/q.toml")


def node_gpu(i: int) -> GpuInfo:
    return GpuInfo(S + i, "fake", f"GPU-n2-{i}", 80 * G, 0, 0, 40, node="node2", node_index=i)


def rendered(
    view: JobView,
    *,
    gpus: Sequence[GpuInfo] = (),
    estimate: Estimate | None = None,
    settings: Settings | None = None,
) -> str:
    """The detail view's text for ``view``, as one line of words."""
    console = Console(width=140, file=io.StringIO(), color_system=None, record=True)
    console.print(
        detail_renderable(
            view,
            jobs=[view],
            history=[],
            settings=settings or Settings(),
            queue_path=QUEUE_PATH,
            now=NOW,
            estimate=estimate,
            gpus=gpus,
        )
    )
    return flat(console.export_text())


def on_node2(**kw: Any) -> JobView:
    """A job the Ray executor runs on node2's GPU 3 (pool GPU 1000003)."""
    rec = JobRecord(
        name="train",
        state=JobState.RUNNING,
        attempt=1,
        gpus=(S + 3,),
        mem_mib=10 * G,
        pid=4242,
        started_at=NOW - 600,
        log="/tmp/gtui-detail-gpus/logs/train.1.log",
        token="t" * 32,
        node="node2",
    )
    for k, v in kw.items():
        setattr(rec, k, v)
    spec = JobSpec(name="train", cmd="python train.py --gpu {gpu}", gpus=len(rec.gpus) or 1)
    return JobView(spec, rec, 0)


def test_a_job_on_a_cluster_node_names_its_node_and_its_gpu_as_the_table_does() -> None:
    shown = rendered(on_node2(), gpus=(node_gpu(3),))
    assert "node node2" in shown, shown
    assert "given GPU node2:3" in shown, shown
    assert "999" not in shown, shown  # pool GPU 1000003 is no MIG instance "999:3"
    # The command as the engine ran it, with the node's number, and the environment it set.
    assert "command python train.py --gpu 3" in shown, shown
    assert "CUDA_VISIBLE_DEVICES 3" in shown, shown
    assert "#1" in shown and "GPU node2:3" in shown.split("#1", 1)[1], shown


def test_a_job_on_a_node_whose_gpus_are_not_read_now_still_shows_the_nodes_numbers() -> None:
    """Ended, and node2 gone from the pool (or not read yet): the record alone says enough."""
    view = on_node2(state=JobState.DONE, exit_code=0, ended_at=NOW - 60)
    shown = rendered(view)
    assert "node node2" in shown and "last given GPU node2:3" in shown, shown
    assert "CUDA_VISIBLE_DEVICES 3" in shown and "999" not in shown, shown


def test_a_job_on_one_server_has_no_node_row() -> None:
    view = on_node2(gpus=(1,), node=None)
    shown = rendered(view)
    assert "node " not in shown and "given GPU 1" in shown and "CUDA_VISIBLE_DEVICES 1" in shown


def test_a_job_on_a_mig_instance_shows_its_label_and_its_uuid_as_cuda_sees_it() -> None:
    snap = FakeBackend("80G/40G+20G,24G").read()
    instance = next(g for g in snap.gpus if g.label == "0:1")
    view = on_node2(gpus=(instance.index,), node=None)
    shown = rendered(view, gpus=snap.gpus)
    assert "given GPU 0:1" in shown, shown
    assert f"CUDA_VISIBLE_DEVICES {instance.uuid}" in shown, shown
    env = gtui_env(view.spec, view.record, Settings(), QUEUE_PATH, snap.gpus)
    assert env["CUDA_VISIBLE_DEVICES"] == instance.uuid


MIG_QUEUE = f"""
[settings]
poll = "0.2s"
gpus = [0]   # the MIG GPU: its instances are the pool

[[jobs]]
name = "probe"
mem = "5G"
cmd = "echo $CUDA_VISIBLE_DEVICES > probe.dev; {sys.executable} -c 'import time; time.sleep(60)'"
"""


async def test_on_mig_the_detail_view_shows_the_cuda_visible_devices_the_job_got(
    tmp_path: Path,
) -> None:
    """A real job on a fake MIG instance: what the detail view says it was given is what the
    job read from its environment."""
    queue = write_queue(tmp_path, MIG_QUEUE)
    async with dashboard(queue, size=(140, 60), fake="80G/40G+20G,24G") as (app, pilot, engine):
        dev = tmp_path / "probe.dev"
        await until(pilot, lambda: state(engine, "probe") == JobState.RUNNING)
        await until(pilot, lambda: dev.exists() and dev.read_text().strip(), what="its env")
        got = dev.read_text().strip()
        assert got.startswith("MIG-")
        (index,) = engine.view("probe").record.gpus
        read = engine.gpus
        assert read is not None
        label = {g.index: g.label for g in read.snapshot.gpus}[index]
        await open_detail(pilot, app, "probe", f"CUDA_VISIBLE_DEVICES {got}")
        shown = flat(screen_text(app))
        assert f"given GPU {label}" in shown and ":" in label, shown


# -- every key of `gtui status --json` ---------------------------------------------------------


def _hhmm(t: float) -> str:
    return time.strftime("%H:%M", time.localtime(t))


# For each key of job_dict: the words the detail view shows for its value (None: nothing to
# show for this job, e.g. an exit status while it runs). A key job_dict gains fails the test
# until it is given its place here and on the screen.
SHOWN: dict[str, Callable[[dict[str, Any]], list[str] | None]] = {
    "name": lambda d: [d["name"]],
    "state": lambda d: [d["state"]],
    "gpus": lambda d: ["GPU node2:3,4"] if d["gpus"] else None,
    "node": lambda d: [f"node {d['node']}"] if d["node"] else None,
    "mem_mib": lambda d: [format_mib(d["mem_mib"])] if d["mem_mib"] else None,
    "attempt": lambda d: [f"attempt {d['attempt']}"] if d["attempt"] else None,
    "exit_code": lambda d: (
        [how_it_ended(d["exit_code"], d["signal"])] if d["exit_code"] is not None else None
    ),
    "signal": lambda d: [how_it_ended(d["exit_code"], d["signal"])] if d["signal"] else None,
    "started_at": lambda d: [f"started {when(d['started_at'])}"] if d["started_at"] else None,
    "ended_at": lambda d: (
        [f"ended {when(d['ended_at'], d['started_at'])}"] if d["ended_at"] else None
    ),
    "log": lambda d: [f"log {display_path(Path(d['log']))}"] if d["log"] else None,
    "reason": lambda d: [d["reason"]] if d["reason"] else None,
    "reason_at": lambda d: [f"said at {when(d['reason_at'], NOW)}"] if d["reason_at"] else None,
    "diagnosis": lambda d: (
        [kind_label(d["diagnosis"]["kind"]), d["diagnosis"]["line"], d["diagnosis"]["hint"]]
        if d["diagnosis"]
        else None
    ),
    "warnings": lambda d: list(d["warnings"]) or None,
    "progress": lambda d: [f"{d['progress'] * 100:.0f}%"] if d["progress"] is not None else None,
    "progress_text": lambda d: [d["progress_text"]] if d["progress_text"] else None,
    "eta_s": lambda d: [f"in {short_duration(d['eta_s'])}"] if d["eta_s"] is not None else None,
    "finish_at": lambda d: [f"about {_hhmm(d['finish_at'])}"] if d["finish_at"] else None,
    "estimate_basis": lambda d: (
        ["from its progress rate"] if d["estimate_basis"] == "progress" else None
    ),
    "starts_at": lambda d: [f"about {_hhmm(d['starts_at'])}"] if d["starts_at"] else None,
    "starts_in_s": lambda d: (
        [f"in {short_duration(d['starts_in_s'])}"] if d["starts_in_s"] is not None else None
    ),
    "peak_mib": lambda d: [f"peak {format_mib(d['peak_mib'])}"] if d["peak_mib"] else None,
    "peak_gpu_mib": lambda d: (
        ["peaks " + ", ".join(f"node2:{int(g) - S} {format_mib(m)}" for g, m in pairs)]
        if (pairs := list(d["peak_gpu_mib"].items()))
        else None
    ),
    "host_peak_mib": lambda d: (
        [f"host {format_mib(d['host_peak_mib'])}"] if d["host_peak_mib"] else None
    ),
    "gpu_hours": lambda d: [f"{d['gpu_hours']:.2f} GPU-h"] if d["gpu_hours"] else None,
    "requeued_as": lambda d: [d["requeued_as"]] if d["requeued_as"] else None,
    "preempted_by": lambda d: [f"preempted by {d['preempted_by']}"] if d["preempted_by"] else None,
    "preempted_at": lambda d: [when(d["preempted_at"])] if d["preempted_at"] else None,
    "preemptions": lambda d: [f"({d['preemptions']} so far)"] if d["preemptions"] else None,
    "preempting_for": lambda d: (
        [f"making room for {d['preempting_for']}"] if d["preempting_for"] else None
    ),
    "links": lambda d: (
        [links_line((x["tracker"], x["url"]) for x in d["links"])] if d["links"] else None
    ),
}


def test_every_key_gtui_status_knows_about_a_job_is_in_the_detail_view() -> None:
    running = on_node2(
        gpus=(S + 3, S + 4),
        started_at=NOW - 3600,
        peak_mib=12 * G,
        peak_gpu_mib=[12 * G, 9 * G],
        host_peak_mib=3 * G,
        warnings=["runs unisolated (isolate = false): no CUDA_VISIBLE_DEVICES, it sees every GPU"],
        links=[("wandb", "https://wandb.ai/alice/mnist/runs/3kq9x2ab")],
    )
    going = Estimate(
        progress=Progress(0.42, "tqdm", "420/1000"), finish_at=NOW + 1800, basis="progress"
    )
    failed = on_node2(
        gpus=(S + 3, S + 4),
        state=JobState.FAILED,
        started_at=NOW - 7200,
        ended_at=NOW - 3600,
        exit_code=1,
        peak_mib=40 * G,
        diagnosis=Diagnosis("cuda_oom", "torch.OutOfMemoryError: CUDA out of memory.", "ask more"),
    )
    killed = on_node2(
        gpus=(S + 3, S + 4), state=JobState.KILLED, ended_at=NOW - 60, exit_code=None, signal=9
    )
    waiting = on_node2(
        gpus=(),
        state=JobState.QUEUED,
        attempt=0,
        node=None,
        pid=None,
        log=None,
        started_at=None,
        reason="needs 2 GPUs with 10G: 1 eligible (GPU1000005 3G < 10G)",
        reason_at=NOW - 30,
    )
    starts = Estimate(start_at=NOW + 900)
    preempted = on_node2(
        gpus=(),
        state=JobState.QUEUED,
        attempt=1,
        requeued_as="preempted",
        preempted_by="urgent",
        preempted_at=NOW - 60,
        preemptions=1,
    )
    stopping = on_node2(gpus=(S + 3, S + 4), started_at=NOW - 3600, preempt_for="urgent")
    checked: set[str] = set()
    views = ((running, going), (failed, None), (killed, None), (waiting, starts))
    for view, est in (*views, (preempted, None), (stopping, None)):
        doc = job_dict(view)
        if est is not None:
            estimate_json(doc, est, NOW)
        assert set(doc) == set(SHOWN), "a key of job_dict without its place in SHOWN"
        shown = rendered(view, estimate=est)
        for key, words in SHOWN.items():
            expected = words(doc)
            if expected is None:
                continue
            checked.add(key)
            missing = [w for w in expected if flat(w) not in shown]
            assert not missing, (view.record.state, key, missing, shown)
    assert checked == set(SHOWN), set(SHOWN) - checked  # every key met with a value once
