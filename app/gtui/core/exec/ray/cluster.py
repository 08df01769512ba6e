"""The Ray executor and the cluster's GPUs: how the scheduler runs jobs on Ray.

``connect`` joins the cluster (Ray imported here, lazily: 0.3-0.5 s and ~260 MB), restoring
what ``ray.init`` changes in the process (the SIGTERM handler, ``PYTHONBREAKPOINT``). ``Cluster``
finds or starts one agent per node (:mod:`gtui.core.exec.ray.agent`), a detached actor named
after its Ray node id, so a scheduler started after a crash finds the same agents, and with
them the jobs, in a few ms. :class:`RayExecutor` is the executor interface over the agents;
:class:`RayGpus` the GPU backend: every node's GPUs as one pool, numbered across nodes, each
GPU carrying its node and its index there (``node2:3``). Each node's name and number are kept
in the queue's store (:mod:`gtui.core.exec.ray.nodes`): the records keep those numbers, so the
next scheduler must give them the same.

A node whose agent stops answering is not given up at once: Ray takes ~15 s to declare a dead
raylet dead, and detached jobs on a node that is only slow may still run. Its jobs are counted
lost once Ray has declared the node dead, and the reason says so.

Size: the executor interface (14 methods) over remote agents, the per-node exit pollers with
their acknowledgements, node naming and the GPU pool of the cluster belong together.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import signal
import socket
import stat
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from gtui.core.errors import GtuiError
from gtui.core.exec import runner
from gtui.core.exec.base import (
    ExitStatus,
    Found,
    Handle,
    LaunchError,
    LaunchRequest,
    file_size,
    read_file_range,
)
from gtui.core.exec.ray.nodes import Meta, NodeBook
from gtui.core.gpus.snapshot import NODE_GPU_STRIDE, GpuInfo, GpuSnapshot, JobUsage

NAMESPACE = "gtui"
AGENT_PREFIX = "gtui-agent-"
AGENT_THREADS = 32  # concurrent calls per agent: a long log read never holds up a launch
CALL_TIMEOUT_S = 10.0
EXITS_WAIT_S = 2.0  # an exit poll waits this long on the node for some job to end
DEAD_CHECK_S = 1.0  # while an agent does not answer, how often to ask Ray about its node
_UNKNOWN = ExitStatus(None, None)


class ClusterError(GtuiError):
    """The cluster cannot be used (Ray missing, not reachable, a token problem)."""


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise ClusterError(
            "the Ray backend needs Ray: pip install 'gtui[ray]' (on every server)"
        ) from e
    return ray


def token_file() -> Path:
    """Where Ray keeps the cluster's token ($RAY_AUTH_TOKEN_PATH, else ~/.ray/auth_token)."""
    return Path(os.environ.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")


def secure_token() -> str | None:
    """Token authentication: with a token file, the driver uses token mode as the head does,
    and the file is made private (0600). Returns a note for the user when it changed one."""
    path = token_file()
    if os.environ.get("RAY_AUTH_TOKEN"):
        os.environ.setdefault("RAY_AUTH_MODE", "token")
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    if st.st_mode & 0o077:
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        return f"{path} was readable by others: made private (0600)"
    return None


def _check_reachable(address: str) -> str | None:
    """Fail at once, in one sentence, where nothing listens at the cluster's address: ray.init
    would retry for minutes. "auto" is resolved as Ray does (RAY_ADDRESS, then the address the
    last `ray start` on this machine wrote); a ray:// client address is left to Ray."""
    if address.startswith("ray://"):
        return None
    target = address
    if address == "auto":
        try:
            from ray._private.services import canonicalize_bootstrap_address

            target = canonicalize_bootstrap_address("auto") or ""
        except Exception:
            target = ""
        if not target:
            raise ClusterError(
                'no Ray cluster found on this machine (address = "auto"): start one with '
                '`ray start --head`, or give [cluster] address = "HOST:PORT"'
            )
    host, _, port = target.rpartition(":")
    if not port.isdigit():
        raise ClusterError(f'Ray address {address!r}: expected HOST:PORT, "auto" or ray://...')
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=3.0).close()
    except OSError as e:
        raise ClusterError(
            f"nothing answers at the Ray cluster's address {target} ({e.strerror or e}); "
            "is `ray start --head` running there?"
        ) from None
    return target


def _check_token(ray: Any, target: str) -> None:
    """One call to the head's GCS says at once whether it takes this process's token: ray.init
    would retry an unauthenticated join for about 20 s, printing a warning a second, and then
    say only that it failed to connect (seen on Ray 2.60 with a head in token mode)."""
    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]

        refused = ray.exceptions.AuthenticationError
    except (ImportError, AttributeError):  # another Ray: ray.init says what it says
        return
    try:
        GcsClient(address=target)
    except refused:
        raise ClusterError(
            f"the Ray cluster at {target} refused this gtui: it uses token authentication "
            f"and {_token_words()}; copy the head's ~/.ray/auth_token to the same place here "
            "(chmod 600) (docs/cluster.md)"
        ) from None
    except Exception:
        return


def _token_words() -> str:
    """The driver's side of token authentication, in words."""
    auth = os.environ.get("RAY_AUTH_MODE", "disabled")
    where = "$RAY_AUTH_TOKEN" if os.environ.get("RAY_AUTH_TOKEN") else str(token_file())
    have = "present" if os.environ.get("RAY_AUTH_TOKEN") or token_file().exists() else "absent"
    return f"here RAY_AUTH_MODE is {auth!r}, token {where} ({have})"


def connect(address: str) -> Any:
    """``ray.init`` the driver into the cluster at ``address`` and undo what it changes in this
    process: it replaces the SIGTERM handler (gtui's ends the scheduler cleanly) and sets
    PYTHONBREAKPOINT in os.environ (jobs would inherit it)."""
    # Before Ray is imported: it reads RAY_AUTH_MODE once, at import. Ray's C++ warnings (one
    # a second while it retries) stay out of the user's terminal unless asked for.
    note = secure_token()
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
    ray = _import_ray()
    if ray.is_initialized():
        return ray
    if note:
        logging.getLogger("gtui").warning(note)
    term = signal.getsignal(signal.SIGTERM)
    breakpoint_was = os.environ.get("PYTHONBREAKPOINT")
    target = _check_reachable(address)
    try:
        if target is not None:
            _check_token(ray, target)
        ray.init(
            address=address,
            namespace=NAMESPACE,
            logging_level=logging.WARNING,
            log_to_driver=False,
            configure_logging=False,
        )
    except ClusterError:
        raise
    except Exception as e:  # Ray raises many kinds; the user needs one sentence
        said = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]  # Ray 2.52: ""
        raise ClusterError(
            f"cannot join the Ray cluster at {address!r}: {said}; "
            "is it running (`ray start --head`)? Token authentication must match the head's: "
            f"{_token_words()} (docs/cluster.md)"
        ) from e
    finally:
        with contextlib.suppress(ValueError, TypeError):
            signal.signal(signal.SIGTERM, term)
        if breakpoint_was is None:
            os.environ.pop("PYTHONBREAKPOINT", None)
        else:
            os.environ["PYTHONBREAKPOINT"] = breakpoint_was
    return ray


def _lost_words(name: str, why: str) -> str:
    """Why a dead node's jobs are lost. A dead raylet's detached jobs can live on: say so."""
    return f"node {name} declared dead by Ray ({why}); its processes there may still run"


@dataclass
class _Node:
    """One node as the scheduler knows it."""

    ray_id: str
    name: str
    agent: Any  # None: a node that died before this scheduler saw it
    base: int  # its GPU 0 is the pool's GPU ``base``
    gpus: int = 0
    dead: str | None = None  # Ray declared it dead: why


@dataclass
class _Waits:
    """The jobs of one node the scheduler waits for, and the exits to acknowledge."""

    futures: dict[tuple[int, float], list[asyncio.Future[ExitStatus]]] = field(default_factory=dict)
    status: dict[tuple[int, float], str] = field(default_factory=dict)
    ack: set[tuple[int, float]] = field(default_factory=set)
    task: asyncio.Task[None] | None = None


class Cluster:
    """The cluster's nodes and their agents (found by name, or started)."""

    GPU_STRIDE = NODE_GPU_STRIDE  # node k's GPUs are numbered from k * GPU_STRIDE in the pool

    def __init__(self, address: str = "auto", meta: Meta | None = None, ray: Any = None) -> None:
        """``meta``: the queue's store, which keeps each node's name and number across
        schedulers (none: numbered afresh, as `gtui gpus` may). ``ray``: Ray already joined
        (a stand-in, in tests); else ``connect(address)``."""
        self.address = address
        self.ray = ray if ray is not None else connect(address)
        self._lock = threading.Lock()
        self.nodes: dict[str, _Node] = {}  # by gtui name
        self._meta = meta
        self._book = NodeBook.kept_in(meta)  # names and numbers, kept in the store
        self.refresh()

    @staticmethod
    def agent_version() -> str:
        """A short hash of the agent's code: agents are detached and outlive the scheduler, so
        one started by an older gtui is not taken for this one (its name differs)."""
        from gtui.core.exec.ray import agent

        return hashlib.sha1(Path(agent.__file__).read_bytes()).hexdigest()[:8]

    def _agent_class(self) -> Any:
        from gtui.core.exec.ray.agent import NodeAgent

        return self.ray.remote(NodeAgent)

    def refresh(self) -> None:
        """Look at Ray's node list: agents for new nodes, dead ones marked (with Ray's word).
        A node Ray lists as dead that this scheduler never saw alive is known by the name a
        scheduler before it saw (the store's book): its jobs are lost, not "unknown"."""
        ray = self.ray
        alive = {}
        dead = {}
        for n in ray.nodes():
            if n.get("Alive"):
                alive[n["NodeID"]] = n
            else:
                dead[n["NodeID"]] = n.get("DeathReasonMessage") or "declared dead by Ray"
        with self._lock:
            known = {node.ray_id: node for node in self.nodes.values()}
        for ray_id, why in dead.items():
            node = known.get(ray_id)
            if node is not None and node.dead is None:
                node.dead = _lost_words(node.name, why)
        new = sorted(set(alive) - set(known))
        if new:
            agents = {ray_id: self._agent(ray_id) for ray_id in new}
            infos = ray.get([agents[i].info.remote() for i in new], timeout=60)
            given = {i: str(info["node"]) for i, info in zip(new, infos, strict=True)}
            book = self._book
            # Nodes seen before first (they keep their names), then by name: new nodes seen
            # together are numbered in the order their GPUs are listed.
            new.sort(key=lambda i: (book.name_of(i) is None, book.name_of(i) or given[i]))
            with self._lock:
                # A dead node's name goes to the node that comes back under it (a restarted
                # server's raylet has a new id); two live nodes of one host name get a suffix.
                names = {node.name for node in self.nodes.values() if node.dead is None}
                for ray_id in new:
                    name = book.name_node(ray_id, given[ray_id], names)
                    names.add(name)
                    self.nodes[name] = _Node(ray_id, name, agents[ray_id], self._base(name))
        with self._lock:
            for ray_id, why in dead.items():
                had = self._book.name_of(ray_id)
                if ray_id not in known and had is not None and had not in self.nodes:
                    # Died while no scheduler ran: no agent to call, its jobs lost.
                    self.nodes[had] = _Node(
                        ray_id, had, None, self._base(had), dead=_lost_words(had, why)
                    )
            self._save()

    def _base(self, name: str) -> int:
        return self._book.slot(name) * self.GPU_STRIDE

    def _save(self) -> None:
        """Keep the book before any job is placed by its numbers; a store that refuses now
        (locked, full) is tried again at the next refresh."""
        try:
            self._book.save(self._meta)
        except Exception as e:
            logging.getLogger("gtui").warning("the Ray nodes' numbers were not saved: %s", e)

    def _agent(self, ray_id: str) -> Any:
        """The node's agent: found by its name, or started there (detached, pinned, no GPUs
        asked of Ray: gtui sets CUDA_VISIBLE_DEVICES itself)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return (
            self._agent_class()
            .options(
                name=f"{AGENT_PREFIX}{self.agent_version()}-{ray_id}",
                namespace=NAMESPACE,
                lifetime="detached",
                get_if_exists=True,
                num_cpus=0,
                num_gpus=0,
                max_concurrency=AGENT_THREADS,
                max_restarts=-1,
                scheduling_strategy=NodeAffinitySchedulingStrategy(ray_id, soft=False),
            )
            .remote()
        )

    def revive(self, node: _Node) -> None:
        """The node lives but its agent died (killed, crashed): find or start it again. Its
        jobs never depended on it (detached); the new agent watches them from their pids."""
        with contextlib.suppress(Exception):
            node.agent = self._agent(node.ray_id)

    def node(self, name: str | None) -> _Node:
        with self._lock:
            node = self.nodes.get(name or "")
        if node is None:
            raise GtuiError(f"no node {name!r} in the Ray cluster")
        return node

    def live(self) -> list[_Node]:
        with self._lock:
            return [n for n in self.nodes.values() if n.dead is None]

    def is_dead(self, node: _Node) -> bool:
        """Ask Ray whether ``node`` is declared dead (not merely slow)."""
        for n in self.ray.nodes():
            if n["NodeID"] == node.ray_id and not n.get("Alive"):
                why = n.get("DeathReasonMessage") or "its raylet stopped answering"
                node.dead = node.dead or _lost_words(node.name, why)
                return True
        return False

    def call(self, node: _Node, method: str, *args: Any, timeout: float = CALL_TIMEOUT_S) -> Any:
        """A blocking call of an agent method (the executor's synchronous methods)."""
        if node.agent is None:
            raise GtuiError(node.dead or f"node {node.name} has no agent")
        try:
            return self.ray.get(getattr(node.agent, method).remote(*args), timeout=timeout)
        except self.ray.exceptions.RayActorError:
            if self.is_dead(node):
                raise
            self.revive(node)  # the agent died, not its node: once more with a new one
            return self.ray.get(getattr(node.agent, method).remote(*args), timeout=timeout)


class RayExecutor:
    """The executor interface over the nodes' agents (gtui.core.exec.base.Executor)."""

    name = "ray"

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._waits: dict[str, _Waits] = {}
        self._next = 0  # round robin for CPU jobs
        self._log_nodes: dict[str, _Node] = {}  # a job's log -> the node that holds it

    # -- launching ---------------------------------------------------------------------------

    def launch(self, req: LaunchRequest) -> Handle:
        node = self._node_for(req)
        try:
            handle: Handle = self.cluster.call(node, "launch", req, node.gpus)
        except Exception as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, LaunchError):
                raise LaunchError(str(cause)) from None
            raise LaunchError(f"job {req.name}: node {node.name} did not start it: {e}") from e
        handle = replace(handle, node=node.name)
        self._log_nodes[str(handle.log_path)] = node
        return handle

    def _node_for(self, req: LaunchRequest) -> _Node:
        if req.node:
            return self.cluster.node(req.node)
        live = self.cluster.live()
        if not live:
            raise LaunchError(f"job {req.name}: no live node in the Ray cluster")
        self._next = (self._next + 1) % len(live)
        return live[self._next]

    # -- exits ---------------------------------------------------------------------------------

    async def wait(self, handle: Handle) -> ExitStatus:
        """The job's end, from its node's exit poller (one long poll per node, acknowledged)."""
        try:
            node = self.cluster.node(handle.node)
        except GtuiError:
            return _UNKNOWN
        if node.dead is not None:
            return ExitStatus(None, None, lost=node.dead)
        self._log_nodes[str(handle.log_path)] = node
        waits = self._waits.setdefault(node.ray_id, _Waits())
        key = (handle.pid, handle.create_time)
        future: asyncio.Future[ExitStatus] = asyncio.get_running_loop().create_future()
        waits.futures.setdefault(key, []).append(future)
        waits.status[key] = str(handle.status_path)
        if waits.task is None or waits.task.done():
            waits.task = asyncio.create_task(self._poll(node, waits))
        try:
            return await future
        finally:
            futures = waits.futures.get(key)
            if futures is not None and future in futures:
                futures.remove(future)
                if not futures:
                    del waits.futures[key]

    async def _poll(self, node: _Node, waits: _Waits) -> None:
        """Ask the node for ended jobs until nobody waits; an exit is acknowledged once its
        waiter had it (the scheduler records it before its next await), so it is sent once."""
        while waits.futures:
            watch = [(p, c, waits.status.get((p, c), os.devnull)) for p, c in waits.futures]
            ack, waits.ack = list(waits.ack), set()
            try:
                ref = node.agent.exits.remote(watch, ack, EXITS_WAIT_S)
                ended = await asyncio.wait_for(
                    asyncio.wrap_future(ref.future()), EXITS_WAIT_S + CALL_TIMEOUT_S
                )
            except (Exception, TimeoutError):
                waits.ack |= set(ack)  # not heard: say it again
                dead = await asyncio.to_thread(self.cluster.is_dead, node)
                if dead:
                    for futures in list(waits.futures.values()):
                        for f in futures:
                            if not f.done():
                                f.set_result(ExitStatus(None, None, lost=node.dead))
                    return
                await asyncio.sleep(DEAD_CHECK_S)
                await asyncio.to_thread(self.cluster.revive, node)
                continue
            for pid, ct, code, sig in ended:
                key = (pid, ct)
                for f in waits.futures.get(key, []):
                    if not f.done():
                        f.set_result(ExitStatus(code, sig))
                waits.ack.add(key)
                waits.status.pop(key, None)
            if ended:
                await asyncio.sleep(0)  # let the waiters record before the next ack
        if waits.ack:
            with contextlib.suppress(Exception):
                node.agent.exits.remote([], list(waits.ack), 0.0)
            waits.ack.clear()

    async def kill(
        self,
        handle: Handle,
        grace_s: float,
        on_signalled: Callable[[], None] | None = None,
    ) -> None:
        node = self.cluster.node(handle.node)
        if node.agent is None:  # died before this scheduler saw it: nobody to ask
            return
        log = str(handle.log_path) if str(handle.log_path) != os.devnull else None
        ref = node.agent.kill.remote(handle.pid, handle.create_time, log, grace_s)
        if on_signalled is not None:
            on_signalled()  # the agent sends TERM as its first act
        with contextlib.suppress(Exception):
            await asyncio.wrap_future(ref.future())

    def suspend(self, handle: Handle) -> None:
        node = self.cluster.node(handle.node)
        self.cluster.call(node, "suspend", handle.pid, handle.create_time)

    def signal(self, handle: Handle, signum: int) -> None:
        """Not carried to a node's agent yet: a job on a cluster gets no warning; its stop
        after the grace is the kill every executor has."""

    def resume(self, handle: Handle) -> None:
        node = self.cluster.node(handle.node)
        self.cluster.call(node, "resume", handle.pid, handle.create_time)

    def alive(self, handle: Handle) -> bool:
        """Alive unless its node says it ended; a node not answering and not declared dead
        keeps its jobs (they may well be running)."""
        try:
            node = self.cluster.node(handle.node)
        except GtuiError:
            return False
        if node.dead is not None or self.cluster.is_dead(node):
            return False
        try:
            return bool(self.cluster.call(node, "alive", handle.pid, handle.create_time))
        except Exception:
            return True

    def exit_status(self, handle: Handle) -> ExitStatus | None:
        if handle.node is None:
            return self._exit_status_anywhere(handle)
        try:
            node = self.cluster.node(handle.node)
        except GtuiError:
            return None
        if node.dead is not None or self.cluster.is_dead(node):
            return ExitStatus(None, None, lost=node.dead)
        try:
            got: ExitStatus | None = self.cluster.call(node, "exit_status", str(handle.status_path))
        except Exception:
            return None
        return got

    def _exit_status_anywhere(self, handle: Handle) -> ExitStatus | None:
        """A job whose node was not recorded (the driver died between committing its start
        and recording its pid): its exit status from whichever node has the file."""
        if str(handle.status_path) == os.devnull:
            return None
        for node in self.cluster.live():
            with contextlib.suppress(Exception):
                got: ExitStatus | None = self.cluster.call(
                    node, "exit_status", str(handle.status_path)
                )
                if got is not None:
                    return got
        return None

    def find(self, token: str) -> Found | None:
        """Every live node is asked (a job whose start was committed may run on any); one that
        does not answer, and is not declared dead, may run it: raises, so that recovery never
        starts it again."""
        silent = []
        for node in self.cluster.live():
            try:
                got = self.cluster.call(node, "find", token)
            except Exception as e:
                if not self.cluster.is_dead(node):
                    silent.append(f"{node.name} ({type(e).__name__})")
                continue
            if got is not None:
                return Found(int(got[0]), float(got[1]), node=node.name)
        if silent:
            raise GtuiError(f"node {', '.join(silent)} did not answer whether it runs the job")
        return None

    def leftovers(self, tokens: Collection[str]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for node in self.cluster.live():
            with contextlib.suppress(Exception):
                for token, pids in self.cluster.call(node, "leftovers", list(tokens)).items():
                    out.setdefault(token, []).extend(pids)
        return out

    def gpu_processes(
        self,
        handles: Mapping[str, Handle],
        on_gpu: Mapping[int, list[tuple[int, int | None]]],
    ) -> dict[str, list[tuple[int, int, int]]]:
        """Pids are per node and the GPU layer's map is not: no process matching here (each
        job's memory counts as declared)."""
        return {}

    def host_memory_mib(self, handles: Mapping[str, Handle]) -> dict[str, int]:
        """Not measured on the nodes (yet): no host peak is recorded for a cluster's jobs."""
        return {}

    def log_size(self, path: str) -> int | None:
        """On the shared file system docs/cluster.md asks for, a stat here (the engine asks for
        every running job's log twice a second: a remote call each would hold the loop);
        else the node that holds it."""
        local = file_size(path)
        if local is not None:
            return local
        for node in self._log_holders(path):
            with contextlib.suppress(Exception):
                size: int | None = self.cluster.call(node, "log_size", path)
                if size is not None:
                    self._log_nodes[path] = node
                    return size
        return None

    def read_log(self, path: str, offset: int, limit: int) -> bytes:
        if file_size(path) is not None:  # a log never overwritten: here, it is the same file
            return read_file_range(path, offset, limit)
        for node in self._log_holders(path):
            with contextlib.suppress(Exception):
                data: bytes = self.cluster.call(node, "read_log", path, offset, limit)
                return data
        return b""

    def _log_holders(self, path: str) -> list[_Node]:
        """The node that holds a log (known from its job's launch or wait), else every node."""
        node = self._log_nodes.get(path)
        return [node] if node is not None and node.dead is None else self.cluster.live()

    def status_path(self, run_dir: Path, name: str, attempt: int) -> Path:
        return runner.free_status_path(run_dir, name, attempt)

    def free_port(self) -> int:
        return runner.free_port()


class RayGpus:
    """The GPU backend of a cluster: every live node's GPUs, read through its agent. Read in
    a thread by the scheduler (``may_block``): a node that hangs must not stop the queue."""

    may_block = True
    READ_WAIT_S = 1.5  # a node silent this long: its GPUs shown lost (the reader waits 2 s)
    ONE_READ_WAIT_S = CALL_TIMEOUT_S  # `gtui gpus` reads once and may wait: a busy node answers

    def __init__(self, cluster: Cluster, wait_s: float = READ_WAIT_S) -> None:
        self.cluster = cluster
        self.wait_s = wait_s
        self._source: Literal["nvml", "fake", "none"] = "nvml"

    @property
    def source(self) -> Literal["nvml", "fake", "none"]:
        return self._source

    def read(self, ours: Sequence[JobUsage] = ()) -> GpuSnapshot:
        try:
            self.cluster.refresh()
        except Exception as e:
            return GpuSnapshot((), time.time(), "none", error=f"Ray cluster: {e}")
        nodes = self.cluster.live()
        refs = []
        for node in nodes:
            mine = []
            for u in ours:
                local = [g - node.base for g in u.gpus if 0 <= g - node.base < Cluster.GPU_STRIDE]
                if local:
                    mine.append(replace(u, gpus=tuple(local)))
            refs.append(node.agent.gpus.remote(mine))
        gpus: list[GpuInfo] = []
        errors = []
        sources = set()
        ray = self.cluster.ray
        # One deadline for all (not ray.wait: with a dead node's ref among them, Ray 2.40
        # raised from it and every node looked silent).
        deadline = time.monotonic() + self.wait_s
        for node, ref in zip(nodes, refs, strict=True):
            try:
                left = max(0.0, deadline - time.monotonic())
                snap: GpuSnapshot = ray.get(ref, timeout=left)
            except Exception as e:
                why = str(e).strip().splitlines()[0][:120] if str(e).strip() else ""
                errors.append(f"node {node.name} did not answer: {type(e).__name__} {why}")
                gpus.extend(self._lost(node, f"node {node.name} does not answer"))
                continue
            sources.add(snap.source)
            if snap.error:
                errors.append(f"node {node.name}: {snap.error}")
            node.gpus = len(snap.gpus)
            for g in snap.gpus:
                at = node.base + g.index
                gpus.append(replace(g, index=at, node=node.name, node_index=g.index))
        self._source = "fake" if sources == {"fake"} else "nvml" if gpus else "none"
        return GpuSnapshot(tuple(gpus), time.time(), self._source, error="; ".join(errors) or None)

    def _lost(self, node: _Node, why: str) -> list[GpuInfo]:
        """A silent node's GPUs as lost (nothing is placed there) until it answers again."""
        return [
            GpuInfo(
                node.base + i,
                "?",
                f"{node.name}:{i}",
                None,
                None,
                None,
                None,
                lost=True,
                error=why,
                node=node.name,
                node_index=i,
            )
            for i in range(node.gpus)
        ]

    def close(self) -> None:
        """Nothing to close: the agents stay (detached) for the next scheduler."""


def open_cluster(
    address: str, meta: Meta | None = None, read_wait_s: float = RayGpus.READ_WAIT_S
) -> tuple[RayExecutor, RayGpus]:
    """The executor and the GPU backend for the Ray cluster at ``address``."""
    cluster = Cluster(address, meta)
    return RayExecutor(cluster), RayGpus(cluster, read_wait_s)
