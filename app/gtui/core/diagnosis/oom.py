"""CUDA out-of-memory messages: their numbers (what the job wanted) and what a retry asks for.

After a CUDA OOM a retry asks ``max(mem * oom_grow, peak * 1.1)``; the peak comes
from the message itself (PyTorch 1.x and 2.x, JAX and TensorFlow word it differently).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass


def oom_context(lines: Sequence[str], index: int) -> str:
    """The OOM line with the continuation lines some tools wrap it into."""
    text = lines[index]
    if re.search(r"total capac|GPU \d+ has|\(GPU \d+;", text, re.I):
        return text
    for nxt in lines[index + 1 : index + 4]:
        if "out of memory" in nxt.lower() or not re.search(
            r"^\s*\(GPU \d+;|total capacity|already allocated|reserved in total", nxt
        ):
            break
        text = f"{text.rstrip()} {nxt.strip()}"
    return text


# --------------------------------------------------------------------------------------------
# CUDA out-of-memory numbers.

_SIZE = r"(\d+(?:\.\d+)?)\s?(bytes|[KMGT]i?B|B)\b"
_UNIT_MIB = {
    "bytes": 1 / 1048576,
    "b": 1 / 1048576,
    "kib": 1 / 1024,
    "kb": 1 / 1024,
    "mib": 1.0,
    "mb": 1.0,
    "gib": 1024.0,
    "gb": 1024.0,
    "tib": 1048576.0,
    "tb": 1048576.0,
}
_OOM_FIELDS: dict[str, re.Pattern[str]] = {
    "tried": re.compile(r"Tried to allocate " + _SIZE, re.I),
    "tried_bytes": re.compile(r"(?:trying to allocate|allocating) (\d+) bytes", re.I),
    "total": re.compile(_SIZE + r" total capacity|total capac\w* of " + _SIZE, re.I),
    "free": re.compile(r"of which " + _SIZE + r" is free|; " + _SIZE + r" free", re.I),
    "allocated": re.compile(
        _SIZE + r" already allocated|allocated memory " + _SIZE + r" is allocated by", re.I
    ),
    "unallocated": re.compile(r"and " + _SIZE + r" is reserved by PyTorch but unallocated", re.I),
    "reserved": re.compile(_SIZE + r" reserved in total", re.I),
    "cached": re.compile(_SIZE + r" cached\b", re.I),  # PyTorch 1.0-1.3: reserved - allocated
    "process": re.compile(r"this process has " + _SIZE + r" memory in use", re.I),
    "gpu": re.compile(r"\bGPU (\d+)\b"),
}


def _mib(value: str, unit: str) -> float:
    return float(value) * _UNIT_MIB[unit.lower()]


@dataclass(frozen=True)
class Oom:
    tried: float | None
    total: float | None
    free: float | None
    allocated: float | None
    reserved: float | None
    process: float | None
    gpu: int | None


def parse_oom(text: str) -> Oom:
    """The numbers PyTorch's (old and new) and JAX's OOM messages carry, in MiB."""

    def size(name: str) -> float | None:
        m = _OOM_FIELDS[name].search(text)
        if not m:
            return None
        groups = [g for g in m.groups() if g is not None]
        return _mib(groups[0], groups[1])

    tried = size("tried")
    if tried is None:
        m = _OOM_FIELDS["tried_bytes"].search(text)
        tried = int(m.group(1)) / 1048576 if m else None
    allocated = size("allocated")
    reserved = size("reserved")
    unallocated = size("unallocated")
    unallocated = unallocated if unallocated is not None else size("cached")
    if reserved is None and allocated is not None and unallocated is not None:
        reserved = allocated + unallocated  # the old and the new message split it in two
    gpu = _OOM_FIELDS["gpu"].search(text)
    return Oom(
        tried=tried,
        total=size("total"),
        free=size("free"),
        allocated=allocated,
        reserved=reserved,
        process=size("process"),
        gpu=int(gpu.group(1)) if gpu else None,
    )


def oom_peak_mib(line: str) -> int | None:
    """What the job wanted when it ran out of GPU memory, in MiB, from the OOM message.

    The memory it held (this process's use if printed, else PyTorch's reserved memory, which
    is at least its allocated memory) plus the allocation that failed. ``None`` when the
    message carries no numbers. Feeds the engine's ``max(mem * oom_grow, peak * 1.1)``.
    """
    oom = parse_oom(line)
    held = [v for v in (oom.process, oom.reserved, oom.allocated) if v is not None]
    if oom.tried is None and not held:
        return None
    return math.ceil((max(held) if held else 0.0) + (oom.tried or 0.0))


def oom_retry_mem(
    mem_mib: int | None, oom_grow: float, peak_mib: int | None, gpu_total_mib: int | None
) -> int | None:
    """The memory a retry asks for after a CUDA OOM, in MiB.

    ``max(mem * oom_grow, peak * 1.1)``, rounded up to a whole GiB (above 1 GiB) so the
    request reads well, capped at the GPU's total. A job without ``mem`` already has whole
    GPUs, so there is nothing to grow: ``None``. At the cap the result can equal ``mem``.
    """
    if mem_mib is None:
        return None
    want = max(float(mem_mib), mem_mib * oom_grow)
    if peak_mib:
        want = max(want, peak_mib * 1.1)
    result = math.ceil(want / 1024) * 1024 if want > 1024 else math.ceil(want)
    if gpu_total_mib:
        result = min(result, gpu_total_mib)
    return max(result, 1)


def host_use_text(asked_mib: int | None, auto: bool, peak_mib: int | None) -> str:
    """What a job killed for host memory asked and used, for its diagnosis: `` It asked for
    6G of host RAM (ram) and used up to 7.5G.`` A job that asked nothing is told it can."""
    from gtui.core.units import format_mib

    used = f" and used up to {format_mib(peak_mib)}" if peak_mib else ""
    if asked_mib:
        return f" It asked for {format_mib(asked_mib)} of host RAM (ram){used}."
    if auto:
        return f' It asked for host RAM by its last run (ram = "auto"){used}.'
    return f' It asked for no host RAM{used} (with ram = "..." jobs wait for memory instead).'
