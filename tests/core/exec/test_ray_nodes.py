"""A cluster's node names and GPU numbers outlive a scheduler, without Ray.

The pool numbers node k's GPU i as k * NODE_GPU_STRIDE + i, and records keep those numbers. A
scheduler started after a node joined or died must number every node as the one before it did,
or a re-adopted job is counted on another node's GPU and its own GPU looks free (double-booked).
A node that died while no scheduler ran loses its jobs as one dying under a running scheduler
does. Ray is stood in for by a few lines here (``FakeRay``): ``Cluster`` only asks it for its
node list and calls the agents; the real cluster is in tests/core/exec/test_ray_cluster.py.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gtui.core.bus import EventBus
from gtui.core.errors import GtuiError
from gtui.core.exec.base import ExitStatus, Found, Handle, handle_of
from gtui.core.exec.ray.cluster import Cluster, RayExecutor, RayGpus
from gtui.core.exec.ray.nodes import NodeBook
from gtui.core.exec.runner import Launched
from gtui.core.gpus.snapshot import NODE_GPU_STRIDE, GpuInfo, GpuSnapshot, JobUsage
from gtui.core.model import JobRecord, JobState
from gtui.core.sched.recovery import recover
from gtui.core.state.book import JobBook
from gtui.core.state.store import Store

S = NODE_GPU_STRIDE


class _Raised:
    def __init__(self, e: BaseException) -> None:
        self.e = e


class _Late:
    """An answer that is ready at ``ready_at`` (time.monotonic): a busy node's."""

    def __init__(self, value: Any, ready_at: float) -> None:
        self.value, self.ready_at = value, ready_at


class _Method:
    def __init__(self, fn: Callable[..., Any], after: Callable[[], float] = lambda: 0.0) -> None:
        self.fn = fn
        self.after = after

    def remote(self, *args: Any) -> Any:
        try:
            value = self.fn(*args)
        except Exception as e:
            return _Raised(e)
        late = self.after()
        return _Late(value, time.monotonic() + late) if late else value


class FakeAgent:
    """A node's agent: its name, two GPUs, and the jobs (token -> pid, create time) it runs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ours: list[list[JobUsage]] = []  # what each GPU read was told of our jobs here
        self.tokens: dict[str, tuple[int, float]] = {}
        self.statuses: dict[str, ExitStatus] = {}
        self.silent = False  # calls time out: a node that is slow, not declared dead
        self.answer_after = 0.0  # seconds its GPU reading takes to come back
        self.info = _Method(lambda: {"node": name})
        self.gpus = _Method(self._gpus, lambda: self.answer_after)
        self.find = _Method(self._find)
        self.exit_status = _Method(self._exit_status)

    def _gpus(self, mine: list[JobUsage]) -> GpuSnapshot:
        self.ours.append(list(mine))
        gpus = tuple(GpuInfo(i, "fake", f"{self.name}-{i}", 24576, 0, 0, 30) for i in range(2))
        return GpuSnapshot(gpus, 0.0, "fake")

    def _find(self, token: str) -> tuple[int, float] | None:
        if self.silent:
            raise TimeoutError(f"{self.name} does not answer")
        return self.tokens.get(token)

    def _exit_status(self, path: str) -> ExitStatus | None:
        if self.silent:
            raise TimeoutError(f"{self.name} does not answer")
        return self.statuses.get(path)


class FakeRay:
    """What Cluster asks of Ray: the node list (alive and dead) and the results of calls."""

    exceptions = SimpleNamespace(RayActorError=type("RayActorError", (Exception,), {}))

    def __init__(self) -> None:
        self.listed: list[dict[str, Any]] = []

    def node(self, ray_id: str, *, alive: bool = True, why: str = "") -> None:
        self.listed = [n for n in self.listed if n["NodeID"] != ray_id]
        self.listed.append({"NodeID": ray_id, "Alive": alive, "DeathReasonMessage": why})

    def nodes(self) -> list[dict[str, Any]]:
        return [dict(n) for n in self.listed]

    def get(self, ref: Any, timeout: float | None = None) -> Any:
        if isinstance(ref, list):
            return [self.get(r) for r in ref]
        if isinstance(ref, _Raised):
            raise ref.e
        if isinstance(ref, _Late):
            wait = ref.ready_at - time.monotonic()
            if timeout is not None and wait > timeout:
                time.sleep(max(0.0, timeout))
                raise TimeoutError("GetTimeoutError")  # as ray.get's: not ready in time
            time.sleep(max(0.0, wait))
            return ref.value
        return ref


def cluster_of(ray: FakeRay, agents: dict[str, FakeAgent], store: Store | None) -> Cluster:
    """A Cluster over ``ray`` whose agent on Ray node id X is ``agents[X]``."""

    class Stand(Cluster):
        def _agent(self, ray_id: str) -> Any:
            return agents[ray_id]

    return Stand("auto", meta=store, ray=ray)


def bases(cluster: Cluster) -> dict[str, int]:
    return {name: node.base for name, node in cluster.nodes.items()}


def test_a_node_that_joined_between_two_schedulers_renumbers_no_gpu(tmp_path: Path) -> None:
    """node2 and node3 run; the scheduler stops; node1 joins (its name sorts first) and node3's
    raylet is replaced by a new one: every node keeps its numbers, the new one gets the next,
    and a job recorded on node2's GPU 1 is told to node2's agent as its GPU 1."""
    ray = FakeRay()
    agents = {"rb": FakeAgent("node2"), "rc": FakeAgent("node3")}
    ray.node("rb")
    ray.node("rc")
    with Store(tmp_path / "s.db") as store:
        first = bases(cluster_of(ray, agents, store))
        assert sorted(first.values()) == [0, S]
        ray.node("rc", alive=False, why="raylet killed")
        ray.node("ra")
        ray.node("rc2")
        agents |= {"ra": FakeAgent("node1"), "rc2": FakeAgent("node3")}
        cluster = cluster_of(ray, agents, store)
        again = bases(cluster)
        assert again == {**first, "node1": 2 * S}
        RayGpus(cluster).read([JobUsage(pid=7, gpus=(first["node2"] + 1,), mem_mib=1000)])
        assert [u.gpus for u in agents["rb"].ours[-1]] == [(1,)]
        assert agents["ra"].ours[-1] == [] and agents["rc2"].ours[-1] == []
    # The numbers are the store's: a cluster with no store numbers afresh (gtui gpus).
    assert bases(cluster_of(ray, agents, None))["node1"] == 0


def test_two_nodes_of_one_host_name_keep_their_names_when_the_next_scheduler_lists_them_anew(
    tmp_path: Path,
) -> None:
    """The second raylet of a host name gets a suffix; the next scheduler, seeing both at once
    (in whatever order), gives each the name it had, so records still name the right node."""
    ray = FakeRay()
    agents = {"zz": FakeAgent("gpu"), "aa": FakeAgent("gpu")}
    ray.node("zz")
    with Store(tmp_path / "s.db") as store:
        c = cluster_of(ray, agents, store)
        ray.node("aa")
        c.refresh()
        named = {n.ray_id: (n.name, n.base) for n in c.nodes.values()}
        assert named == {"zz": ("gpu", 0), "aa": ("gpu-aa", S)}
        again = cluster_of(ray, agents, store)
        assert {n.ray_id: (n.name, n.base) for n in again.nodes.values()} == named


def test_a_node_that_died_while_no_scheduler_ran_loses_its_jobs_saying_they_may_still_run(
    tmp_path: Path,
) -> None:
    """The next scheduler knows the dead node by the name it had: its jobs end lost (not
    "unknown"), the reason names the node, Ray's word, and that its processes may live on."""
    ray = FakeRay()
    agents = {"rb": FakeAgent("node2"), "rc": FakeAgent("node3")}
    ray.node("rb")
    ray.node("rc")
    with Store(tmp_path / "s.db") as store:
        cluster_of(ray, agents, store)
        ray.node("rc", alive=False, why="the raylet died")
        executor = RayExecutor(cluster_of(ray, agents, store))
    handle = Launched(
        pid=42,
        create_time=1.0,
        log_path=Path(os.devnull),
        status_path=Path(os.devnull),
        node="node3",
    )
    assert not executor.alive(handle)
    got = executor.exit_status(handle)
    waited = asyncio.run(executor.wait(handle))
    for status in (got, waited):
        assert status is not None and status.lost is not None, status
        assert "node3" in status.lost and "the raylet died" in status.lost
        assert "may still run" in status.lost
    assert [n.name for n in executor.cluster.live()] == ["node2"]


def test_a_job_whose_node_was_not_recorded_is_looked_for_on_every_node(tmp_path: Path) -> None:
    """The driver died between committing a start and recording the pid: find asks every
    agent and says which node runs it; the status file is asked of every node; and while one
    node does not answer, find cannot say the job is not running (it raises)."""
    ray = FakeRay()
    agents = {"rb": FakeAgent("node2"), "rc": FakeAgent("node3")}
    ray.node("rb")
    ray.node("rc")
    executor = RayExecutor(cluster_of(ray, agents, None))
    assert executor.find("tok") is None
    agents["rc"].tokens["tok"] = (99, 5.0)
    assert executor.find("tok") == Found(99, 5.0, node="node3")
    agents["rc"].statuses["/run/j.1.status"] = ExitStatus(0, None)
    unplaced = Launched(
        pid=0,
        create_time=0.0,
        log_path=Path(os.devnull),
        status_path=Path("/run/j.1.status"),
        node=None,
    )
    assert executor.exit_status(unplaced) == ExitStatus(0, None)
    agents["rb"].silent = True
    del agents["rc"].tokens["tok"]
    with pytest.raises(GtuiError, match="node2"):
        executor.find("tok")


class _Unanswered:
    """An executor one of whose places cannot be asked whether it runs a job."""

    def find(self, token: str) -> Found | None:
        raise GtuiError("node node2 did not answer whether it runs the job")

    def exit_status(self, handle: Handle) -> ExitStatus | None:
        return None

    def alive(self, handle: Handle) -> bool:
        return True


class _FoundOn:
    def find(self, token: str) -> Found | None:
        return Found(99, 5.0, node="node3")

    def alive(self, handle: Handle) -> bool:
        return True

    def exit_status(self, handle: Handle) -> ExitStatus | None:
        return None


def _started_not_recorded(tmp_path: Path) -> JobBook:
    store = Store(tmp_path / "s.db")
    book = JobBook(store, EventBus(), "q.toml")
    book.names = book.order = ["j"]
    rec = JobRecord(name="j", state=JobState.RUNNING, attempt=1, token="tok", gpus=(S + 1,))
    rec.status_file = str(tmp_path / "j.1.status")
    book.records.put(rec)
    book.commit(rec)
    return book


def test_recovery_never_requeues_a_job_a_node_could_not_be_asked_about(tmp_path: Path) -> None:
    book = _started_not_recorded(tmp_path)
    found = recover(book, _Unanswered(), tmp_path)  # type: ignore[arg-type]
    rec = book.records["j"]
    assert rec.state == JobState.RUNNING and rec.attempt == 1  # not back in the queue
    assert found.adopt == [] and [n for n, _ in found.ended] == ["j"]
    assert any("node2 did not answer" in w for w in rec.warnings), rec.warnings
    book.store.close()


def test_recovery_adopts_a_job_found_by_its_token_on_the_node_that_runs_it(tmp_path: Path) -> None:
    book = _started_not_recorded(tmp_path)
    found = recover(book, _FoundOn(), tmp_path)  # type: ignore[arg-type]
    rec = book.records["j"]
    assert rec.node == "node3" and rec.pid == 99
    assert found.adopt == [("j", handle_of(rec))] and found.adopt[0][1].node == "node3"
    book.store.close()


def test_the_node_book_appends_new_names_and_never_renumbers() -> None:
    book = NodeBook(None)
    assert [book.slot(n) for n in ("b", "a", "b")] == [0, 1, 0]
    again = NodeBook(book.dump())
    assert again.slot("c") == 2 and again.slot("a") == 1
    assert NodeBook("not json").slot("x") == 0  # a damaged value: numbered afresh


def test_nodes_first_seen_together_are_numbered_by_name() -> None:
    """As the GPUs are listed (`gtui gpus`): node1's first, whatever Ray's ids."""
    ray = FakeRay()
    agents = {"r1": FakeAgent("node2"), "r2": FakeAgent("node1")}
    ray.node("r1")
    ray.node("r2")
    assert bases(cluster_of(ray, agents, None)) == {"node1": 0, "node2": S}


def test_gtui_gpus_waits_for_a_busy_node_that_the_schedulers_poll_reports_silent() -> None:
    """A node whose agent answers 2 s after it is asked (under load a real cluster's fresh
    agents took longer than the poll's 1.5 s): the scheduler's poll, which must not hold up the
    queue, goes on without it and says so; the one read of ``gtui gpus`` waits and lists it."""
    ray = FakeRay()
    agents = {"r1": FakeAgent("node1"), "r2": FakeAgent("node2")}
    ray.node("r1")
    ray.node("r2")
    agents["r2"].answer_after = 2.0
    poll = RayGpus(cluster_of(ray, agents, None)).read()
    assert {g.node for g in poll.gpus} == {"node1"}
    assert poll.error is not None and "node node2 did not answer" in poll.error
    once = RayGpus(cluster_of(ray, agents, None), RayGpus.ONE_READ_WAIT_S).read()
    assert {(g.node, g.node_index) for g in once.gpus} == {
        (n, i) for n in ("node1", "node2") for i in range(2)
    }
    assert once.error is None
