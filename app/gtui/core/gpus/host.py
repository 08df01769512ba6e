"""The host's cores and memory: read through psutil, or simulated by ``fake_host = "16c/64G"``.

On a simulated host our running jobs use what they asked (their ``ram``), as a job's declared
memory is used on simulated GPUs; nothing else runs there. On the real host the memory in use
is the machine's (``total - available``), our jobs' share of it included.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from gtui.core.errors import GtuiError
from gtui.core.gpus.snapshot import HostInfo
from gtui.core.units import UnitError, parse_size_mib

FAKE_HOST_ENV = "GTUI_FAKE_HOST"
_SPEC = re.compile(r"\s*(\d+)\s*c\s*/\s*(\S+)\s*")


def parse_fake_host(spec: str, source: str = "fake_host") -> tuple[int, int]:
    """``"16c/64G"`` -> (16 cores, 65536 MiB); a mistake says what is expected."""
    m = _SPEC.fullmatch(spec)
    if m is None or int(m.group(1)) <= 0:
        raise GtuiError(f'{source} {spec!r}: expected CORESc/MEMORY, e.g. "16c/64G"')
    try:
        mib = parse_size_mib(m.group(2))
    except UnitError as e:
        raise GtuiError(f"{source} {spec!r}: {e}") from None
    if mib <= 0:
        raise GtuiError(f"{source} {spec!r}: the memory must be more than 0")
    return int(m.group(1)), mib


def read_host(fake_spec: str | None, ours_ram_mib: Iterable[int] = ()) -> HostInfo:
    """The host now. ``ours_ram_mib``: on a simulated host, the ``ram`` each running job of
    ours asked, which it is taken to use."""
    if fake_spec:
        cores, total = parse_fake_host(fake_spec)
        used = min(total, sum(ours_ram_mib))
        return HostInfo(cores, total, used, "fake")
    import psutil

    vm = psutil.virtual_memory()
    total = int(vm.total // (1024 * 1024))
    used = int((vm.total - vm.available) // (1024 * 1024))
    return HostInfo(
        psutil.cpu_count() or 1, total, used, "psutil", psutil.cpu_percent(interval=None)
    )
