"""give_back_freed: memory the C heap kept after a big build goes back to the system."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import pytest

from gtui.core.memtrim import give_back_freed

MIB = 2**20


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _glibc() -> bool:
    try:
        ctypes.CDLL(None).gnu_get_libc_version  # noqa: B018 - only glibc has it
    except AttributeError:
        return False
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _glibc(), reason="glibc only")
def test_freed_heap_memory_goes_back() -> None:
    # 64 MiB in blocks above CPython's small-object size, so they come from malloc; every 64th
    # kept, so the freed ones sit in the middle of the heap, where free() does not give them
    # back by itself (what a long queue's parse leaves behind).
    blocks = [bytearray(1000) for _ in range(64 * MIB // 1000)]
    kept = blocks[::64]
    del blocks
    before = _rss_mib()
    assert give_back_freed()
    after = _rss_mib()
    assert before - after > 32, (before, after)
    assert len(kept) > 0
