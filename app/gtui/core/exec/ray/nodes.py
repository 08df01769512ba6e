"""Node names and GPU numbers that outlive a scheduler. No Ray here.

The pool numbers node k's GPU i as ``k * NODE_GPU_STRIDE + i``, and job records (and the
quarantine) keep those numbers. A scheduler started after a node joined or died must give every
node the number the one before it gave, or a re-adopted job is counted on another node's GPU
and its own GPU looks free: so the numbers are kept in the queue's store (its meta, under
``META_KEY``), a new name gets the next free one, and none is ever given again to another name.

The same record keeps which name each Ray node id had: a raylet's id is fixed for its life, so
the next scheduler gives it the name it had (two raylets of one host name keep their suffixes
the right way round), and knows a node Ray lists as dead by the name its jobs recorded.
"""

from __future__ import annotations

import json
from typing import Protocol

META_KEY = "ray_nodes"
MAX_IDS = 1000  # Ray node ids remembered (a raylet restarted every day: years of them)


class Meta(Protocol):
    """Where the book is kept: the queue's store (gtui.core.state.store.Store)."""

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


class NodeBook:
    """Node name -> its number k; Ray node id -> the name it had."""

    def __init__(self, text: str | None) -> None:
        self.slots: dict[str, int] = {}
        self.names: dict[str, str] = {}
        self.changed = False
        try:
            doc = json.loads(text) if text else {}
            slots, names = doc.get("slots", {}), doc.get("ids", {})
            self.slots = {str(k): int(v) for k, v in slots.items() if int(v) >= 0}
            self.names = {str(k): str(v) for k, v in names.items()}
        except (ValueError, TypeError, AttributeError):
            self.slots, self.names = {}, {}  # damaged: numbered afresh, as before the book

    @classmethod
    def kept_in(cls, meta: Meta | None) -> NodeBook:
        return cls(meta.get_meta(META_KEY) if meta is not None else None)

    def slot(self, name: str) -> int:
        """The number of node ``name``: the one it has, else the next never given."""
        k = self.slots.get(name)
        if k is None:
            k = max(self.slots.values(), default=-1) + 1
            self.slots[name] = k
            self.changed = True
        return k

    def name_of(self, ray_id: str) -> str | None:
        """The name Ray node ``ray_id`` had, where a scheduler saw it alive."""
        return self.names.get(ray_id)

    def name_node(self, ray_id: str, host_name: str, taken: set[str]) -> str:
        """The name of a live node: the one it had, unless a live node has it now; else the
        name it gives (host name or GTUI_NODE_NAME), with a suffix where that is taken."""
        name = self.names.get(ray_id)
        if name is None or name in taken:
            name = host_name if host_name not in taken else f"{host_name}-{ray_id[:6]}"
        if self.names.get(ray_id) != name:
            self.names.pop(ray_id, None)
            self.names[ray_id] = name
            while len(self.names) > MAX_IDS:
                del self.names[next(iter(self.names))]
            self.changed = True
        self.slot(name)
        return name

    def dump(self) -> str:
        return json.dumps({"slots": self.slots, "ids": self.names}, sort_keys=True)

    def save(self, meta: Meta | None) -> None:
        """Write the book where it changed (before any job is placed by its numbers)."""
        if self.changed and meta is not None:
            meta.set_meta(META_KEY, self.dump())
        self.changed = False
