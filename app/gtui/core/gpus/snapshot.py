"""What gtui knows about the GPUs at one moment. Both backends produce exactly this."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from gtui.core.gpus.health import GpuHealth
from gtui.core.model import Settings

# On a cluster the pool numbers node k's GPU i as k * NODE_GPU_STRIDE + i, so an
# index alone, as records keep it, still says which GPU of its node it is. The stride is far
# above MIG's numbers (MIG_INDEX_BASE below), so a node's MIG instances nest inside it.
NODE_GPU_STRIDE = 1_000_000


@dataclass(frozen=True)
class GpuProcess:
    """A process seen on a GPU; ``mem_mib`` is None where the driver does not say.

    The rest says who holds the memory, filled by ``gtui.core.gpus.holders`` from
    the process table (or declared by the fake layer): None where it cannot be read (another
    pid namespace, a process gone between two calls). ``job`` is the gtui job it belongs to
    (its ``GTUI_JOB``), None for anyone else's.
    """

    pid: int
    mem_mib: int | None = None
    user: str | None = None
    command: str | None = None
    started: float | None = None  # epoch seconds
    parent_gone: bool = False  # adopted by init: whatever started it has ended
    zombie: bool = False
    job: str | None = None

    def to_json(self) -> dict[str, object]:
        """What is known of it; who it is only where it could be read."""
        doc: dict[str, object] = {"pid": self.pid, "mem_mib": self.mem_mib}
        if self.user is not None or self.command is not None or self.started is not None:
            doc.update(
                user=self.user,
                command=self.command,
                started=self.started,
                parent_gone=self.parent_gone,
                zombie=self.zombie,
                job=self.job,
            )
        return doc


# MIG instance k of GPU p has index 1000 * (p + 1) + k: stable, and apart from the GPUs' own
# indices (at most 256 GPUs, even simulated; at most 7 instances a GPU).
MIG_INDEX_BASE = 1000


def mig_index(parent: int, slot: int) -> int:
    """The index gtui gives MIG instance ``slot`` of GPU ``parent`` (shown as ``parent:slot``)."""
    return MIG_INDEX_BASE * (parent + 1) + slot


def gpu_label(index: int, node: str | None = None) -> str:
    """How people name GPU ``index``: ``2``, ``2:1`` for MIG instance 1 of GPU 2, and on a
    cluster the node first (``node2:3``, ``node2:3:1``)."""
    local = index % NODE_GPU_STRIDE if node is not None else index
    text = (
        str(local)
        if local < MIG_INDEX_BASE
        else f"{local // MIG_INDEX_BASE - 1}:{local % MIG_INDEX_BASE}"
    )
    return text if node is None else f"{node}:{text}"


@dataclass(frozen=True)
class GpuInfo:
    """One GPU. Fields the driver does not support are None (shown as n/a)."""

    index: int
    name: str
    uuid: str
    mem_total_mib: int | None
    mem_used_mib: int | None
    util: int | None
    temperature: int | None
    processes: tuple[GpuProcess, ...] = ()
    lost: bool = False  # the GPU fell off the bus / stopped answering; never placed on
    error: str | None = None  # why some field is missing, in words
    # Since when its utilization has read 0 % without a break, as far as the reader knows
    # (None: busy, or not known yet): how long a holder has sat idle on it.
    idle_since: float | None = None
    # A MIG instance: the physical GPU it is part of; its ``uuid`` is ``MIG-...``
    # (what CUDA_VISIBLE_DEVICES takes) and its ``index`` is mig_index(parent, slot).
    mig_parent: int | None = None
    # On a cluster: the node the GPU is on and its index there. ``index`` stays the
    # pool's unique number; CUDA_VISIBLE_DEVICES and {gpu} get ``node_index``.
    node: str | None = None
    node_index: int | None = None
    # What its health watch read this poll (gpus/health.py); None: not read (n/a).
    health: GpuHealth | None = None
    # Power now, the limit the driver enforces (watts), and the energy counter (millijoules
    # since the driver loaded, only growing): gpus/nvmlenergy.py, gpus/fakeenergy.py. None: n/a.
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_mj: int | None = None

    @property
    def label(self) -> str:
        """How people name it: ``2``, ``2:1`` for MIG instance 1 of GPU 2, ``node2:3`` on a
        cluster."""
        return gpu_label(self.index, self.node)

    def to_json(self) -> dict[str, object]:
        """The ``gtui gpus --json`` shape (``node`` and ``node_index`` on a cluster)."""
        out = self._json()
        if self.node is not None:
            out["node"] = self.node
            out["node_index"] = self.node_index
        return out

    def _json(self) -> dict[str, object]:
        return {
            "index": self.index,
            "name": self.name,
            "uuid": self.uuid,
            "mem_total_mib": self.mem_total_mib,
            "mem_used_mib": self.mem_used_mib,
            "util": self.util,
            "temperature": self.temperature,
            "processes": [p.to_json() for p in self.processes],
            **({"mig_parent": self.mig_parent} if self.mig_parent is not None else {}),
            # Only where the GPU reports them (n/a: absent); the counter stays out, as it
            # moves at every read and says nothing alone.
            **({"power_w": self.power_w} if self.power_w is not None else {}),
            **({"power_limit_w": self.power_limit_w} if self.power_limit_w is not None else {}),
            # Only where it says something: a healthy GPU's document stays as it was.
            **({"health": self.health.to_json()} if self.health and self.health.notable else {}),
        }


@dataclass(frozen=True)
class GpuSnapshot:
    """All GPUs at one read. ``error`` says plainly why there are none or why a read failed."""

    gpus: tuple[GpuInfo, ...]
    taken_at: float
    source: Literal["nvml", "fake", "none"]
    error: str | None = None
    driver: str | None = None

    def by_index(self) -> dict[int, GpuInfo]:
        return {g.index: g for g in self.gpus}


@dataclass(frozen=True)
class JobUsage:
    """One running job of ours as the GPU layer needs to know it.

    The fake backend uses it to make our jobs occupy memory on their GPUs; NVML ignores it.
    """

    pid: int
    gpus: tuple[int, ...]
    mem_mib: int | None  # declared per GPU; None = the whole GPU
    suspended: bool = False
    name: str | None = None  # the job's name: its pid on a GPU is ours, not a holder
    # What the job says it really uses per GPU on simulated GPUs (GTUI_FAKE_USE in its env,
    # fake.py); None: its request. NVML ignores it.
    fake_use_mib: int | None = None


@dataclass(frozen=True)
class GpuStaticInfo:
    """What never changes for a GPU (cached by backends)."""

    index: int
    name: str
    uuid: str
    mem_total_mib: int | None = None
    extra: dict[str, str] = field(default_factory=dict)


class GpuBackend(Protocol):
    """Reads the GPUs. ``read`` must never raise: failures become ``error`` / ``lost``."""

    @property
    def source(self) -> Literal["nvml", "fake", "none"]: ...

    def read(self, ours: Sequence[JobUsage] = ()) -> GpuSnapshot: ...

    def close(self) -> None: ...


def pool_totals(settings: Settings, snapshot: GpuSnapshot) -> list[int | None] | None:
    """Total memory of each GPU in the pool, for the queue file's pool checks (None: unknown)."""
    if not snapshot.gpus:
        return None
    by_index = snapshot.by_index()
    indices = sorted(by_index) if settings.gpus == "all" else list(settings.gpus)
    largest: dict[int, int] = {}  # a MIG GPU named by its own index: its largest instance
    for g in snapshot.gpus:
        if g.mig_parent is not None and g.mem_total_mib:
            largest[g.mig_parent] = max(largest.get(g.mig_parent, 0), g.mem_total_mib)
    return [
        by_index[i].mem_total_mib if i in by_index else largest.get(i)
        for i in indices
        if i not in settings.exclude
    ]


@dataclass(frozen=True)
class HostInfo:
    """The machine's cores and memory at one read, beside the GPU snapshot: what placement
    counts jobs' ``cpus`` and ``ram`` against (gtui.core.gpus.host reads it).

    ``ram_used_mib`` is what every process holds now (our jobs included); cores are counted
    by what jobs asked, not by the load of the moment, which swings from one second to the
    next. ``source``: "fake" for a simulated host (``fake_host``), else "psutil"."""

    cores: int
    ram_total_mib: int
    ram_used_mib: int
    source: Literal["psutil", "fake"] = "psutil"
    cpu_percent: float | None = None  # the whole machine's load, shown only

    def to_json(self) -> dict[str, object]:
        return {
            "cores": self.cores,
            "ram_total_mib": self.ram_total_mib,
            "ram_used_mib": self.ram_used_mib,
            "source": self.source,
            "cpu_percent": self.cpu_percent,
        }


@dataclass(frozen=True)
class HostHolder:
    """What one running job holds of the host: ours (``who`` its name) or a neighbour's claim
    (``who`` "bob's eval"). ``ram_used_mib``: what it is seen to use of its ``ram_mib``."""

    who: str
    cpus: int = 0
    ram_mib: int = 0
    ram_used_mib: int = 0

    @property
    def ram_promised_mib(self) -> int:
        return max(0, self.ram_mib - self.ram_used_mib)
