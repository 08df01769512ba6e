"""Per-job overhead of the Ray executor against the local one.

    python -m benchmarks.ray_overhead [--jobs 40] [--out FILE]

Two figures, each a median (and p90) over ``--jobs`` jobs, on the same machine in the same run:

- launch latency: one ``executor.launch`` call, from the request to a running job with its pid
  (local: a fork/exec of the wrapper; Ray: a call to the node's agent, which starts the
  wrapper detached with ``setsid -f`` and reads its pid back);
- end to next start: a chain of jobs with ``max_parallel = 1`` under a real ``gtui run``; each
  job writes bash's ``$EPOCHREALTIME`` as its first and last act, and the gap between one
  job's last and the next one's first is what the scheduler (and, for Ray, the agent's exit
  poll, the GPU read of the cluster and the next launch) costs.

The cluster is ``ray.cluster_utils.Cluster`` with two nodes on this machine (simulated GPUs),
as in tests/core/exec/test_ray_cluster.py: Ray's calls cross processes, not a network, so a real
cluster adds its network round trips to the Ray figures. Needs the ray extra.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def launch_latency(executor: Any, work: Path, jobs: int) -> list[float]:
    """Seconds per ``launch`` call; each job is `true`, waited for before the next launch."""
    import asyncio

    from gtui.core.exec.base import LaunchRequest

    out = []

    async def one(i: int) -> None:
        req = LaunchRequest(
            name=f"l{i}",
            attempt=1,
            cmd="true",
            cwd=work,
            env={"CUDA_VISIBLE_DEVICES": ""},
            log_dir=work / "logs",
            run_dir=work / "run",
        )
        t0 = time.perf_counter()
        handle = executor.launch(req)
        out.append(time.perf_counter() - t0)
        await executor.wait(handle)

    async def all_of() -> None:
        for i in range(jobs):
            await one(i)

    asyncio.run(all_of())
    return out


def end_to_start(work: Path, jobs: int, cluster: str | None) -> list[float]:
    """Gaps (s) between a job's end and the next one's start, in a chain under `gtui run`."""
    stamps = work / "stamps.txt"
    head = f'[cluster]\nbackend = "ray"\naddress = "{cluster}"\n' if cluster else ""
    body = textwrap.dedent(
        f"""
        [settings]
        max_parallel = 1
        fake_gpus = "1x24G"
        log_dir = "logs"

        [[jobs]]
        name = "c{{i}}"
        cmd = "echo s $EPOCHREALTIME >> {stamps}; echo e $EPOCHREALTIME >> {stamps}"
        gpus = 0
        matrix = {{ i = {list(range(jobs))} }}
        """
    )
    q = work / "chain.toml"
    q.write_text(head + body)
    out = subprocess.run(
        [sys.executable, "-m", "gtui", "run", str(q)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode != 0:
        raise SystemExit(f"gtui run failed: {out.stdout[-2000:]}{out.stderr[-2000:]}")
    lines = [ln.split() for ln in stamps.read_text().splitlines()]
    gaps = []
    last_end = None
    for kind, when in lines:
        t = float(when)
        if kind == "s" and last_end is not None:
            gaps.append(t - last_end)
        if kind == "e":
            last_end = t
    return gaps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=40)
    p.add_argument("--out", type=Path, help="also write the markdown section here")
    ns = p.parse_args(argv)
    from ray.cluster_utils import Cluster

    from gtui.core.exec.local import LocalExecutor
    from gtui.core.exec.ray.cluster import open_cluster

    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "env_vars": {"GTUI_FAKE_GPUS": "1x24G"}},
    )
    c.add_node(num_cpus=1, env_vars={"GTUI_FAKE_GPUS": "1x24G", "GTUI_NODE_NAME": "node2"})
    c.wait_for_nodes()
    rows: dict[str, dict[str, list[float]]] = {}
    try:
        with tempfile.TemporaryDirectory() as d:
            work = Path(d)
            (work / "local").mkdir()
            (work / "ray").mkdir()
            rows["local"] = {
                "launch": launch_latency(LocalExecutor(), work / "local", ns.jobs),
                "gap": end_to_start(work / "local", ns.jobs, None),
            }
            import ray

            executor, _gpus = open_cluster(c.address)
            rows["ray"] = {"launch": launch_latency(executor, work / "ray", ns.jobs)}
            ray.shutdown()
            rows["ray"]["gap"] = end_to_start(work / "ray", ns.jobs, c.address)
    finally:
        c.shutdown()
    ms = 1000.0
    lines = [
        "## Ray executor: per-job overhead against the local executor",
        "",
        f"`python -m benchmarks.ray_overhead --jobs {ns.jobs}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: a 2-node "
        "`ray.cluster_utils.Cluster` on this machine (Ray's calls cross processes, not a "
        "network: a real cluster adds its round trips). Median / p90 over the jobs.",
        "",
        "| executor | launch latency | end -> next start (chain, `gtui run`) |",
        "| --- | --- | --- |",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {statistics.median(r['launch']) * ms:.1f} / "
            f"{_pct(r['launch'], 0.9) * ms:.1f} ms | {statistics.median(r['gap']) * ms:.1f} / "
            f"{_pct(r['gap'], 0.9) * ms:.1f} ms |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if ns.out:
        ns.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
