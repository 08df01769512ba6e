"""Why a job failed: a kind, the line of its log that shows it, and a hint a person can act on.

DESIGN.md 4.5, the seed script's error table (seed 000, 14.4) and seed 002's hints. The engine
calls :func:`read_log_tail` on the attempt's log (only its tail is read: logs can be huge) and
:func:`diagnose` with the exit status; on a CUDA out-of-memory it sizes the retry with
:func:`oom_peak_mib` and :func:`oom_retry_mem`.

Precedence, from first to last (the first step that finds something decides):

1. gtui's own actions: ``killed_by_user``, then ``timed_out``.
2. The user's ``[[diagnose]]`` rules, in file order: they extend and override the defaults.
3. Death by SIGSEGV or SIGKILL (signal, or exit 139 / 137 from a shell): a Python exception
   exits 1, so a process killed by a signal did not die of the errors its log printed before.
4. Specific causes (``_SPECIFIC``): CUDA OOM, invalid device ordinal, no GPU visible, libuv,
   address in use, wandb login, disk full, segfault text.
5. Causes that are often consequences or noise (``_CONSEQUENTIAL``): NCCL failures (a rank
   that ran out of memory makes the others fail), generic CUDA errors, host OOM text, import
   errors (optional-dependency warnings), missing files, permissions, commands not found.
6. Generic: exit 127 / 126 with no text, then ``RuntimeError`` lines.
7. Otherwise ``error``, with the last exception-looking line (or the last non-empty line).

Within steps 4 and 5 the rule whose match is LATEST in the log wins (an earlier error may have
been caught and printed; the last one ended the job); two rules matching the same line go to
the one listed first (``cuda_oom`` before ``cuda_error`` before ``runtime_error``). Across
steps the earlier step wins even when its line is older: in a DDP cascade the root cause
(an OOM on one rank) comes first and the NCCL errors of the other ranks follow it.

Size: most of it is the diagnosis table (patterns and hints, seed 003) and the refinements
of its hints; the matching itself is short.
"""

from __future__ import annotations

import functools
import math
import os
import re
import signal as _signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gtui.core.diagnosis.rulematch import PatternOverrun
from gtui.core.model import Diagnosis, DiagnosisRule
from gtui.core.units import format_mib

TAIL_BYTES = 65536
"""How much of a log's end :func:`read_log_tail` reads by default."""

USER_LINE_MAX = 2000
"""User patterns see each line cut to this many characters: with a backtracking pattern the
time grows with the line (polynomially or worse), so the cap keeps a sane-but-sloppy pattern
fast on a 50 KB tqdm line. It does not bound a catastrophic one: the deadline does."""

LINE_MAX = 300
"""``Diagnosis.line`` is cut to about this many characters."""

# --------------------------------------------------------------------------------------------
# The default table.

_SPECIFIC: tuple[DiagnosisRule, ...] = (
    DiagnosisRule(
        kind="cuda_oom",
        hint=(
            "The GPU ran out of memory. Lower the batch size (gradient accumulation keeps the "
            "effective batch) or raise the job's `mem` so it starts where that much is free; "
            "with retries left, the retry asks for more memory (oom_grow)."
        ),
        pattern=(
            r"CUDA out of memory|CUDA (?:runtime )?error(?: \(2\))? ?: out of memory"
            r"|\b(?:torch|cupy)\.[\w.]*OutOfMemoryError|cudaErrorMemoryAllocation"
            r"|RESOURCE[_ ]EXHAUSTED: Out of memory|OOM when allocating tensor"
        ),
    ),
    DiagnosisRule(
        kind="invalid_device_ordinal",
        hint=(
            "The job asked for a GPU it cannot see. With isolation (`isolate = true`, the "
            "default) a job sees only its own GPUs, numbered from 0: use cuda:0 (cuda:0 to "
            "cuda:N-1 with N GPUs), not the physical index: `{gpu}` is the physical index, "
            "meant for tools that read NVML. A script that picks its GPU itself needs "
            "`isolate = false`."
        ),
        pattern=(
            r"invalid device ordinal|CUDA_ERROR_INVALID_DEVICE|cudaErrorInvalidDevice"
            r"|Invalid device id|deserialize object on CUDA device \d+ but "
            r"torch\.cuda\.device_count\(\) is \d+"
        ),
    ),
    DiagnosisRule(
        kind="no_cuda_device",
        hint=(
            "The job sees no GPU. A job with `gpus = 0` runs with CUDA_VISIBLE_DEVICES empty "
            "(CPU only): give it `gpus = 1`. Otherwise check that the script does not set "
            "CUDA_VISIBLE_DEVICES itself (gtui already set it to the job's GPUs) and that the "
            "driver works (`gtui gpus`)."
        ),
        pattern=(
            r"No CUDA GPUs are available|no CUDA-capable device is detected"
            r"|Found no NVIDIA driver"
        ),
    ),
    DiagnosisRule(
        kind="libuv",
        hint=(
            "This PyTorch was built without libuv but torchrun / TCPStore asked for it: set "
            'env USE_LIBUV = "0" for the job (seed 002 also sets '
            'TORCHELASTIC_USE_AGENT_STORE = "0").'
        ),
        pattern=r"use_libuv was requested but PyTorch was buil[dt] without libuv",
    ),
    DiagnosisRule(
        kind="address_in_use",
        hint=(
            "Another process already listens on that port (often a second DDP job on the "
            "default 29500). Give each job its own: put `{port}` in cmd (torchrun "
            "--master_port {port}, or MASTER_PORT={port}); gtui picks a free port per job."
        ),
        pattern=(
            r"Address already in use|EADDRINUSE"
            r"|server socket has failed to listen on any local network address"
        ),
    ),
    DiagnosisRule(
        kind="wandb_login",
        hint=(
            "wandb wants an API key and a batch job cannot prompt for one: set env "
            'WANDB_MODE = "disabled" (or "offline", then `wandb sync`) in the queue file, or '
            "run `wandb login` once / set WANDB_API_KEY."
        ),
        pattern=(
            r"api_key not configured|You must call wandb\.login|wandb: ERROR .*not logged in"
            r"|wandb\.errors\.[\w.]*Error: .*(?:api[_ ]key|wandb login)"
        ),
    ),
    DiagnosisRule(
        kind="no_space",
        hint=(
            "A disk is full: `df -h` the output, checkpoint and cache directories (~/.cache, "
            "/tmp), delete old checkpoints or write elsewhere."
        ),
        pattern=(
            r"No space left on device|\bENOSPC\b|\[Errno 28\]|Disk quota exceeded|\bEDQUOT\b"
            r"|insufficient shared memory"
        ),
    ),
    DiagnosisRule(
        kind="segfault",
        hint=(
            "The process crashed in native code (segmentation fault). Usual causes: a compiled "
            "extension built for another torch / CUDA version, a library bug, too many "
            "DataLoader workers; rerun with `python -X faulthandler` to see the Python stack."
        ),
        pattern=r"Segmentation fault|\bSIGSEGV\b",
    ),
)

_CONSEQUENTIAL: tuple[DiagnosisRule, ...] = (
    DiagnosisRule(
        kind="nccl",
        hint=(
            "A collective between the job's processes failed. Look above for the first error "
            "of any rank (an OOM or crash on one rank makes the others fail or time out); "
            "rerun with env NCCL_DEBUG=INFO for details; NCCL_P2P_DISABLE=1 helps when the "
            "job's GPUs cannot talk peer to peer."
        ),
        pattern=(
            r"NCCL error|\bnccl(?:UnhandledCuda|System|Internal|InvalidUsage|InvalidArgument"
            r"|Remote)Error\b|Watchdog caught collective operation timeout"
            r"|NCCL watchdog thread terminated|NCCL communicator was aborted"
        ),
    ),
    DiagnosisRule(
        kind="cuda_error",
        hint=(
            "A CUDA call failed. Rerun with env CUDA_LAUNCH_BLOCKING=1 so the error points at "
            "the call that really failed (CUDA reports kernel errors late)."
        ),
        pattern=(
            r"CUDA error|cuDNN error|\bCUDNN_STATUS_\w+|\bCUBLAS_STATUS_\w+"
            r"|device-side assert triggered|cuda runtime error|illegal memory access"
            r"|CUDA driver version is insufficient|no kernel image is available"
        ),
    ),
    DiagnosisRule(
        kind="host_oom",
        hint=(
            "A process was killed by SIGKILL, most likely by the kernel's OOM killer: the host "
            "ran out of RAM (not GPU memory). Check `dmesg -T | grep -i oom`, then lower "
            "DataLoader num_workers, the batch size or in-memory caching; every job on this "
            "host shares its RAM."
        ),
        pattern=(
            r"killed by signal: Killed|Signal 9 \(SIGKILL\) received|exitcode\s*:\s*-9\b"
            r"|^bash: (?:line \d+: )?\s*\d+ Killed\b|\b_?(?:Array)?MemoryError\b"
            r"|DefaultCPUAllocator: (?:not enough memory|can't allocate memory)"
        ),
    ),
    DiagnosisRule(
        kind="import_error",
        hint=(
            "Python could not import a module. The job runs `bash -c CMD` without your "
            "interactive shell's setup: activate the environment in cmd (`source "
            ".venv/bin/activate && python ...`, `conda run -n ENV python ...`) or call that "
            "environment's python by its full path, then install what is missing."
        ),
        pattern=(
            r"\b(?:ImportError|ModuleNotFoundError)\b|No module named"
            r"|error while loading shared libraries"
        ),
    ),
    DiagnosisRule(
        kind="file_not_found",
        hint=(
            "A file or directory does not exist. Relative paths start from the job's `cwd`, "
            "not from the shell gtui was started in; check the path, and that the jobs it "
            "depends on (`after`) wrote it."
        ),
        pattern=r"\bFileNotFoundError\b|No such file or directory|\bENOENT\b",
    ),
    DiagnosisRule(
        kind="permission_denied",
        hint=(
            "Permission denied: make the script executable (`chmod +x`) or run it through its "
            "interpreter (`bash script.sh`, `python script.py`), and check that the output "
            "directories are writable."
        ),
        pattern=r"Permission denied|\bPermissionError\b|\bEACCES\b",
    ),
    DiagnosisRule(
        kind="command_not_found",
        hint=(
            "bash could not find the command. The job does not read your ~/.bashrc, so its "
            "aliases and PATH changes (conda / venv activation) are missing: use a full path or "
            "activate the environment in cmd."
        ),
        pattern=r"command not found|^(?:/bin/)?sh: \d+: .*: not found",
    ),
)

_SIGNAL_DEATHS: tuple[DiagnosisRule, ...] = (
    DiagnosisRule(
        kind="segfault",
        hint=_SPECIFIC[-1].hint,
        exit_codes=(139,),
        signals=(int(_signal.SIGSEGV),),
    ),
    DiagnosisRule(
        kind="host_oom",
        hint=(
            "Killed by SIGKILL with no error of its own: most likely the kernel's OOM killer "
            "(host RAM, not GPU memory). Check `dmesg -T | grep -i oom`, then lower DataLoader "
            "num_workers, the batch size or in-memory caching; every job on this host shares "
            "its RAM."
        ),
        exit_codes=(137,),
        signals=(int(_signal.SIGKILL),),
    ),
    DiagnosisRule(
        kind="file_too_large",
        hint=(
            "Killed by SIGXFSZ: a file it wrote (its log, a checkpoint) reached the file-size "
            "limit (`ulimit -f`, set for your session or by an admin). Raise the limit or write "
            "less, then retry it."
        ),
        exit_codes=(128 + int(_signal.SIGXFSZ),),
        signals=(int(_signal.SIGXFSZ),),
    ),
)

_GENERIC: tuple[DiagnosisRule, ...] = (
    DiagnosisRule(kind="command_not_found", hint=_CONSEQUENTIAL[-1].hint, exit_codes=(127,)),
    DiagnosisRule(kind="permission_denied", hint=_CONSEQUENTIAL[-2].hint, exit_codes=(126,)),
    DiagnosisRule(
        kind="runtime_error",
        hint=(
            "The program raised a RuntimeError: its traceback in the log says where. This is "
            "the program's own error, not a scheduling problem: a retry will fail the same way."
        ),
        pattern=r"\bRuntimeError\b|\bruntime error\b",
    ),
)

DEFAULT_RULES: tuple[DiagnosisRule, ...] = _SIGNAL_DEATHS + _SPECIFIC + _CONSEQUENTIAL + _GENERIC
"""gtui's own table, in precedence order (see the module docstring for how it is applied)."""

_TIMEOUT_HINT = (
    "gtui stopped it: it ran past its `timeout`. Raise `timeout` if it was still making "
    "progress; if its log had stopped moving it hung (a DDP rank waiting for a dead peer, a "
    "stuck DataLoader)."
)
_KILLED_HINT = (
    "Killed from gtui (`x` in the dashboard or `gtui kill`); `r` / `gtui retry` runs it again."
)
_ERROR_HINT = "No known cause matched: a [[diagnose]] rule in the queue file can name it next time."

# --------------------------------------------------------------------------------------------
# Reading and cleaning a log.

_ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
_CTRL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _strip_codes(text: str) -> str:
    return _CTRL_RE.sub("", _ANSI_RE.sub("", text))


def clean_line(raw: str) -> str:
    """One line as a terminal would have left it: the last ``\\r`` segment, no colour codes.

    tqdm redraws its bar with ``\\r``; the last segment that shows anything is what stayed on
    screen (a segment of only escape codes, like rich's cursor hiding, shows nothing).
    """
    if "\r" in raw:
        visible = [seg for seg in (_strip_codes(s) for s in raw.split("\r")) if seg.strip()]
        return visible[-1].rstrip() if visible else ""
    return _strip_codes(raw).rstrip()


def clean_log(text: str) -> str:
    """A whole log cleaned line by line (see :func:`clean_line`); idempotent."""
    return "\n".join(clean_line(raw) for raw in text.split("\n"))


def read_tail_bytes(f: BinaryIO, max_bytes: int = TAIL_BYTES) -> bytes:
    """The last ``max_bytes`` of a seekable binary file, read in one call from its end.

    When the read starts inside the file, the partial first line is dropped (it may also
    start inside a multi-byte character) unless it is the only line.
    """
    size = f.seek(0, os.SEEK_END)
    start = max(0, size - max(0, max_bytes))
    f.seek(start)
    data = f.read(size - start)
    if start > 0:
        nl = data.find(b"\n")
        if 0 <= nl < len(data) - 1:
            data = data[nl + 1 :]
    return data


def read_log_tail(path: Path, max_bytes: int = TAIL_BYTES) -> str:
    """The cleaned end of a log: at most ``max_bytes`` read, never the whole file.

    A missing or unreadable log gives ``""``: a job may fail before writing anything.
    """
    try:
        with open(path, "rb") as f:
            data = read_tail_bytes(f, max_bytes)
    except OSError:
        return ""
    return clean_log(data.decode("utf-8", errors="replace"))


# --------------------------------------------------------------------------------------------
# Matching.


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> re.Pattern[str] | None:
    try:
        return re.compile(pattern, re.IGNORECASE | re.MULTILINE)
    except re.error:
        return None


def validate_rule(rule: DiagnosisRule) -> str | None:
    """Why a (user's) rule cannot work, in words, or ``None``: for the queue file's checks."""
    if not rule.kind.strip():
        return "a diagnose rule needs a `kind`"
    if rule.pattern is None and not rule.exit_codes and not rule.signals:
        return "a diagnose rule needs a `pattern`, `exit_codes` or `signals`"
    if rule.pattern is not None:
        try:
            re.compile(rule.pattern)
        except re.error as e:
            return f"`pattern` is not a valid regular expression: {e}"
    return None


def _status_sets(exit_code: int | None, sig: int | None) -> tuple[set[int], set[int]]:
    """Exit codes and signals a status stands for: a shell reports signal N as exit 128+N."""
    codes: set[int] = set()
    sigs: set[int] = set()
    if sig:
        sigs.add(sig)
        codes.add(128 + sig)
    if exit_code is not None:
        if exit_code < 0:  # Popen's way of saying "killed by signal -exit_code"
            sigs.add(-exit_code)
            codes.add(128 - exit_code)
        else:
            codes.add(exit_code)
            if 128 < exit_code <= 128 + 64:
                sigs.add(exit_code - 128)
    return codes, sigs


@dataclass(frozen=True)
class _Hit:
    rule: DiagnosisRule
    index: int  # the line it matched (-1: matched by exit status only)
    start: int | None  # where in that line the match starts (a user rule's comes by pipe)


def _match(
    rule: DiagnosisRule, lines: Sequence[str], codes: set[int], sigs: set[int]
) -> _Hit | None:
    """The rule's last match: status and pattern must both hold when both are given."""
    has_status = bool(rule.exit_codes or rule.signals)
    if has_status and not (codes.intersection(rule.exit_codes) or sigs.intersection(rule.signals)):
        return None
    if rule.pattern is None:
        return _Hit(rule, -1, None) if has_status else None
    rx = _compile(rule.pattern)
    if rx is None:
        return None
    for i in range(len(lines) - 1, -1, -1):
        m = rx.search(lines[i])
        if m:
            return _Hit(rule, i, m.start())
    return None


Matcher = Callable[[str, Sequence[str]], "tuple[int, int] | None"]
"""Runs one user pattern over lines: (last line matched, match start) or None; may raise
:class:`PatternOverrun` (gtui.core.diagnosis.rulematch.PatternWorker.search bounds it in time)."""


def local_search(pattern: str, lines: Sequence[str]) -> tuple[int, int] | None:
    """A :data:`Matcher` in this process, with no deadline: for callers that trust the rules."""
    rx = _compile(pattern)
    if rx is None:
        return None
    for i in range(len(lines) - 1, -1, -1):
        m = rx.search(lines[i])
        if m:
            return i, m.start()
    return None


def _user_match(
    rule: DiagnosisRule, lines: Sequence[str], codes: set[int], sigs: set[int], matcher: Matcher
) -> _Hit | None:
    """Like :func:`_match` for a user's rule: its pattern sees lines cut to USER_LINE_MAX and
    runs through ``matcher`` (a worker with a deadline in the engine)."""
    has_status = bool(rule.exit_codes or rule.signals)
    if has_status and not (codes.intersection(rule.exit_codes) or sigs.intersection(rule.signals)):
        return None
    if rule.pattern is None:
        return _Hit(rule, -1, None) if has_status else None
    found = matcher(rule.pattern, [line[:USER_LINE_MAX] for line in lines])
    if found is None:
        return None
    return _Hit(rule, found[0], found[1])


def _latest(
    rules: Sequence[DiagnosisRule], lines: Sequence[str], codes: set[int], sigs: set[int]
) -> _Hit | None:
    """The hit on the latest line; on the same line, the rule listed first."""
    best: _Hit | None = None
    for rule in rules:
        hit = _match(rule, lines, codes, sigs)
        if hit is not None and (best is None or hit.index > best.index):
            best = hit
    return best


_EXC_RE = re.compile(
    r"(?:^|[\s\]>:|])(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt)(?::\s|:?\s*$)"
    r"|^\s*(?:[\w./-]+:\s*)?(?i:error|fatal(?: error)?)\b\s*[:!]"
)


def _last_exception_index(lines: Sequence[str]) -> int:
    for i in range(len(lines) - 1, -1, -1):
        if _EXC_RE.search(lines[i]):
            return i
    return -1


def _last_nonempty_index(lines: Sequence[str]) -> int:
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip():
            return i
    return -1


def _fallback_index(lines: Sequence[str]) -> int:
    i = _last_exception_index(lines)
    return i if i >= 0 else _last_nonempty_index(lines)


_BOILERPLATE_RE = re.compile(
    r"\s*If reserved (?:but unallocated )?memory is (?:large|>> allocated memory)\b.*$"
    r"|\s*See documentation for Memory Management.*$"
)


def _shown(line: str, match_start: int | None = None) -> str:
    """A line fit for the diagnosis panel: stripped, PyTorch's boilerplate advice cut, short."""
    text = _BOILERPLATE_RE.sub("", line).strip()
    if len(text) <= LINE_MAX:
        return text
    start = 0
    if match_start is not None:
        offset = len(line) - len(line.lstrip())
        start = max(0, min(match_start - offset, len(text)) - 40)
    if start == 0:
        return text[: LINE_MAX - 1] + "…"
    return "…" + text[start : start + LINE_MAX - 2] + "…"


def _oom_context(lines: Sequence[str], index: int) -> str:
    """The OOM line with the continuation lines some tools wrap it into (seed 000, 14.4)."""
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
class _Oom:
    tried: float | None
    total: float | None
    free: float | None
    allocated: float | None
    reserved: float | None
    process: float | None
    gpu: int | None


def _parse_oom(text: str) -> _Oom:
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
    return _Oom(
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
    oom = _parse_oom(line)
    held = [v for v in (oom.process, oom.reserved, oom.allocated) if v is not None]
    if oom.tried is None and not held:
        return None
    return math.ceil((max(held) if held else 0.0) + (oom.tried or 0.0))


def oom_retry_mem(
    mem_mib: int | None, oom_grow: float, peak_mib: int | None, gpu_total_mib: int | None
) -> int | None:
    """The memory a retry asks for after a CUDA OOM (DESIGN.md 4.5), in MiB.

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


# --------------------------------------------------------------------------------------------
# Hints that use what the line says.


def _quoted(text: str, *patterns: str) -> str | None:
    for p in patterns:
        m = re.search(p, text)
        if m:
            return m.group(1)
    return None


def _oom_hint(text: str, base: str) -> str:
    parts: list[str] = []
    if re.search(r"RESOURCE[_ ]EXHAUSTED", text, re.I):
        parts.append(
            "JAX preallocates 75% of the GPU: on a shared GPU set env "
            "XLA_PYTHON_CLIENT_PREALLOCATE=false (or XLA_PYTHON_CLIENT_MEM_FRACTION)."
        )
    elif re.search(r"OOM when allocating tensor", text, re.I):
        parts.append("TensorFlow takes the whole GPU unless env TF_FORCE_GPU_ALLOW_GROWTH=true.")
    oom = _parse_oom(text)
    if oom.tried is not None:
        held = oom.reserved if oom.reserved is not None else oom.allocated
        said = f"It asked for {format_mib(oom.tried)} more"
        if held is not None:
            said += f" while holding {format_mib(held)}"
        if oom.total is not None:
            gpu = f"GPU {oom.gpu}'s" if oom.gpu is not None else "the GPU's"
            said += f" of {gpu} {format_mib(oom.total)} (numbered as the job sees them)"
        peak = oom_peak_mib(text)
        if held is not None and peak is not None:
            said += f": it needed about {format_mib(peak)}"
        parts.append(said + ".")
        if oom.total is not None and oom.free is not None and oom.reserved is not None:
            others = oom.total - oom.free - max(oom.reserved, oom.process or 0.0)
            if others > max(1024.0, 0.1 * oom.total):
                parts.append(
                    f"About {format_mib(others)} of it was used by other processes: declare "
                    "`mem` so gtui starts the job only where that much is free."
                )
        if (
            oom.allocated is not None
            and oom.reserved is not None
            and oom.reserved - oom.allocated > max(1024.0, 0.2 * oom.reserved)
        ):
            parts.append(
                f"{format_mib(oom.reserved - oom.allocated)} was reserved but unallocated "
                "(fragmentation): env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps."
            )
    return " ".join([*parts, base])


def _cuda_error_hint(text: str, base: str) -> str:
    if re.search(r"device-side assert", text, re.I):
        return (
            "A device-side assert is nearly always an index out of range on the GPU (a label "
            ">= num_classes, a token id >= vocabulary size): run it once on the CPU or with env "
            "CUDA_LAUNCH_BLOCKING=1 to see which."
        )
    if re.search(r"(?:CUDNN|CUBLAS)_STATUS_(?:NOT_INITIALIZED|ALLOC_FAILED)", text, re.I):
        return (
            "cuDNN / cuBLAS could not set itself up, usually because the GPU was already "
            "nearly full (raise `mem`), sometimes because the installed torch does not match "
            "the driver. " + base
        )
    if re.search(r"illegal memory access", text, re.I):
        return (
            "An out-of-bounds GPU memory access: bad indices or a bug in a custom kernel / "
            "extension. " + base
        )
    if re.search(r"driver version is insufficient|no kernel image is available", text, re.I):
        return (
            "This torch build does not fit the server: its CUDA needs a newer driver, or it "
            "has no kernels for this GPU. Install a build for the driver's CUDA version "
            "(`nvidia-smi` shows it)."
        )
    return base


def _refine(kind: str, text: str, base: str) -> str:
    """The default hint, made specific with what the line itself says."""
    if kind == "cuda_oom":
        return _oom_hint(text, base)
    if kind == "cuda_error":
        return _cuda_error_hint(text, base)
    if kind == "invalid_device_ordinal":
        m = re.search(r"CUDA device (\d+) but torch\.cuda\.device_count\(\) is (\d+)", text)
        if m:
            return (
                f"The checkpoint was saved on cuda:{m.group(1)} and the job sees "
                f"{m.group(2)} GPU(s): load it with torch.load(..., map_location='cuda:0'). " + base
            )
        return base
    if kind == "address_in_use":
        port = _quoted(text, r"port: (\d+)", r":(\d+) \(errno: 98", r"\('[^']*', (\d+)\)")
        return f"Port {port} is taken. {base}" if port else base
    if kind == "nccl" and re.search(r"Watchdog caught|timeout", text, re.I):
        return (
            "A rank waited longer than the NCCL timeout: another rank died or hung (look above "
            "for its error), or one step (evaluation or checkpointing on rank 0) took longer "
            "than the timeout: raise it with init_process_group(timeout=...)."
        )
    if kind == "no_space":
        if re.search(r"shared memory|/dev/shm|</torch_", text, re.I):
            return (
                "/dev/shm is full or too small (DataLoader workers pass batches through it): "
                "lower num_workers or enlarge /dev/shm (docker --shm-size)."
            )
        if re.search(r"quota", text, re.I):
            return (
                "Your disk quota is used up (`quota -s`): delete old checkpoints or write "
                "elsewhere."
            )
        where = _quoted(text, r"No space left on device: '([^']+)'")
        return f"Writing {where} failed. {base}" if where else base
    if kind == "import_error":
        module = _quoted(text, r"No module named '([^']+)'")
        if module:
            return f"`{module}` is not installed in the python the job ran. {base}"
        name = _quoted(text, r"cannot import name '([^']+)'")
        if name:
            return (
                f"The installed package has no `{name}`: its version differs from what the "
                f"code expects (pin it, or activate the right environment). {base}"
            )
        if re.search(r"undefined symbol|shared librar|\.so\b", text, re.I):
            return (
                "A compiled extension does not match the installed torch / CUDA: reinstall it "
                f"against this torch, or set LD_LIBRARY_PATH in the job's env. {base}"
            )
        return base
    if kind == "file_not_found":
        path = _quoted(
            text,
            r"No such file or directory: '([^']+)'",
            r"can't open file '([^']+)'",
            r"(?:^|: )([^:\s]+): No such file or directory",
        )
        return f"`{path}` is missing. {base}" if path else base
    if kind == "command_not_found":
        cmd = _quoted(text, r"([^\s:]+): command not found", r"\d+: ([^:]+): not found")
        return f"`{cmd}` was not found. {base}" if cmd else base
    if kind == "permission_denied":
        path = _quoted(text, r"Permission denied: '([^']+)'", r"([^\s:]+): Permission denied")
        return f"Not allowed: `{path}`. {base}" if path else base
    if kind == "host_oom":
        if re.search(r"\b_?(?:Array)?MemoryError\b|DefaultCPUAllocator", text):
            return (
                "The process ran out of host RAM (not GPU memory): lower DataLoader "
                "num_workers, the batch size or in-memory caching; every job on this host "
                "shares its RAM."
            )
        return base
    return base


# --------------------------------------------------------------------------------------------
# The entry point.


def status_text(exit_code: int | None, signal: int | None) -> str:
    """``exit code 1`` / ``signal 9 (SIGKILL)`` / ``an unknown exit status``, for messages."""
    _, sigs = _status_sets(exit_code, signal)
    if signal or (exit_code is not None and exit_code < 0):
        sig = next(iter(sigs))
        return f"signal {sig} ({_signal_name(sig)})"
    if exit_code is None:
        return "an unknown exit status"
    text = f"exit code {exit_code}"
    if sigs:
        sig = next(iter(sigs))
        text += f" (a shell's way of saying signal {sig}, {_signal_name(sig)})"
    return text


def _signal_name(sig: int) -> str:
    try:
        return _signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _diagnosis(
    kind: str, lines: Sequence[str], index: int, match_start: int | None, hint: str
) -> Diagnosis:
    line = _shown(lines[index], match_start) if index >= 0 else ""
    return Diagnosis(kind=kind, line=line, hint=hint)


def _from_hit(hit: _Hit, lines: Sequence[str], *, default: bool) -> Diagnosis:
    """A diagnosis from a rule's hit; for a status-only hit, the log line that best shows it.

    A signal death shows its own text if the log has some ("Segmentation fault", "Killed"),
    else the last line (where the job was when it died): an older exception line would
    suggest a cause the status contradicts.
    """
    rule = hit.rule
    index, start = hit.index, hit.start
    if index < 0:
        if default:
            same_kind = [r for r in _SPECIFIC + _CONSEQUENTIAL if r.kind == rule.kind]
            text_hit = _latest(same_kind, lines, set(), set())
            if text_hit is not None:
                index, start = text_hit.index, text_hit.start
        if index < 0:
            index = (
                _last_nonempty_index(lines) if rule in _SIGNAL_DEATHS else _fallback_index(lines)
            )
    if index < 0:
        return Diagnosis(kind=rule.kind, line="", hint=rule.hint)
    text = lines[index]
    if rule.kind == "cuda_oom":
        text = _oom_context(lines, index)
    hint = _refine(rule.kind, text, rule.hint) if default else rule.hint
    if text != lines[index]:
        return Diagnosis(kind=rule.kind, line=_shown(text), hint=hint)
    return _diagnosis(rule.kind, lines, index, start, hint)


_NCCL_INFO_RE = re.compile(r"\bNCCL INFO\b")


def _from_log(lines: Sequence[str], codes: set[int], sigs: set[int]) -> Diagnosis | None:
    """Steps 3 to 6 of the module docstring: the default table against status and log.

    NCCL_DEBUG=INFO chatter is not evidence (it says "No such file or directory" about an
    optional plugin in every healthy run), so the defaults do not read those lines.
    """
    lines = ["" if _NCCL_INFO_RE.search(line) else line for line in lines]
    for rule in _SIGNAL_DEATHS:
        hit = _match(rule, lines, codes, sigs)
        if hit is not None:
            return _from_hit(hit, lines, default=True)
    for tier in (_SPECIFIC, _CONSEQUENTIAL):
        hit = _latest(tier, lines, codes, sigs)
        if hit is not None:
            return _from_hit(hit, lines, default=True)
    for rule in _GENERIC:
        hit = _match(rule, lines, codes, sigs)
        if hit is not None:
            return _from_hit(hit, lines, default=True)
    return None


def _unexplained(exit_code: int | None, signal: int | None, lines: Sequence[str]) -> Diagnosis:
    """Step 7: kind ``error``, the last exception-looking line, and what the status says."""
    what = status_text(exit_code, signal)
    if signal or (exit_code is not None and exit_code < 0):
        what += ", sent from outside gtui (another user, an admin, the system)"
    index = _last_exception_index(lines)
    if index >= 0:
        hint = f"It ended with {what}; the line above is the last error its log shows."
    else:
        index = _last_nonempty_index(lines)
        if index < 0:
            return Diagnosis(
                kind="error", line="", hint=f"It ended with {what} and its log is empty."
            )
        hint = f"It ended with {what}; the line above is the last line of its log."
    return _diagnosis("error", lines, index, None, f"{hint} {_ERROR_HINT}")


FULL_DISK_BYTES = 1 << 20
"""Less free space than this on the log's file system counts as a full disk."""


def full_disk(log: Path) -> Diagnosis | None:
    """``no_space`` when a failed job's log sits on a full disk, else None. Then the disk is
    the likely cause, and the job's own error message was lost with the rest of its output, so
    its log cannot say so: the tail-based rules see only what was written before."""
    try:
        st = os.statvfs(log.parent)
    except OSError:
        return None
    free = st.f_bavail * st.f_frsize
    if free >= FULL_DISK_BYTES:
        return None
    return Diagnosis(
        kind="no_space",
        line=(
            f"the disk holding {log.parent} is full ({free // 1024} KiB free): the job's "
            "output, and perhaps its error message, could not be written"
        ),
        hint=(
            "Free space there (`df -h`, `du -sh`) or point log_dir elsewhere, then retry it; "
            "jobs that write nothing are not affected."
        ),
    )


def diagnose(
    exit_code: int | None,
    signal: int | None,
    log_tail: str,
    *,
    rules: Sequence[DiagnosisRule] = (),
    timed_out: bool = False,
    killed_by_user: bool = False,
    matcher: Matcher = local_search,
    on_overrun: Callable[[DiagnosisRule], None] | None = None,
) -> Diagnosis | None:
    """Why a job ended badly, or ``None`` if it succeeded (exit 0, no signal, not stopped).

    ``signal`` is the signal that killed it, if any (a negative ``exit_code``, Popen's
    convention, means the same); exit 128+N from a shell counts as signal N for rules.
    ``log_tail`` is the end of its log, raw or already cleaned. ``rules`` are the user's
    ``[[diagnose]]`` rules, tried first, through ``matcher``: a rule whose pattern runs past
    its deadline (:class:`PatternOverrun`) is skipped and given to ``on_overrun``, and the
    next rules decide. See the module docstring for the precedence.
    """
    lines = clean_log(log_tail).split("\n")
    if killed_by_user:
        return _diagnosis("killed_by_user", lines, _last_nonempty_index(lines), None, _KILLED_HINT)
    if timed_out:
        inner = _from_log(lines, set(), set())  # its status is gtui's own signal: not evidence
        if inner is not None and inner.kind != "runtime_error":
            hint = f"{_TIMEOUT_HINT} Before that the log shows {inner.kind}: {inner.hint}"
            return Diagnosis(kind="timeout", line=inner.line, hint=hint)
        return _diagnosis("timeout", lines, _last_nonempty_index(lines), None, _TIMEOUT_HINT)
    if exit_code == 0 and not signal:
        return None
    codes, sigs = _status_sets(exit_code, signal)
    for rule in rules:
        try:
            hit = _user_match(rule, lines, codes, sigs, matcher)
        except PatternOverrun:
            if on_overrun is not None:
                on_overrun(rule)
            continue
        if hit is not None:
            return _from_hit(hit, lines, default=False)
    found = _from_log(lines, codes, sigs)
    return found if found is not None else _unexplained(exit_code, signal, lines)
