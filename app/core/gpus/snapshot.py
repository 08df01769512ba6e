"""What gtui knows about the GPUs at one moment. Both backends produce exactly this."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from gtui.core.model import Settings

# On a cluster the pool numbers node k's GPU i as k * NODE_GPU_STRIDE + i (issue 23), so an
# index alone, as records keep it, still says which GPU of its node it is.
NODE_GPU_STRIDE = 1000


def gpu_label(index: int, node: str | None) -> str:
    """How a person names a pool GPU: ``3`` on one server, ``node2:3`` on a cluster."""
    return str(index) if node is None else f"{node}:{index % NODE_GPU_STRIDE}"


@dataclass(frozen=True)
class GpuProcess:
    """A process seen on a GPU; ``mem_mib`` is None where the driver does not say."""

    pid: int
    mem_mib: int | None = None


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
    # On a cluster (issue 23): the node the GPU is on and its index there. ``index`` stays the
    # pool's unique number; CUDA_VISIBLE_DEVICES and {gpu} get ``node_index``.
    node: str | None = None
    node_index: int | None = None

    @property
    def label(self) -> str:
        """How a person names it: ``3`` on one server, ``node2:3`` on a cluster."""
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
            "processes": [{"pid": p.pid, "mem_mib": p.mem_mib} for p in self.processes],
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
    return [
        by_index[i].mem_total_mib if i in by_index else None
        for i in indices
        if i not in settings.exclude
    ]
