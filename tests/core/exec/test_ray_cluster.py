"""The Ray executor on a real local multi-node cluster, through the real command line.

One ``ray.cluster_utils.Cluster`` per module (three nodes; starting one costs ~6 s), each node a
raylet of its own on this machine with its own simulated GPUs (``GTUI_FAKE_GPUS`` in its
environment) and name (``GTUI_NODE_NAME``), so one machine stands for three servers. Every
scheduler is a real ``gtui run --backend ray`` process; jobs are real processes that the node
agents start detached. Only the GPUs are simulated. Skipped (with the reason) only where Ray
cannot be imported; CI installs ``.[test,ray]`` and runs them (marker ``ray``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from gtui.core.gpus.snapshot import NODE_GPU_STRIDE
from tests.conftest import gtui, write_queue
from tests.waiting import wait_for

ray_cluster_utils = pytest.importorskip(
    "ray.cluster_utils", reason="Ray is not installed: pip install -e '.[test,ray]'"
)

pytestmark = pytest.mark.ray

NODES = {"node1": "2x24G", "node2": "2x24G", "node3": "2x24G"}
SLOW_S = 120.0  # a deadline for what waits on Ray: a node declared dead (~3 s here), a job started
# on a node whose first Python worker Ray starts then (a minute on a 2-core machine under load)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Three nodes, each a raylet with its own simulated GPUs; the head is node1."""
    env_keep = {k: os.environ.get(k) for k in ("RAY_ADDRESS",)}
    c = ray_cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "env_vars": {"GTUI_FAKE_GPUS": NODES["node1"], "GTUI_NODE_NAME": "node1"},
            # A dead raylet is declared dead after ~3 s instead of ~15-30 s: the node-loss
            # test waits for it.
            "_system_config": {
                "health_check_initial_delay_ms": 0,
                "health_check_period_ms": 1000,
                "health_check_failure_threshold": 3,
            },
        },
    )
    for name in ("node2", "node3"):
        c.add_node(num_cpus=1, env_vars={"GTUI_FAKE_GPUS": NODES[name], "GTUI_NODE_NAME": name})
    c.wait_for_nodes()
    try:
        yield c
    finally:
        c.shutdown()
        for k, v in env_keep.items():
            if v is None:
                os.environ.pop(k, None)


def queue(tmp_path: Path, cluster: Any, body: str, settings: str = "") -> Path:
    return write_queue(
        tmp_path,
        f"""
        [cluster]
        backend = "ray"
        address = "{cluster.address}"

        [settings]
        log_dir = "logs"
        {settings}
        """
        + body,
    )


def status(q: Path) -> dict[str, Any]:
    out = gtui("status", str(q), "--json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def jobs(q: Path) -> dict[str, dict[str, Any]]:
    return {j["name"]: j for j in status(q)["jobs"]}


def start_run(q: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gtui", "run", str(q)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def env_of(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out


def test_a_sweep_spreads_over_the_nodes_and_each_job_sees_a_plain_environment(
    tmp_path: Path, cluster: Any
) -> None:
    q = queue(
        tmp_path,
        cluster,
        """
        [[jobs]]
        name = "s{i}"
        cmd = "env > env.{name}.txt; echo gpu={gpu}"
        matrix = { i = [1, 2, 3, 4, 5, 6] }
        mem = "12G"
        """,
        settings='mode = "shared"',
    )
    out = gtui("run", "--backend", "ray", str(q), timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    js = jobs(q)
    assert {j["state"] for j in js.values()} == {"done"}
    assert {j["node"] for j in js.values()} == set(NODES), js  # six GPUs, six jobs: all three
    for name, j in js.items():
        env = env_of(tmp_path / f"env.{name}.txt")
        # Ray's own variables are not the job's; CUDA_VISIBLE_DEVICES is the node's index.
        assert not [k for k in env if k.startswith("RAY_")], sorted(env)
        assert "OMP_NUM_THREADS" not in env and "PYTHONBREAKPOINT" not in env
        local = str(j["gpus"][0] % NODE_GPU_STRIDE)
        assert env["CUDA_VISIBLE_DEVICES"] == local
        assert env["GTUI_JOB"] == name
        assert Path(j["log"]).read_text().strip() == f"gpu={local}"
    # The GPUs in status --json carry their node too.
    nodes = {g.get("node") for g in status(q)["gpus"]}
    assert nodes == set(NODES)


def test_a_multi_gpu_job_gets_two_gpus_of_one_node_and_a_cpu_job_none(
    tmp_path: Path, cluster: Any
) -> None:
    q = queue(
        tmp_path,
        cluster,
        """
        [[jobs]]
        name = "ddp"
        cmd = "echo cvd=$CUDA_VISIBLE_DEVICES gpu={gpu}"
        gpus = 2
        mem = "20G"

        [[jobs]]
        name = "cpu"
        cmd = "echo cvd=[$CUDA_VISIBLE_DEVICES]"
        gpus = 0
        """,
    )
    out = gtui("run", str(q), timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    js = jobs(q)
    ddp = js["ddp"]
    assert len({g // NODE_GPU_STRIDE for g in ddp["gpus"]}) == 1  # one node
    assert Path(ddp["log"]).read_text().strip() == "cvd=0,1 gpu=0,1"
    assert Path(js["cpu"]["log"]).read_text().strip() == "cvd=[]"
    assert js["cpu"]["node"] in NODES
    text = gtui("status", str(q)).stdout  # the human status names node:GPU
    node = ddp["node"]
    assert f"{node}:0,{node}:1" in text and f"GPU {node}:1 " in text


def test_kill_stops_a_job_on_its_node_and_records_it_killed(tmp_path: Path, cluster: Any) -> None:
    q = queue(
        tmp_path,
        cluster,
        """
        [[jobs]]
        name = "long"
        cmd = "sleep 300"
        mem = "1G"
        """,
    )
    run = start_run(q)
    try:
        wait_for(lambda: jobs(q)["long"]["state"] == "running", SLOW_S, "long to run")
        pid = status_pid(q, "long")
        out = gtui("kill", str(q), "long", timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        assert run.wait(timeout=60) == 1
    finally:
        stop(run)
    assert jobs(q)["long"]["state"] == "killed"
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def status_pid(q: Path, name: str) -> int:
    from gtui.core.paths import queue_paths
    from gtui.core.state.store import Store

    store = Store(queue_paths(q).db, readonly=True)
    try:
        rec = store.load().get(name)
    finally:
        store.close()
    if rec is not None and rec.pid:
        return int(rec.pid)
    raise AssertionError(f"no pid for {name}")


def stop(run: subprocess.Popen[str]) -> None:
    if run.poll() is None:
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait()


def test_a_killed_scheduler_leaves_jobs_running_and_the_next_one_readopts_them(
    tmp_path: Path, cluster: Any
) -> None:
    """SIGKILL the driver: the detached agents and their jobs go on; the next `gtui run` finds
    the agents by name, records the exit of the job that ended meanwhile and waits for the one
    still running. Nothing runs twice."""
    gate = tmp_path / "gate"
    q = queue(
        tmp_path,
        cluster,
        f"""
        [[jobs]]
        name = "quick"
        cmd = "echo run >> quick.runs; while [ ! -e {gate} ]; do sleep 0.05; done; exit 0"
        mem = "1G"

        [[jobs]]
        name = "slow"
        cmd = "echo run >> slow.runs; while [ ! -e {gate}.2 ]; do sleep 0.05; done; exit 3"
        mem = "1G"
        """,
    )
    run = start_run(q)
    try:
        wait_for(
            lambda: {j["state"] for j in jobs(q).values()} == {"running"}, SLOW_S, "both running"
        )
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        gate.touch()  # quick ends while no scheduler runs
        wait_for(lambda: not psutil.pid_exists(status_pid(q, "quick")), 30, "quick to end")
        # Meanwhile a command sees no node: both stay as recorded (quick's end is for the next
        # scheduler to record), and touching a running job is refused, saying what to do.
        offline = jobs(q)
        assert {n: j["state"] for n, j in offline.items()} == {"quick": "running", "slow": "running"}
        assert all(j["node"] and j["diagnosis"] is None for j in offline.values()), offline
        r = gtui("pause", str(q), "slow")
        assert r.returncode == 2 and f"gtui run {q}`" in r.stderr, r.stderr
        run = start_run(q)
        wait_for(lambda: jobs(q)["quick"]["state"] == "done", SLOW_S, "quick recorded done")
        assert jobs(q)["slow"]["state"] == "running"
        Path(f"{gate}.2").touch()
        assert run.wait(timeout=60) == 1  # slow failed (exit 3)
    finally:
        stop(run)
    js = jobs(q)
    assert js["slow"]["state"] == "failed" and js["slow"]["exit_code"] == 3
    assert (tmp_path / "quick.runs").read_text() == "run\n"
    assert (tmp_path / "slow.runs").read_text() == "run\n"


def test_a_node_removed_mid_run_loses_its_job_once_ray_declares_it_dead_and_it_runs_elsewhere(
    tmp_path: Path, cluster: Any
) -> None:
    """A fourth node with the biggest GPU takes the job; it is removed (its raylet killed).
    The job is not reported done: once Ray declares the node dead it is failed as lost, with
    that reason, and its retry runs on another node."""
    node4 = cluster.add_node(
        num_cpus=1, env_vars={"GTUI_FAKE_GPUS": "1x80G", "GTUI_NODE_NAME": "node4"}
    )
    cluster.wait_for_nodes()
    gate, ready = tmp_path / "gate", tmp_path / "ready"
    q = queue(
        tmp_path,
        cluster,
        f"""
        [[jobs]]
        name = "ready"
        gpus = 0
        cmd = "while [ ! -e {ready} ]; do sleep 0.05; done"

        [[jobs]]
        name = "big"
        after = ["ready"]
        cmd = "echo $GTUI_ATTEMPT >> big.runs; while [ ! -e {gate} ]; do sleep 0.05; done"
        mem = "20G"
        retries = 1
        """,
    )
    run = start_run(q)
    pid = 0
    try:
        # big may start once the scheduler has read node4's GPU: under load a node just added
        # can miss the first polls' 1.5 s, and big would fit a 24G GPU elsewhere.
        wait_for(
            lambda: any(g.get("node") == "node4" and g.get("mem_total_mib") for g in status(q)["gpus"]),
            SLOW_S,
            "the scheduler to read node4's GPU",
        )
        ready.touch()
        wait_for(lambda: jobs(q)["big"]["node"] == "node4", SLOW_S, "big to run on node4")
        pid = status_pid(q, "big")
        cluster.remove_node(node4, allow_graceful=False)
        wait_for(lambda: jobs(q)["big"]["attempt"] == 2, SLOW_S, "big's retry")
        js = jobs(q)
        assert js["big"]["node"] in NODES and js["big"]["state"] == "running"
        gate.touch()
        assert run.wait(timeout=60) == 0
        said = run.stdout.read() if run.stdout else ""
    finally:
        gate.touch()
        ready.touch()
        stop(run)
        if pid:
            wait_for(lambda: not psutil.pid_exists(pid), 30, "the lost job's process to end")
    # The event log said why: lost with its node, then retried (never "done" for attempt 1).
    assert "node node4 declared dead by Ray" in said, said
    assert (tmp_path / "big.runs").read_text() == "1\n2\n"


def test_a_scheduler_restarted_after_nodes_came_and_went_counts_each_job_on_its_own_gpu(
    tmp_path: Path, cluster: Any
) -> None:
    """"a" holds node3's GPU 1 and "c" node9's GPU; the scheduler is killed; node0 joins (its
    name sorts first, so numbering nodes by the names alive would shift every node) and node9
    dies. The next scheduler counts "a" on node3:1, so "b", which needs that GPU too, waits
    while the CPU job "d" behind it starts; "c" is lost with its node, saying its process may
    still run (it does), never "unknown". The file's fake_gpus is said to be unused here."""
    node9 = cluster.add_node(
        num_cpus=1, env_vars={"GTUI_FAKE_GPUS": "1x16G", "GTUI_NODE_NAME": "node9"}
    )
    cluster.wait_for_nodes()
    node0 = None
    gate = tmp_path / "gate"
    hold = f"while [ ! -e {gate} ]; do sleep 0.05; done"
    jobs_ac = f"""
        [[jobs]]
        name = "a"
        cmd = "echo run >> a.runs; {hold}"
        mem = "20G"

        [[jobs]]
        name = "c"
        cmd = "{hold}"
        mem = "10G"
        """
    settings = 'gpus = ["node3:1", "node9"]\nfake_gpus = "4x24G"'
    q = queue(tmp_path, cluster, jobs_ac, settings)
    run = start_run(q)
    c_pid = 0
    try:
        wait_for(
            lambda: {n: (j["state"], j["node"]) for n, j in jobs(q).items()}
            == {"a": ("running", "node3"), "c": ("running", "node9")},
            SLOW_S,
            "a on node3 and c on node9",
        )
        c_pid = status_pid(q, "c")
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=30)
        node0 = cluster.add_node(
            num_cpus=1, env_vars={"GTUI_FAKE_GPUS": "2x24G", "GTUI_NODE_NAME": "node0"}
        )
        cluster.remove_node(node9, allow_graceful=False)
        cluster.wait_for_nodes()  # node0 joined, node9 declared dead
        more = """
        [[jobs]]
        name = "b"
        cmd = "echo run >> b.runs"
        mem = "20G"

        [[jobs]]
        name = "d"
        cmd = "true"
        gpus = 0
        """
        queue(tmp_path, cluster, jobs_ac + more, settings)
        run = start_run(q)
        wait_for(lambda: jobs(q)["d"]["state"] == "done", SLOW_S, "d done")
        js = jobs(q)
        assert js["a"]["state"] == "running" and js["b"]["state"] == "queued", js
        assert js["c"]["state"] == "failed" and js["c"]["diagnosis"]["kind"] == "node_lost"
        assert "node node9 declared dead by Ray" in js["c"]["diagnosis"]["line"]
        assert "may still run" in js["c"]["diagnosis"]["line"]
        assert psutil.pid_exists(c_pid)  # as said: a dead raylet's detached job lives on
        gate.touch()
        wait_for(lambda: jobs(q)["b"]["state"] == "done", SLOW_S, "b done after a")
        assert run.wait(timeout=60) == 1  # c failed
        said = run.stdout.read() if run.stdout else ""
    finally:
        gate.touch()
        stop(run)
        if node0 is not None:
            cluster.remove_node(node0)  # the other tests' nodes are node1-3
        if c_pid:
            wait_for(lambda: not psutil.pid_exists(c_pid), 30, "c's process to end")
    assert jobs(q)["a"]["state"] == "done" and jobs(q)["b"]["node"] == "node3"
    assert (tmp_path / "a.runs").read_text() == "run\n"
    assert (tmp_path / "b.runs").read_text() == "run\n"
    assert "'4x24G' (fake_gpus, --fake-gpus) are for this machine only" in said, said


def test_an_address_where_nothing_listens_is_one_sentence_not_a_minute_of_retries(
    tmp_path: Path,
) -> None:
    q = write_queue(
        tmp_path, '[cluster]\nbackend = "ray"\naddress = "127.0.0.1:1"\n[[jobs]]\ncmd = "true"\n'
    )
    out = gtui("run", str(q), timeout=60)
    assert out.returncode == 2
    assert "nothing answers at the Ray cluster's address 127.0.0.1:1" in out.stderr
    assert "Traceback" not in out.stderr


def test_joining_restores_the_sigterm_handler_and_pythonbreakpoint(cluster: Any) -> None:
    """ray.init replaces the SIGTERM handler and sets PYTHONBREAKPOINT; connect undoes both."""
    import ray

    from gtui.core.exec.ray.cluster import connect

    def mine(signum: int, frame: object) -> None:
        """A handler of our own, to recognise."""

    before = signal.signal(signal.SIGTERM, mine)
    os.environ.pop("PYTHONBREAKPOINT", None)
    try:
        connect(cluster.address)
        assert signal.getsignal(signal.SIGTERM) is mine
        assert "PYTHONBREAKPOINT" not in os.environ
    finally:
        ray.shutdown()
        signal.signal(signal.SIGTERM, before)


def test_a_killed_agent_takes_no_job_with_it(tmp_path: Path, cluster: Any) -> None:
    """Jobs are detached from their agent (setsid, double fork), and no subreaper adopts them:
    killing the agent while a job runs leaves the job running; a new agent is started and the
    job's exit is still recorded."""
    import ray

    from gtui.core.exec.ray.cluster import AGENT_PREFIX, NAMESPACE

    gate = tmp_path / "gate"
    q = queue(
        tmp_path,
        cluster,
        f"""
        [[jobs]]
        name = "survivor"
        cmd = "while [ ! -e {gate} ]; do sleep 0.05; done; exit 0"
        mem = "1G"
        """,
    )
    run = start_run(q)
    ray.init(address=cluster.address, namespace=NAMESPACE, log_to_driver=False)
    try:
        wait_for(lambda: jobs(q)["survivor"]["state"] == "running", SLOW_S, "survivor to run")
        pid = status_pid(q, "survivor")
        node = jobs(q)["survivor"]["node"]
        agents = [
            a["name"]
            for a in ray.util.list_named_actors(all_namespaces=True)
            if a["name"].startswith(AGENT_PREFIX)
        ]
        mine = []
        for name in agents:
            actor = ray.get_actor(name, namespace=NAMESPACE)
            info = ray.get(actor.info.remote())
            if info["node"] == node:
                assert ray.get(actor.subreaper.remote()) is None  # init adopts detached jobs
                mine.append(actor)
        assert mine
        for actor in mine:
            ray.kill(actor, no_restart=True)
        wait_for(lambda: all(_dead(ray, a) for a in mine), SLOW_S, "the agent to be gone")
        assert psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        gate.touch()
        assert run.wait(timeout=90) == 0
    finally:
        gate.touch()
        stop(run)
        ray.shutdown()
    assert jobs(q)["survivor"]["state"] == "done"


def _dead(ray: Any, actor: Any) -> bool:
    try:
        ray.get(actor.info.remote(), timeout=5)
    except ray.exceptions.RayActorError:
        return True
    return False


def test_gtui_gpus_lists_every_nodes_gpus_with_its_node(cluster: Any) -> None:
    env = {**os.environ, "RAY_ADDRESS": cluster.address}
    out = gtui("gpus", "--backend", "ray", "--json", env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    gpus = json.loads(out.stdout)
    assert {(g["node"], g["node_index"]) for g in gpus} >= {
        (n, i) for n in NODES for i in range(2)
    }
    text = gtui("gpus", "--backend", "ray", env=env, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "node2:1" in text.stdout and "SIMULATED GPUs (Ray nodes)" in text.stdout


def test_pause_and_resume_stop_and_continue_a_job_on_its_node(tmp_path: Path, cluster: Any) -> None:
    gate = tmp_path / "gate"
    q = queue(
        tmp_path,
        cluster,
        f"""
        [[jobs]]
        name = "frozen"
        cmd = "while [ ! -e {gate} ]; do sleep 0.05; done"
        mem = "1G"
        """,
    )
    run = start_run(q)
    try:
        wait_for(lambda: jobs(q)["frozen"]["state"] == "running", SLOW_S, "frozen to run")
        pid = status_pid(q, "frozen")
        assert gtui("pause", str(q), "frozen", timeout=60).returncode == 0
        wait_for(lambda: jobs(q)["frozen"]["state"] == "suspended", SLOW_S, "suspended")
        assert psutil.Process(pid).status() == psutil.STATUS_STOPPED
        assert gtui("resume", str(q), "frozen", timeout=60).returncode == 0
        wait_for(
            lambda: psutil.Process(pid).status() != psutil.STATUS_STOPPED, SLOW_S, "it to continue"
        )
        gate.touch()
        assert run.wait(timeout=60) == 0
    finally:
        gate.touch()
        stop(run)
    assert jobs(q)["frozen"]["state"] == "done"
