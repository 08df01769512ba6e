"""Hints made specific with what the log says: the numbers of an OOM, the port taken, the GPU
architecture missing from the build, the exception and the line of the job's code that raised it.

Each function takes the base hint of its kind (:mod:`gtui.core.diagnosis.rules`) and returns it
with the facts the matched text gives; a message it does not recognise keeps the base hint.

Size: one small function per kind that fills its hint from the log (the GPU arch, the
port, the KV cache that fits); split, each would be a file of ten lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from gtui.core.diagnosis.logtext import Line, PyException, last_exception
from gtui.core.diagnosis.oom import oom_peak_mib, parse_oom
from gtui.core.model import Diagnosis
from gtui.core.units import format_mib


def _quoted(text: str, *patterns: str) -> str | None:
    for p in patterns:
        m = re.search(p, text)
        if m:
            return m.group(1)
    return None


# --------------------------------------------------------------------------------------------
# GPU memory.


def oom_hint(text: str, base: str) -> str:
    parts: list[str] = []
    if re.search(r"RESOURCE[_ ]EXHAUSTED", text, re.I):
        parts.append(
            "JAX preallocates 75% of the GPU: on a shared GPU set env "
            "XLA_PYTHON_CLIENT_PREALLOCATE=false (or XLA_PYTHON_CLIENT_MEM_FRACTION)."
        )
    elif re.search(r"OOM when allocating tensor", text, re.I):
        parts.append("TensorFlow takes the whole GPU unless env TF_FORCE_GPU_ALLOW_GROWTH=true.")
    oom = parse_oom(text)
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


def kv_cache_hint(text: str, base: str) -> str:
    m = re.search(r"max seq len \((\d+)\)[^\n]*KV cache \((\d+)\)", text)
    if m:
        return (
            f"The model's context ({m.group(1)} tokens) does not fit the KV cache "
            f"({m.group(2)} tokens): pass --max-model-len {m.group(2)} or less, or raise "
            "gpu_memory_utilization. " + base
        )
    if re.search(r"No available memory for the cache blocks", text):
        return (
            "The weights and activations took all the memory the engine may use, leaving none "
            "for the KV cache: raise gpu_memory_utilization, or another process already holds "
            "memory on that GPU (declare `mem`). " + base
        )
    return base


# --------------------------------------------------------------------------------------------
# CUDA, cuDNN, cuBLAS.

_MIN_CUDA = {
    "sm_80": "11.0",
    "sm_86": "11.1",
    "sm_89": "11.8",
    "sm_90": "11.8",
    "sm_100": "12.8",
    "sm_120": "12.8",
}


def no_kernel_image_hint(context: str, base: str) -> str:
    m = re.search(
        r"(\w+) is only supported on GPUs with compute capability of at least (\d+(?:\.\d+)?)"
        r"\. Your ([^.]+?) GPU has compute capability (\d+(?:\.\d+)?)",
        context,
    )
    if m:
        what = "bf16" if m.group(1).lower() == "bfloat16" else m.group(1)
        return (
            f"{what} needs compute capability {m.group(2)}; the {m.group(3)} is "
            f"{m.group(4)} (sm_{m.group(4).replace('.', '')}): run it in fp16 (--dtype half / "
            "dtype='float16') or give the job a newer GPU. Retrying will not help."
        )
    if re.search(r"only supports (?:Ampere|Turing|Hopper) GPUs or newer", context):
        return (
            "This kernel (FlashAttention) needs a newer GPU than this one: turn it off "
            "(attn_implementation='sdpa' / 'eager') or give the job an Ampere or newer GPU. " + base
        )
    arch = _quoted(context, r"CUDA capability (sm_\d+)", r"capability (sm_\d+) is not compatible")
    if arch is None:
        cap = _quoted(context, r"cuda capability (\d+\.\d+)")
        arch = f"sm_{cap.replace('.', '')}" if cap else None
    built = _quoted(context, r"supports CUDA capabilities ((?:sm_\d+\s*)+)")
    if arch is None:
        return base
    said = f"This GPU is {arch}"
    if built:
        said += f"; the installed torch has kernels for {built.strip()} only"
    said += "."
    need = _MIN_CUDA.get(arch)
    if need:
        said += f" Install a torch built with CUDA {need} or newer (it includes {arch})."
    elif arch < "sm_50":
        said += " Current torch builds no longer support it: use an older torch or another GPU."
    return f"{said} {base}"


def driver_hint(text: str, base: str) -> str:
    m = re.search(r"found version (\d+)", text)
    if m:
        v = int(m.group(1))
        return (
            f"The driver supports CUDA up to {v // 1000}.{(v % 1000) // 10}; this torch needs "
            "a newer one. " + base
        )
    return base


def device_assert_hint(context: str, base: str) -> str:
    if re.search(r"t >= 0 && t < n_classes|cur_target >= 0 && cur_target < n_classes", context):
        return (
            "A class label is outside [0, num_classes) in the loss (a label of -1 or of "
            "num_classes, a mask value like 255 without ignore_index): check the labels "
            "against the model's number of classes. " + base
        )
    if re.search(r"srcIndex < srcSelectDimSize", context):
        return (
            "An index passed to an embedding / index_select is >= its size: token ids beyond "
            "the vocabulary (a tokenizer that does not match the model: resize_token_embeddings) "
            "or positions beyond max_position_embeddings. " + base
        )
    return base


def cuda_error_hint(text: str, base: str) -> str:
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
    if re.search(r"busy or unavailable", text, re.I):
        return (
            "The GPU refused a new context: it is in exclusive-process compute mode with another "
            "process on it, or in a bad state (`nvidia-smi -q -d COMPUTE`, dmesg for an Xid). "
            + base
        )
    if re.search(r"unknown error|CUDA_ERROR_UNKNOWN", text, re.I):
        return (
            "CUDA reported an unknown error: if it repeats, look for an Xid in `dmesg -T` (a GPU "
            "fault) before debugging the code. " + base
        )
    return base


def cudnn_hint(text: str, base: str) -> str:
    if re.search(r"CUDNN_STATUS_(?:NOT_INITIALIZED|ALLOC_FAILED)|libcudnn", text, re.I):
        return (
            "cuDNN could not set itself up: the GPU was nearly full when it started (raise "
            "`mem`) or its library does not match the installed torch. " + base
        )
    return base


def cublas_hint(text: str, base: str) -> str:
    if re.search(r"CUBLAS_STATUS_NOT_SUPPORTED[^\n]*16BF", text):
        return (
            "bf16 matmuls need an Ampere or newer GPU (compute capability 8.0): run this GPU "
            "in fp16 or fp32. " + base
        )
    if re.search(r"CUBLAS_STATUS_(?:ALLOC_FAILED|NOT_INITIALIZED)", text):
        return "cuBLAS could not allocate its workspace: the GPU was nearly full. " + base
    return base


def device_mismatch_hint(text: str, base: str) -> str:
    devices = _quoted(text, r"at least two devices, ([\w:]+ and [\w:]+)")
    arg = _quoted(text, r"argument for argument (\w+ in method \w+)")
    said = []
    if devices:
        said.append(f"The operation got tensors on {devices}")
        if arg:
            said[-1] += f" ({arg})"
        said[-1] += "."
    return " ".join([*said, base])


# --------------------------------------------------------------------------------------------
# NCCL and the network.


def nccl_hint(text: str, base: str) -> str:
    if re.search(r"Duplicate GPU detected", text):
        return (
            "Two ranks were on one GPU: the job starts more processes than it has GPUs "
            "(`gpus` must equal --nproc_per_node) or picks its GPU by a physical index; under "
            "gtui each rank should use cuda:LOCAL_RANK. " + base
        )
    if re.search(
        r"No route to host|Connection refused|socketStartConnect|NCCL_SOCKET_IFNAME", text
    ):
        return (
            "NCCL could not connect between ranks over the network: set env NCCL_SOCKET_IFNAME "
            "to the interface the nodes share (`ip a`). " + base
        )
    if re.search(r"unhandled cuda error|ncclUnhandledCudaError", text, re.I):
        return "NCCL hit a CUDA error: look above for it (often an OOM on one rank). " + base
    return base


def nccl_timeout_hint(text: str, base: str) -> str:
    if re.search(r"watchdog got stuck|Heartbeat monitor timed out", text):
        return (
            "The NCCL watchdog itself hung (its heartbeat monitor killed the process): a rank "
            "is stuck inside a CUDA / NCCL call, usually after another rank died or hung. " + base
        )
    if re.search(r"waiting for clients|RendezvousTimeout", text):
        return (
            "The ranks never all met: one of them did not start or died early (look for its "
            "error), or they disagree on MASTER_ADDR / MASTER_PORT. " + base
        )
    return base


def address_hint(text: str, base: str) -> str:
    port = _quoted(text, r"port: (\d+)", r":(\d+) \(errno: 98", r"\('[^']*', (\d+)\)", r"\]:(\d+) ")
    return f"Port {port} is taken. {base}" if port else base


def network_hint(text: str, base: str) -> str:
    if re.search(r"wandb", text, re.I):
        return (
            'wandb could not reach its server: set env WANDB_MODE = "offline" in the queue '
            'file (then `wandb sync` the run later) or "disabled"; behind a proxy set '
            "HTTPS_PROXY in the job's env."
        )
    host = _quoted(
        text, r"host='([^']+)'", r"connect to '?https?://([^'/\s]+)", r"Connection to ([\w.-]+)"
    )
    if host:
        return f"{host} could not be reached. {base}"
    return base


# --------------------------------------------------------------------------------------------
# Memory and disks.


def no_space_hint(text: str, base: str) -> str:
    if re.search(r"quota", text, re.I):
        return "Your disk quota is used up (`quota -s`): delete old checkpoints or write elsewhere."
    where = _quoted(text, r"No space left on device: '([^']+)'")
    return f"Writing {where} failed. {base}" if where else base


def host_oom_hint(text: str, base: str) -> str:
    if re.search(r"\b_?(?:Array)?MemoryError\b|DefaultCPUAllocator|Cannot allocate memory", text):
        return (
            "The process ran out of host RAM (not GPU memory): lower DataLoader "
            "num_workers, the batch size or in-memory caching; every job on this host "
            "shares its RAM."
        )
    return base


# --------------------------------------------------------------------------------------------
# The job's own errors.


def import_hint(text: str, base: str) -> str:
    module = _quoted(text, r"No module named '([^']+)'")
    if module:
        return f"`{module}` is not installed in the python the job ran. {base}"
    name = _quoted(text, r"cannot import name '([^']+)'")
    if name:
        return (
            f"The installed package has no `{name}`: its version differs from what the "
            f"code expects (pin it, or activate the right environment). {base}"
        )
    if re.search(
        r"undefined symbol|shared librar|shared object|\.so\b|DLL load failed", text, re.I
    ):
        lib = _quoted(text, r"(lib[\w.+-]+\.so[\d.]*)")
        said = f"`{lib}` was not found: " if lib else ""
        return (
            f"{said}a compiled extension does not match the installed torch / CUDA: reinstall "
            f"it against this torch, or set LD_LIBRARY_PATH in the job's env. {base}"
        )
    return base


def file_not_found_hint(text: str, base: str) -> str:
    path = _quoted(
        text,
        r"No such file or directory: '([^']+)'",
        r"can't open file '([^']+)'",
        r"(?:^|: )([^:\s]+): No such file or directory",
    )
    return f"`{path}` is missing. {base}" if path else base


def command_hint(text: str, base: str) -> str:
    cmd = _quoted(text, r"([^\s:]+): command not found", r"\d+: ([^:]+): not found")
    return f"`{cmd}` was not found. {base}" if cmd else base


def permission_hint(text: str, base: str) -> str:
    path = _quoted(text, r"Permission denied: '([^']+)'", r"([^\s:]+): Permission denied")
    return f"Not allowed: `{path}`. {base}" if path else base


def exception_hint(exc: PyException | None, base: str) -> str:
    """Names the exception and where the job's own code raised it (or called the library)."""
    if exc is None:
        return base
    said = f"`{exc.name}`"
    user, last = exc.user_frame, exc.raised_at
    if user is not None and last is not None and user != last:
        said += f" raised in {last.where}, called from your {user.where}"
    elif user is not None:
        said += f" raised at {user.where}"
    elif last is not None:
        said += f" raised in {last.where}"
    elif exc.message:
        message = exc.message if len(exc.message) <= 80 else exc.message[:79] + "…"
        said = f"`{exc.name}: {message}` (the log shows no traceback)"
    said += "."
    if re.search(r"DataLoader worker \(pid\(s\) [\d, ]+\) exited unexpectedly", exc.message):
        said += (
            " A DataLoader worker died: its own error is above if it printed one; with none, "
            "it was killed (host RAM: `dmesg -T | grep -i oom`) or crashed in native code. Rerun "
            "with num_workers=0 to see the real error in the main process."
        )
    if re.search(r"ChildFailedError|CalledProcessError|ProcessRaisedException", exc.type):
        said += (
            " A child process (a rank, a launched command) failed: its own error is above, or "
            "in its own log."
        )
    if re.search(r"Error\(s\) in loading state_dict", exc.message):
        said += (
            " The checkpoint does not fit the model (size mismatch / missing keys): build the "
            "model with the config the checkpoint was trained with."
        )
    return f"{said} {base}"


def refine(kind: str, text: str, base: str, lines: Sequence[Line], index: int) -> str:
    """The base hint of ``kind``, made specific with what ``text`` (the matched line, or the
    lines it was wrapped over) and the lines around ``index`` say."""
    if kind == "cuda_oom":
        return oom_hint(text, base)
    if kind == "kv_cache":
        return kv_cache_hint(text, base)
    if kind == "no_kernel_image":
        return no_kernel_image_hint(_around(lines, index, 200), base)
    if kind == "cuda_driver_mismatch":
        return driver_hint(text, base)
    if kind == "device_assert":
        return device_assert_hint(_around(lines, index, 30), base)
    if kind == "cuda_error":
        return cuda_error_hint(text, base)
    if kind == "cudnn_error":
        return cudnn_hint(text, base)
    if kind == "cublas_error":
        return cublas_hint(text, base)
    if kind == "device_mismatch":
        exc = last_exception(lines[: index + 1])
        if exc is not None and exc.frames:
            base = exception_hint(exc, base)
        return device_mismatch_hint(text, base)
    if kind == "invalid_device_ordinal":
        m = re.search(r"CUDA device (\d+) but torch\.cuda\.device_count\(\) is (\d+)", text)
        if m:
            return (
                f"The checkpoint was saved on cuda:{m.group(1)} and the job sees "
                f"{m.group(2)} GPU(s): load it with torch.load(..., map_location='cuda:0'). " + base
            )
        return base
    if kind == "address_in_use":
        return address_hint(text, base)
    if kind == "nccl":
        return nccl_hint(_around(lines, index, 4), base)
    if kind == "nccl_timeout":
        return nccl_timeout_hint(text, base)
    if kind == "network":
        return network_hint(_around(lines, index, 6) if "wandb" not in text else text, base)
    if kind == "no_space":
        return no_space_hint(text, base)
    if kind == "host_oom":
        return host_oom_hint(text, base)
    if kind == "import_error":
        return import_hint(text, base)
    if kind == "file_not_found":
        return file_not_found_hint(text, base)
    if kind == "command_not_found":
        return command_hint(text, base)
    if kind == "permission_denied":
        return permission_hint(text, base)
    if kind in ("runtime_error", "python_exception"):
        return exception_hint(last_exception(lines[: index + 1]), base)
    return base


# The kinds a missing environment shows as, and what a job with no `setup` is told about them.
ENVIRONMENT_KINDS = frozenset({"command_not_found", "import_error"})
NO_SETUP_HINT = (
    " This job has no `setup`: put the activation once in [settings] (or on the job), "
    'e.g. setup = "source .venv/bin/activate" or setup = "source '
    '~/miniconda3/etc/profile.d/conda.sh && conda activate ENV"; it runs before cmd in the '
    "same shell."
)


def setup_advice(diagnosis: Diagnosis | None, has_setup: bool) -> Diagnosis | None:
    """``diagnosis``, its hint naming ``setup`` when the job failed for want of its environment
    (a command not found, a module missing) and runs with no setup."""
    if diagnosis is None or has_setup or diagnosis.kind not in ENVIRONMENT_KINDS:
        return diagnosis
    return replace(diagnosis, hint=diagnosis.hint + NO_SETUP_HINT)


def _around(lines: Sequence[Line], index: int, before: int) -> str:
    lo = max(0, index - before)
    return "\n".join(line.text for line in lines[lo : index + 4])
