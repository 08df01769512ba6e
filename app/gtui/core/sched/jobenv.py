"""What a job is started with on top of the user's environment, and how its GPUs are numbered
for it: the one rule the engine launches by (gtui.core.sched.runs) and the job detail view shows
(gtui.ui.detail), so the two never disagree.

Pure functions of the queue's values and a GPU snapshot: a cluster's pool numbers node k's GPU
i as ``k * NODE_GPU_STRIDE + i`` and the job sees ``i``; a MIG instance is named by its
``MIG-...`` UUID, the only way CUDA takes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from gtui.core.gpus.snapshot import NODE_GPU_STRIDE, GpuInfo
from gtui.core.model import JobRecord, JobSpec, Settings
from gtui.core.queue.queuefile import isolated
from gtui.core.sched.requeue import resume_env

# What OpenMP and MKL size their thread pools by: a job with ``cpus`` gets them set to it.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def on_node(gpus: Sequence[int], infos: Sequence[GpuInfo]) -> tuple[str | None, tuple[int, ...]]:
    """The node of a placement and the GPUs' indices there. One server (or GPUs not in
    ``infos``): no node, and each GPU's number within its node's block of the pool, which on one
    server is the index itself."""
    gpus = tuple(gpus)
    if not gpus:
        return None, gpus
    by_index = {g.index: g for g in infos}
    found = [by_index.get(g) for g in gpus]
    if any(i is None or i.node is None or i.node_index is None for i in found):
        return None, tuple(g % NODE_GPU_STRIDE for g in gpus)
    return found[0].node, tuple(i.node_index for i in found)  # type: ignore[union-attr,misc]


def cuda_visible_devices(gpus: Sequence[int], infos: Sequence[GpuInfo]) -> str:
    """CUDA_VISIBLE_DEVICES for ``gpus``: the indices the job's node knows them by, and a MIG
    instance by its ``MIG-...`` UUID."""
    mig = {g.index: g.uuid for g in infos if g.mig_parent is not None}
    local = on_node(gpus, infos)[1]
    return ",".join(mig.get(g) or str(n) for g, n in zip(gpus, local, strict=True))


def tracker_env(spec: JobSpec, given: dict[str, str]) -> dict[str, str]:
    """What a matrix job tells experiment trackers: its values as ``GTUI_PARAMS`` (JSON) and its
    sweep's name as ``WANDB_RUN_GROUP``, so W&B groups the sweep's runs; a value the queue's or
    the job's own env sets is left to win (the caller applies those after)."""
    if not spec.matrix:
        return {}
    out = {"GTUI_PARAMS": json.dumps(dict(spec.matrix), sort_keys=False)}
    if spec.sweep:
        out["WANDB_RUN_GROUP"] = spec.sweep
    return {k: v for k, v in out.items() if k not in given}


def job_env(
    spec: JobSpec,
    rec: JobRecord,
    settings: Settings,
    queue_path: Path,
    gpus: Sequence[int],
    infos: Sequence[GpuInfo],
    from_file: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment gtui gives attempt ``rec.attempt`` of ``spec`` on ``gpus`` (read in
    ``infos``), on top of the user's own: the queue's ``env``, then the variables of the
    job's ``env_file`` (``from_file``), then a matrix job's tracker variables where neither set
    them, then the job's own ``env``, then gtui's own."""
    env = dict(settings.env)
    if from_file:
        env.update(from_file)
    env.update(tracker_env(spec, env))
    env.update(spec.env)
    if spec.cpus:  # thread pools sized to the cores asked, unless the job or queue says
        for key in THREAD_VARS:
            env.setdefault(key, str(spec.cpus))
    env["PYTHONUNBUFFERED"] = "1"
    env["GTUI_JOB"] = spec.name
    env["GTUI_ATTEMPT"] = str(rec.attempt)
    env["GTUI_QUEUE"] = str(queue_path)
    env["GTUI_TOKEN"] = str(rec.token)
    # Always: CUDA then numbers GPUs as NVML and nvidia-smi do, so `--gpu 1` in an
    # unisolated job names the GPU gtui gave it.
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    if isolated(spec, settings):
        env["CUDA_VISIBLE_DEVICES"] = cuda_visible_devices(gpus, infos)
    if rec.port is not None:
        env["GTUI_PORT"] = str(rec.port)
    env.update(resume_env(rec))  # GTUI_RESUME / GTUI_PREEMPTED after a stop not its fault
    return env


def launch_limits(spec: JobSpec, settings: Settings) -> tuple[int | None, int | None]:
    """With ``enforce = true``, the cores and memory the executor limits the job to (its
    ``cpus`` and ``ram``; ``ram = "auto"`` sets no memory limit: its size is a guess);
    without, none."""
    if not settings.enforce:
        return None, None
    return spec.cpus, spec.ram_mib
