"""Jobs on a Ray cluster: a node agent per server, the scheduler's policy deciding.

Nothing here imports Ray at import time: ``gtui[ray]`` is optional, and the single-server path
never loads it (tests/core/exec/test_ray_lazy.py). :func:`open_cluster` connects and is the
one entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gtui.core.exec.ray.cluster import RayExecutor, RayGpus
    from gtui.core.exec.ray.nodes import Meta


def open_cluster(
    address: str, meta: Meta | None = None, *, one_read: bool = False
) -> tuple[RayExecutor, RayGpus]:
    """Join the Ray cluster at ``address`` ("auto", "host:port", "ray://..."): its executor and
    its GPU backend. ``meta`` (the queue's store) keeps the nodes' names and GPU numbers from
    one scheduler to the next. ``one_read``: the GPUs are read once (``gtui gpus``), so a node
    is waited for as long as any call to it, not the scheduler's poll's 1.5 s. Raises
    ClusterError (a GtuiError) with one sentence when it cannot."""
    from gtui.core.exec.ray.cluster import RayGpus
    from gtui.core.exec.ray.cluster import open_cluster as _open

    return _open(address, meta, RayGpus.ONE_READ_WAIT_S if one_read else RayGpus.READ_WAIT_S)


__all__: list[Any] = ["open_cluster"]
