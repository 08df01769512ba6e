"""Placement over a cluster's pool: every node's GPUs in one pool, each GPU with its
node; a multi-GPU job stays on one node; `[cluster] gpus` / `exclude` name nodes or node:GPU.

Pure: snapshots are built by hand (node k's GPU i is pool GPU k * NODE_GPU_STRIDE + i, as the Ray
executor numbers them), so every assertion can be checked on paper.
"""

from __future__ import annotations

from typing import Any

from gtui.core.gpus.snapshot import NODE_GPU_STRIDE, GpuInfo, GpuSnapshot, gpu_label
from gtui.core.model import Settings
from gtui.core.sched.policy import Candidate, Decision, place

G = 1024


def gpu(node: str, k: int, i: int, total: float = 24, used: float = 0) -> GpuInfo:
    return GpuInfo(
        index=k * NODE_GPU_STRIDE + i,
        name="fake",
        uuid=f"GPU-{node}-{i}",
        mem_total_mib=int(total * G),
        mem_used_mib=int(used * G),
        util=0,
        temperature=40,
        node=node,
        node_index=i,
    )


def cluster(*sizes: int, used: dict[str, float] | None = None) -> GpuSnapshot:
    """Nodes node1, node2, ... with ``sizes[k]`` 24G GPUs each; ``used``: "node:i" -> GiB."""
    used = used or {}
    gpus = [
        gpu(f"node{k + 1}", k, i, used=used.get(f"node{k + 1}:{i}", 0))
        for k, n in enumerate(sizes)
        for i in range(n)
    ]
    return GpuSnapshot(gpus=tuple(gpus), taken_at=0.0, source="fake")


def job(name: str, gpus: int = 1, mem: float | None = 12, order: int = 0) -> Candidate:
    return Candidate(name, gpus, None if mem is None else int(mem * G), order=order)


def run(snapshot: GpuSnapshot, *jobs: Candidate, **settings: Any) -> Decision:
    return place(snapshot, jobs, [], Settings(**settings), dep_states={}, running_count=0, now=0.0)


def labels(decision: Decision, name: str) -> list[str]:
    for start in decision.starts:
        if start.name == name:
            return [gpu_label(g, f"node{g // NODE_GPU_STRIDE + 1}") for g in start.gpus]
    raise AssertionError(f"{name} did not start: {decision.reasons.get(name)}")


def test_a_multi_gpu_job_stays_on_one_node() -> None:
    # node1 has 2 free GPUs with the most memory free, node2 one more; a 3-GPU job fits only
    # on node2 (3 GPUs), never 2 + 1 across nodes.
    snapshot = cluster(2, 3, used={"node2:0": 1, "node2:1": 1, "node2:2": 1})
    d = run(snapshot, job("ddp", gpus=3))
    assert labels(d, "ddp") == ["node2:0", "node2:1", "node2:2"]


def test_a_job_wider_than_every_node_waits_with_a_reason_that_says_so() -> None:
    d = run(cluster(2, 2), job("wide", gpus=3))
    assert d.starts == ()
    assert d.reasons["wide"] == "needs 3 GPUs on one node: the largest node has 2"


def test_single_gpu_jobs_spread_over_every_node() -> None:
    d = run(cluster(2, 2), *(job(f"j{i}", order=i) for i in range(4)))
    nodes = sorted(labels(d, f"j{i}")[0].split(":")[0] for i in range(4))
    assert nodes == ["node1", "node1", "node2", "node2"]


def test_cluster_exclude_names_a_node_or_one_gpu_of_it() -> None:
    d = run(cluster(1, 2), job("a"), job("b", order=1), cluster_exclude=("node1", "node2:0"))
    assert labels(d, "a") == ["node2:1"]
    assert "b" not in {s.name for s in d.starts}


def test_cluster_gpus_keeps_the_pool_to_the_nodes_named() -> None:
    d = run(cluster(2, 2), job("a"), job("b", order=1), job("c", order=2), cluster_gpus=("node2",))
    started = sorted(label for s in ("a", "b") for label in labels(d, s))
    assert started == ["node2:0", "node2:1"]
    assert "c" not in {s.name for s in d.starts}


def test_one_server_is_unchanged_by_the_node_rule() -> None:
    # GPUs without a node (one server): a 3-GPU job takes any 3, as before.
    snapshot = GpuSnapshot(
        gpus=tuple(GpuInfo(i, "A", f"G{i}", 24 * G, 0, 0, 40) for i in range(3)),
        taken_at=0.0,
        source="fake",
    )
    d = run(snapshot, job("ddp", gpus=3))
    assert sorted(d.starts[0].gpus) == [0, 1, 2]


def test_cluster_reserve_keeps_gpus_of_the_named_node_free() -> None:
    # reserve = {node1 = 1}: of node1's 2 GPUs, one stays free of our jobs; node2 has none kept.
    jobs = [job(f"j{i}", order=i) for i in range(4)]
    d = run(cluster(2, 2), *jobs, cluster_reserve=(("node1", 1),))
    started = sorted(label for s in d.starts for label in labels(d, s.name))
    assert [x for x in started if x.startswith("node1")] in (["node1:0"], ["node1:1"])
    assert [x for x in started if x.startswith("node2")] == ["node2:0", "node2:1"]
    assert len(d.starts) == 3


def test_cluster_reserve_can_keep_a_multi_gpu_job_off_a_node() -> None:
    # A 2-GPU job fits node1 (most memory free) only by eating its reserve: it goes to node2.
    snapshot = cluster(2, 2, used={"node2:0": 4, "node2:1": 4})
    d = run(snapshot, job("ddp", gpus=2), cluster_reserve=(("node1", 1),))
    assert labels(d, "ddp") == ["node2:0", "node2:1"]


# [settings] gpus / exclude naming nodes: the same fields as [cluster]'s, and a bare
# number on a cluster names that GPU on every node (its index there, as nvidia-smi shows it).


def test_settings_gpus_mixing_a_node_and_a_number_is_their_union() -> None:
    # gpus = ["node1", 1]: every GPU of node1, and GPU 1 of every other node; node2:0 is out.
    jobs = [job(f"j{i}", order=i) for i in range(5)]
    d = run(cluster(2, 2, 2), *jobs, gpus=(1,), cluster_gpus=("node1",))
    started = sorted(label for s in d.starts for label in labels(d, s.name))
    assert started == ["node1:0", "node1:1", "node2:1", "node3:1"]


def test_a_bare_number_in_exclude_names_that_gpu_on_every_node() -> None:
    d = run(cluster(2, 2), *(job(f"j{i}", order=i) for i in range(4)), exclude=(0,))
    started = sorted(label for s in d.starts for label in labels(d, s.name))
    assert started == ["node1:1", "node2:1"]


def test_exclude_mixing_a_node_a_node_gpu_and_a_number() -> None:
    jobs = [job(f"j{i}", order=i) for i in range(6)]
    d = run(cluster(2, 2, 2), *jobs, exclude=(1,), cluster_exclude=("node2", "node3:0"))
    assert sorted(label for s in d.starts for label in labels(d, s.name)) == ["node1:0"]


def test_a_quarantined_gpu_stays_one_gpu_of_one_node() -> None:
    # Quarantine names pool numbers: node1's GPU 1 (pool 1) out must not take GPU 1 of node2.
    d = run(cluster(2, 2), *(job(f"j{i}", order=i) for i in range(4)), pool_exclude=(1,))
    started = sorted(label for s in d.starts for label in labels(d, s.name))
    assert started == ["node1:0", "node2:0", "node2:1"]


def test_a_node_name_that_matches_no_node_is_said() -> None:
    d = run(cluster(1, 1), job("a"), cluster_gpus=("node9",))
    assert d.starts == ()
    assert "node9 not found" in d.reasons["a"]


def test_pool_totals_for_the_file_checks_follow_the_same_rule() -> None:
    from gtui.core.sched.policy import pool_totals

    settings = Settings(gpus=(1,), cluster_gpus=("node1",), cluster_exclude=("node3",))
    assert len(pool_totals(settings, cluster(2, 2, 2)) or []) == 3  # node1:0, node1:1, node2:1


def test_a_reason_names_a_cluster_gpu_as_node_and_index() -> None:
    # node1:0 holds 20G of someone else's: a 12G job waits, and its reason says which GPU.
    d = run(cluster(1, used={"node1:0": 20}), job("a"))
    assert d.starts == ()
    assert "GPU node1:0 " in d.reasons["a"], d.reasons["a"]
