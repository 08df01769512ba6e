"""gtui's diagnosis table: each kind of failure, the log text that shows it, and its hint.

Data, not logic: :mod:`gtui.core.diagnosis.diagnose` applies the tiers in order and
:mod:`gtui.core.diagnosis.hints` makes a hint specific with what the matched line says. A user's
``[[diagnose]]`` rules come before all of these and can add kinds or override any of them.

Tiers, from first to last (see ``diagnose``'s docstring for how they are applied):

- ``HARDWARE``: a GPU that failed. Decisive whatever else the log or the exit status says.
- ``SIGNAL_DEATHS``: killed by a signal the job cannot have sent itself for a Python error
  (SIGSEGV, SIGKILL, SIGBUS, SIGXFSZ); the log's earlier errors did not end it.
- ``ROOT``: causes. The latest in the log wins; on one line, the one listed first.
- ``CONSEQUENTIAL``: often the effect of a root cause on another rank or process (NCCL), or
  noise around it (a missing optional file, an import that was caught).
- ``GENERIC``: a process that aborted itself; then the job's own Python exception.

Size: this is data, the table of kinds (patterns, exit codes, hints); a long table is
the point, and one file keeps every kind's precedence visible.
"""

from __future__ import annotations

import signal as _signal

from gtui.core.model import DiagnosisRule

# --------------------------------------------------------------------------------------------
# Hints.

GPU_FAULT_HINT = (
    "The GPU itself failed (an uncorrectable ECC error, an Xid error, a GPU that fell off the "
    "bus or that NVML reports lost or in an unknown state): not your code. gtui quarantines "
    "that GPU (no new jobs start on it until you clear it in the dashboard or from the command "
    "line) and, if the job has retries left, runs it once more on another GPU. Tell the "
    "admin: it needs `nvidia-smi -r` or a reboot, and a card that keeps doing this needs "
    "replacing (`dmesg -T | grep -i xid`)."
)
CUDA_OOM_HINT = (
    "The GPU ran out of memory. Lower the batch size (gradient accumulation keeps the "
    "effective batch) or raise the job's `mem` so it starts where that much is free; "
    "with retries left, the retry asks for more memory (oom_grow)."
)
KV_CACHE_HINT = (
    "The serving engine (vLLM, SGLang) could not fit its KV cache in the GPU memory it may use. "
    "Lower max_model_len (--max-model-len) to what fits, raise gpu_memory_utilization "
    "(--gpu-memory-utilization) if nothing else uses the GPU, or give the job more GPUs "
    "(tensor parallel) / a `mem` so it starts where that much memory is free."
)
DEVICE_ASSERT_HINT = (
    "A device-side assert is nearly always an index out of range on the GPU (a label "
    ">= num_classes, a token id >= vocabulary size): run it once on the CPU or with env "
    "CUDA_LAUNCH_BLOCKING=1 to see which. A retry fails the same way."
)
NO_KERNEL_IMAGE_HINT = (
    "The installed torch (or a compiled extension) has no kernels for this GPU's architecture. "
    "Install a build whose CUDA version supports it (`nvidia-smi --query-gpu=compute_cap "
    "--format=csv` shows the GPU's; `python -c 'import torch; print(torch.cuda.get_arch_list())'` "
    "the build's), or rebuild the extension with TORCH_CUDA_ARCH_LIST set to it."
)
DRIVER_HINT = (
    "The CUDA runtime this program was built for needs a newer NVIDIA driver than the server "
    "has. Install a torch / library build for the driver's CUDA version (`nvidia-smi` shows it "
    "top right), or ask the admin to update the driver. Retrying will not help."
)
CUDNN_HINT = (
    "cuDNN failed. CUDNN_STATUS_INTERNAL_ERROR / NOT_INITIALIZED / ALLOC_FAILED mostly mean the "
    "GPU was already nearly full when cuDNN started (raise `mem`, lower the batch size); "
    "NOT_SUPPORTED / EXECUTION_FAILED an input cuDNN cannot take (try "
    "torch.backends.cudnn.enabled = False to confirm); a missing libcudnn a cuDNN that does "
    "not match the installed torch."
)
CUBLAS_HINT = (
    "cuBLAS failed. CUBLAS_STATUS_NOT_SUPPORTED with CUDA_R_16BF is bf16 on a GPU older than "
    "Ampere (use fp16 or fp32); ALLOC_FAILED / NOT_INITIALIZED a GPU already nearly full (raise "
    "`mem`); EXECUTION_FAILED / INTERNAL_ERROR often a bad index or shape before the matmul: "
    "rerun with env CUDA_LAUNCH_BLOCKING=1 to see where."
)
INVALID_ORDINAL_HINT = (
    "The job asked for a GPU it cannot see. With isolation (`isolate = true`, the "
    "default) a job sees only its own GPUs, numbered from 0: use cuda:0 (cuda:0 to "
    "cuda:N-1 with N GPUs), not the physical index: `{gpu}` is the physical index, "
    "meant for tools that read NVML. A script that picks its GPU itself needs "
    "`isolate = false`."
)
DEVICE_MISMATCH_HINT = (
    "Tensors on different devices met in one operation (one on the GPU, one on the CPU, or on "
    "two GPUs): move the model and every input to the same device (`.to(device)` on the batch, "
    "the labels and any tensor created in forward), or load the checkpoint with map_location. "
    "A retry fails the same way."
)
NO_CUDA_DEVICE_HINT = (
    "The job sees no GPU. A job with `gpus = 0` runs with CUDA_VISIBLE_DEVICES empty "
    "(CPU only): give it `gpus = 1`. Otherwise check that the script does not set "
    "CUDA_VISIBLE_DEVICES itself (gtui already set it to the job's GPUs) and that the "
    "driver works (`gtui gpus`)."
)
LIBUV_HINT = (
    "This PyTorch was built without libuv but torchrun / TCPStore asked for it: set "
    'env USE_LIBUV = "0" for the job (some launch scripts also set '
    'TORCHELASTIC_USE_AGENT_STORE = "0").'
)
ADDRESS_IN_USE_HINT = (
    "Another process already listens on that port (often a second DDP job on the "
    "default 29500). Give each job its own: put `{port}` in cmd (torchrun "
    "--master_port {port}, or MASTER_PORT={port}); gtui picks a free port per job."
)
WANDB_HINT = (
    "wandb wants an API key and a batch job cannot prompt for one: set env "
    'WANDB_MODE = "disabled" (or "offline", then `wandb sync`) in the queue file, or '
    "run `wandb login` once / set WANDB_API_KEY."
)
NETWORK_HINT = (
    "The job could not reach the network (the Hugging Face Hub or another download). On a "
    "node without internet, download the model / data set beforehand (`huggingface-cli "
    'download`) and set env HF_HUB_OFFLINE = "1" so it reads the cache, or pass a local path; '
    "behind a proxy set HTTPS_PROXY in the job's env. A passing outage: retries help."
)
HUB_AUTH_HINT = (
    "The Hub refused the download: a gated or private model needs a token (`huggingface-cli "
    "login`, or env HF_TOKEN) and its license accepted on its page; a wrong repository name "
    "gives the same error. Retrying will not help."
)
NAN_HINT = (
    "The loss became NaN or infinite. Lower the learning rate (or warm it up), clip gradients, "
    "use bf16 or a loss scaler instead of plain fp16, and check the data for NaN / inf / empty "
    "targets; torch.autograd.set_detect_anomaly(True) points at the operation. A retry with "
    "the same seed and settings diverges the same way."
)
TOO_MANY_FILES_HINT = (
    "The process ran out of file descriptors (`ulimit -n`, inherited from the shell that "
    "started gtui). Raise the limit before starting gtui (`ulimit -n 65536`), or use fewer "
    "DataLoader workers, or call torch.multiprocessing.set_sharing_strategy('file_system') "
    "when workers pass many tensors."
)
SHM_HINT = (
    "Shared memory (/dev/shm) is full or too small: DataLoader workers pass batches through "
    "it. Lower num_workers (0 avoids it), or enlarge /dev/shm (docker run --shm-size=16g or "
    "--ipc=host; `df -h /dev/shm` shows its size)."
)
QUOTA_HINT = (
    "Your disk quota is used up (`quota -s`, or the cluster's quota tool), even if the disk "
    "has room: delete old checkpoints and caches (~/.cache/huggingface, ~/.cache/pip, "
    "~/.triton) or write to a file system with more quota (set HF_HOME / TRITON_CACHE_DIR "
    "there)."
)
NO_SPACE_HINT = (
    "A disk is full: `df -h` the output, checkpoint and cache directories (~/.cache, "
    "/tmp), delete old checkpoints or write elsewhere. PyTorch's checkpoint writer says "
    "'file write failed' and a failed write() 'Input/output error' when that happens."
)
HOST_OOM_HINT = (
    "A process was killed by SIGKILL, most likely by the kernel's OOM killer: the host "
    "ran out of RAM (not GPU memory). Check `dmesg -T | grep -i oom`, then lower "
    "DataLoader num_workers, the batch size or in-memory caching; every job on this "
    "host shares its RAM."
)
HOST_OOM_STATUS_HINT = (
    "Killed by SIGKILL with no error of its own: most likely the kernel's OOM killer "
    "(host RAM, not GPU memory). Check `dmesg -T | grep -i oom`, then lower DataLoader "
    "num_workers, the batch size or in-memory caching; every job on this host shares "
    "its RAM."
)
SEGFAULT_HINT = (
    "The process crashed in native code (segmentation fault). Usual causes: a compiled "
    "extension built for another torch / CUDA version, a library bug, too many "
    "DataLoader workers; rerun with `python -X faulthandler` to see the Python stack."
)
FILE_TOO_LARGE_HINT = (
    "Killed by SIGXFSZ: a file it wrote (its log, a checkpoint) reached the file-size "
    "limit (`ulimit -f`, set for your session or by an admin). Raise the limit or write "
    "less, then retry it."
)
NCCL_TIMEOUT_HINT = (
    "A rank waited longer than the NCCL timeout: another rank died or hung (look above "
    "for its error), or one step (evaluation or checkpointing on rank 0) took longer "
    "than the timeout: raise it with init_process_group(timeout=...)."
)
NCCL_HINT = (
    "A collective between the job's processes failed. Look above for the first error "
    "of any rank (an OOM or crash on one rank makes the others fail or time out); "
    "rerun with env NCCL_DEBUG=INFO for details; NCCL_P2P_DISABLE=1 helps when the "
    "job's GPUs cannot talk peer to peer."
)
CUDA_ERROR_HINT = (
    "A CUDA call failed. Rerun with env CUDA_LAUNCH_BLOCKING=1 so the error points at "
    "the call that really failed (CUDA reports kernel errors late)."
)
IMPORT_HINT = (
    "Python could not import a module. The job runs `bash -c CMD` without your "
    "interactive shell's setup: activate the environment in cmd (`source "
    ".venv/bin/activate && python ...`, `conda run -n ENV python ...`) or call that "
    "environment's python by its full path, then install what is missing."
)
FILE_NOT_FOUND_HINT = (
    "A file or directory does not exist. Relative paths start from the job's `cwd`, "
    "not from the shell gtui was started in; check the path, and that the jobs it "
    "depends on (`after`) wrote it."
)
PERMISSION_HINT = (
    "Permission denied: make the script executable (`chmod +x`) or run it through its "
    "interpreter (`bash script.sh`, `python script.py`), and check that the output "
    "directories are writable."
)
SETUP_FAILED_HINT = (
    "The job's `setup` (its own, else the queue's [settings] one) ended with an error, so its "
    "command never ran: the lines above show why (a path to `activate` that does not exist, a "
    "conda environment of another name, `conda` itself not found). Fix `setup`, run it in a "
    "shell by hand to check, then retry."
)
COMMAND_NOT_FOUND_HINT = (
    "bash could not find the command. The job does not read your ~/.bashrc, so its "
    "aliases and PATH changes (conda / venv activation) are missing: use a full path or "
    "activate the environment in cmd."
)
ABORT_HINT = (
    "The process aborted itself (SIGABRT): a fatal error in native code, such as an uncaught "
    "C++ exception ('terminate called ...'), a failed assertion inside a library, or the NCCL "
    "watchdog taking the process down. It was not killed from outside; the lines just above "
    "the abort name the error."
)
RUNTIME_ERROR_HINT = (
    "The program raised a RuntimeError: its traceback in the log says where. This is "
    "the program's own error, not a scheduling problem: a retry will fail the same way."
)
PYTHON_EXCEPTION_HINT = (
    "The program raised an exception: its traceback in the log says where. This is the "
    "program's own error (its code, config or input), not a scheduling problem: a retry "
    "will fail the same way."
)

# --------------------------------------------------------------------------------------------
# The table.


def _died_by(num: int, name: str) -> str:
    """How launchers report a child process that a signal killed: torchrun's ``exitcode: -9``
    and ``Signal 9 (SIGKILL) received``, deepspeed's ``exits with return code = -9``,
    subprocess's ``died with <Signals.SIGKILL: 9>`` / ``exit status -9``, mpirun's ``exited on
    signal 9``, MPICH's ``EXIT CODE: 9``, an IDE's ``exit code 137 (interrupted by signal 9``."""
    return (
        rf"exitcode\s*:?\s*-{num}\b|Signal {num} \({name}\) received|return code = -{num}\b"
        rf"|<Signals\.{name}: {num}>|exit status -{num}\b|exited on signal {num}\b"
        rf"|EXIT CODE: {num}\b|interrupted by signal {num}\b"
    )


HARDWARE: tuple[DiagnosisRule, ...] = (
    DiagnosisRule(
        kind="gpu_fault",
        hint=GPU_FAULT_HINT,
        pattern=(
            r"uncorrectable ECC error|ECC_UNCORRECTABLE|cudaErrorECCUncorrectable"
            r"|uncorrectable NVLink error|fallen off the bus|\bGPU is lost\b|GpuIsLost"
            r"|NVML_ERROR_GPU_IS_LOST|NVMLError_Unknown|device handle for GPU[^\n]*Unknown Error"
            r"|\bXid\b[^\n]{0,40}?:\s*(?:48|6[1-4]|7[49]|9[2-5]|119|12[0-3]|14[0-4])\b"
        ),
    ),
)

SIGNAL_DEATHS: tuple[DiagnosisRule, ...] = (
    DiagnosisRule(
        kind="segfault",
        hint=SEGFAULT_HINT,
        exit_codes=(139,),
        signals=(int(_signal.SIGSEGV),),
    ),
    DiagnosisRule(
        kind="host_oom",
        hint=HOST_OOM_STATUS_HINT,
        exit_codes=(137,),
        signals=(int(_signal.SIGKILL),),
    ),
    DiagnosisRule(
        kind="shm_full",
        hint=SHM_HINT,
        exit_codes=(128 + int(_signal.SIGBUS),),
        signals=(int(_signal.SIGBUS),),
    ),
    DiagnosisRule(
        kind="file_too_large",
        hint=FILE_TOO_LARGE_HINT,
        exit_codes=(128 + int(_signal.SIGXFSZ),),
        signals=(int(_signal.SIGXFSZ),),
    ),
)

ROOT: tuple[DiagnosisRule, ...] = (
    DiagnosisRule(
        kind="kv_cache",
        hint=KV_CACHE_HINT,
        pattern=(
            r"maximum number of tokens that can be stored in KV cache"
            r"|No available memory for the cache blocks"
            r"|KV cache is needed, which is larger than the available KV cache memory"
            r"|Not enough memory\. Please try to increase --mem-fraction-static"
        ),
    ),
    DiagnosisRule(
        kind="cuda_oom",
        hint=CUDA_OOM_HINT,
        pattern=(
            r"CUDA out of memory|CUDA (?:runtime )?error(?: \(2\))? ?: out of memory"
            r"|\b(?:torch|cupy)\.[\w.]*OutOfMemoryError|cudaErrorMemoryAllocation"
            r"|RESOURCE[_ ]EXHAUSTED: Out of memory|OOM when allocating tensor"
            r"|Cuda failure 'out of memory'|CUDA_ERROR_OUT_OF_MEMORY"
        ),
    ),
    DiagnosisRule(
        kind="device_assert",
        hint=DEVICE_ASSERT_HINT,
        pattern=(
            r"device-side assert triggered|Device-side assertion [^\n]{0,120} failed"
            r"|block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion|cudaErrorAssert"
        ),
    ),
    DiagnosisRule(
        kind="no_kernel_image",
        hint=NO_KERNEL_IMAGE_HINT,
        pattern=(
            r"no kernel image is available|CUDA_ERROR_NO_BINARY_FOR_GPU"
            r"|cudaErrorNoKernelImageForDevice|not compatible with the current PyTorch installation"
            r"|PyTorch no longer supports this GPU because it is too old"
            r"|CUDA error \(48\)|cuda runtime error \(48\)|error=48\b|error = 48\b"
            r"|only supported on GPUs with compute capability of at least"
            r"|only supports (?:Ampere|Turing|Hopper) GPUs or newer"
            r"|(?:requires|needs) (?:a )?GPU with compute capability"
        ),
    ),
    DiagnosisRule(
        kind="cuda_driver_mismatch",
        hint=DRIVER_HINT,
        pattern=(
            r"driver version is insufficient for CUDA runtime"
            r"|NVIDIA driver on your system is too old"
            r"|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH|cudaErrorInsufficientDriver"
            r"|CUDA error \(35\)|cuda runtime error \(35\)|error=35\b|error = 35\b"
            r"|CUDA failure 35\b"
            r"|forward compatibility was attempted on non supported HW"
            r"|system has unsupported display driver / cuda driver combination"
        ),
    ),
    DiagnosisRule(
        kind="cudnn_error",
        hint=CUDNN_HINT,
        pattern=(
            r"\bCUDNN_STATUS_[A-Z_]+|cuDNN error|Could not load library libcudnn"
            r"|Unable to load any of \{libcudnn|libcudnn[\w.]*: cannot open shared object"
            r"|cuDNN version incompatibility|Failed to get convolution algorithm"
        ),
    ),
    DiagnosisRule(
        kind="cublas_error",
        hint=CUBLAS_HINT,
        pattern=r"\bCUBLAS_STATUS_[A-Z_]+|cuBLAS error|cublasLt\w* (?:failed|returned)",
    ),
    DiagnosisRule(
        kind="invalid_device_ordinal",
        hint=INVALID_ORDINAL_HINT,
        pattern=(
            r"invalid device ordinal|CUDA_ERROR_INVALID_DEVICE|cudaErrorInvalidDevice"
            r"|Invalid device id|deserialize object on CUDA device \d+ but "
            r"torch\.cuda\.device_count\(\) is \d+"
        ),
    ),
    DiagnosisRule(
        kind="device_mismatch",
        hint=DEVICE_MISMATCH_HINT,
        pattern=(
            r"Expected all tensors to be on the same device"
            r"|Input type \((?=[^)]*cuda)[\w.]+\) and weight type \((?![^)]*cuda)[\w.]+\)"
            r"|Input type \((?![^)]*cuda)[\w.]+\) and weight type \((?=[^)]*cuda)[\w.]+\)"
            r"|Expected object of device type \w+ but got device type"
            r"|Expected tensor for argument #\d+ '\w+' to have the same device"
            r"|indices should be either on cpu or on the same device"
            r"|is on CPU, but expected (?:it )?to be on GPU"
        ),
    ),
    DiagnosisRule(
        kind="no_cuda_device",
        hint=NO_CUDA_DEVICE_HINT,
        pattern=(
            r"No CUDA GPUs are available|no CUDA-capable device is detected"
            r"|Found no NVIDIA driver|CUDA is not available|Torch not compiled with CUDA enabled"
            r"|CUDA_ERROR_NO_DEVICE|cudaErrorNoDevice"
            r"|couldn't communicate with the NVIDIA driver"
        ),
    ),
    DiagnosisRule(
        kind="libuv",
        hint=LIBUV_HINT,
        pattern=r"use_libuv was requested but PyTorch was buil[dt] without libuv",
    ),
    DiagnosisRule(
        kind="address_in_use",
        hint=ADDRESS_IN_USE_HINT,
        pattern=(
            r"Address already in use|EADDRINUSE|errno: 98\b|\[Errno 98\]"
            r"|server socket has failed to listen on any local network address"
        ),
    ),
    DiagnosisRule(
        kind="wandb_login",
        hint=WANDB_HINT,
        pattern=(
            r"api_key not configured|You must call wandb\.login|wandb: ERROR .*not logged in"
            r"|wandb: ERROR [^\n]*(?:\b401\b|Invalid API key|invalid api key)"
            r"|wandb\.errors\.(?:errors\.)?AuthenticationError"
            r"|wandb\.errors\.[\w.]*Error: .*(?:api[_ ]key|wandb login)"
        ),
    ),
    DiagnosisRule(
        kind="hub_auth",
        hint=HUB_AUTH_HINT,
        pattern=(
            r"Cannot access gated repo|GatedRepoError|401 Client Error|403 Client Error"
            r"|Repository Not Found for url|RepositoryNotFoundError"
            r"|is not a valid model identifier listed on 'https://huggingface\.co/models'"
            r"|Invalid user token|You are trying to access a gated repo"
        ),
    ),
    DiagnosisRule(
        kind="network",
        hint=NETWORK_HINT,
        pattern=(
            r"couldn't connect to '?https?://|LocalEntryNotFoundError|HTTPS?ConnectionPool\("
            r"|Max retries exceeded with url|Failed to establish a new connection"
            r"|\[Errno 101\] Network is unreachable|Temporary failure in name resolution"
            r"|Name or service not known|Could not resolve host|offline mode is enabled"
            r"|ConnectTimeoutError|ReadTimeoutError|ProxyError|CERTIFICATE_VERIFY_FAILED"
            r"|getaddrinfo failed|<urlopen error|\bConnectTimeout\b|\bReadTimeout\b"
            r"|Network error \(\w+\), entering retry loop|Run initialization has timed out"
            r"|Connection to [\w.-]+ timed out"
        ),
    ),
    DiagnosisRule(
        kind="nan_loss",
        hint=NAN_HINT,
        pattern=(
            r"Loss became infinite or NaN|returned nan values in its \d+\w* output"
            r"|\bloss is (?:nan|inf|infinite)\b|\bloss became (?:nan|inf|infinite)\b"
            r"|non-finite loss|Current loss scale already at minimum"
            r"|The loss returned in `training_step` is (?:nan|inf)|NaN or Inf found in input tensor"
        ),
    ),
    DiagnosisRule(
        kind="too_many_open_files",
        hint=TOO_MANY_FILES_HINT,
        pattern=(
            r"Too many open files|Too many files open|\[Errno 24\]|\bEMFILE\b"
            r"|received 0 items of ancdata"
        ),
    ),
    DiagnosisRule(
        kind="shm_full",
        hint=SHM_HINT,
        pattern=(
            r"insufficient shared memory|out of shared memory|unable to write to file </torch_"
            r"|unable to open shared memory object|killed by signal: Bus error|^Bus error\b"
            r"|unable to mmap \d+ bytes from file </torch_"
            r"|\bBus error \(core dumped\)|" + _died_by(7, "SIGBUS")
        ),
    ),
    DiagnosisRule(
        kind="disk_quota",
        hint=QUOTA_HINT,
        pattern=r"Disk quota exceeded|\bEDQUOT\b|\[Errno 122\]|quota exceeded",
    ),
    DiagnosisRule(
        kind="no_space",
        hint=NO_SPACE_HINT,
        pattern=(
            r"No space left on device|\bENOSPC\b|\[Errno 28\]|StorageFull|Not enough disk space"
            r"|PytorchStreamWriter failed writing file|write\(\): fd \d+ failed with"
            r"|inline_container\.cc:\d+\] \. unexpected pos \d+ vs \d+"
            r"|There is not enough space on the disk"
        ),
    ),
    DiagnosisRule(
        kind="host_oom",
        hint=HOST_OOM_HINT,
        pattern=(
            r"killed by signal: Killed|" + _died_by(9, "SIGKILL") + r"|exit code 137\b"
            r"|^(?:[\w./-]+: )?(?:line \d+: )?\s*\d+ Killed\b|^Killed\s*$"
            r"|\b_?(?:Array)?MemoryError\b"
            r"|DefaultCPUAllocator: (?:not enough memory|can't allocate memory)"
            r"|Out of memory: Kill(?:ed)? process|invoked oom-killer|Memory cgroup out of memory"
            r"|\boom-kill(?:er)?\b|OOMKilled|\[Errno 12\] Cannot allocate|oom_kill event"
            r"|OOM Killed|Exceeded (?:job|step) memory limit"
        ),
    ),
    DiagnosisRule(
        kind="segfault",
        hint=SEGFAULT_HINT,
        pattern=r"Segmentation fault|\bSIGSEGV\b|exit code 139\b|" + _died_by(11, "SIGSEGV"),
    ),
    # The line the job's shell writes when its `setup` fails (sched/jobsetup.py): a cause
    # before every error its setup printed ("conda: command not found").
    DiagnosisRule(kind="setup_failed", hint=SETUP_FAILED_HINT, pattern=r"^gtui: setup failed\b"),
)

CONSEQUENTIAL: tuple[DiagnosisRule, ...] = (
    DiagnosisRule(
        kind="nccl_timeout",
        hint=NCCL_TIMEOUT_HINT,
        pattern=(
            r"Watchdog caught collective operation timeout|collective operation timeout"
            r"|watchdog got stuck for \d+ seconds|Heartbeat monitor timed out"
            r"|watchdog thread terminated with exception: \[Rank \d+\] Watchdog"
            r"|Timed out after \d+ seconds waiting for clients|RendezvousTimeoutError"
            r"|client socket has timed out after \d+"
            r"|NCCL communicator was aborted[^\n]*timeout"
        ),
    ),
    DiagnosisRule(
        kind="nccl",
        hint=NCCL_HINT,
        pattern=(
            r"NCCL error|ncclUnhandledCudaError|ncclSystemError|ncclInternalError"
            r"|ncclInvalidUsage|ncclInvalidArgument|ncclRemoteError"
            r"|NCCL communicator was aborted|ncclCommInitRank failed"
            r"|NCCL WARN [^\n]*(?:Duplicate GPU|failure|failed|[Ee]rror)"
            r"|watchdog thread terminated with exception: (?!\[Rank \d+\] Watchdog)"
            r"|DistNetworkError|client socket has failed to connect to"
        ),
    ),
    DiagnosisRule(
        kind="cuda_error",
        hint=CUDA_ERROR_HINT,
        pattern=(
            r"CUDA error|cuda runtime error|illegal memory access|unspecified launch failure"
            r"|misaligned address|\bCUDA_ERROR_[A-Z_]+|\bcudaError[A-Z]\w+"
        ),
    ),
    DiagnosisRule(
        kind="import_error",
        hint=IMPORT_HINT,
        pattern=(
            r"\bImportError\b|\bModuleNotFoundError\b|No module named"
            r"|error while loading shared libraries"
        ),
    ),
    DiagnosisRule(
        kind="file_not_found",
        hint=FILE_NOT_FOUND_HINT,
        pattern=r"\bFileNotFoundError\b|No such file or directory|\bENOENT\b",
    ),
    DiagnosisRule(
        kind="permission_denied",
        hint=PERMISSION_HINT,
        pattern=r"Permission denied|\bPermissionError\b|\bEACCES\b",
    ),
    DiagnosisRule(
        kind="command_not_found",
        hint=COMMAND_NOT_FOUND_HINT,
        pattern=r"command not found|^(?:/bin/)?sh: \d+: .*: not found",
    ),
)

ABORT_TEXT = DiagnosisRule(
    kind="abort",
    hint=ABORT_HINT,
    pattern=(
        r"terminate called (?:after throwing|without an active exception)|killed by signal: Abort"
        r"|Aborted \(core dumped\)|^Aborted\b|Fatal Python error: Aborted|\bSIGABRT\b|"
        + _died_by(6, "SIGABRT")
    ),
)
ABORT_STATUS = DiagnosisRule(
    kind="abort",
    hint=ABORT_HINT,
    exit_codes=(128 + int(_signal.SIGABRT),),
    signals=(int(_signal.SIGABRT),),
)

STATUS_ONLY: tuple[DiagnosisRule, ...] = (
    DiagnosisRule(kind="command_not_found", hint=COMMAND_NOT_FOUND_HINT, exit_codes=(127,)),
    DiagnosisRule(kind="permission_denied", hint=PERMISSION_HINT, exit_codes=(126,)),
)

RUNTIME_ERROR = DiagnosisRule(
    kind="runtime_error",
    hint=RUNTIME_ERROR_HINT,
    pattern=r"\bRuntimeError\b|\bruntime error\b",
)
PYTHON_EXCEPTION = DiagnosisRule(
    kind="python_exception",
    hint=PYTHON_EXCEPTION_HINT,
    pattern=r"^\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): ",
)

DEFAULT_RULES: tuple[DiagnosisRule, ...] = (
    HARDWARE
    + SIGNAL_DEATHS
    + ROOT
    + CONSEQUENTIAL
    + (ABORT_TEXT, ABORT_STATUS)
    + STATUS_ONLY
    + (RUNTIME_ERROR, PYTHON_EXCEPTION)
)
"""gtui's own table, in precedence order (see ``diagnose``'s docstring for how it is applied)."""

HINTS: dict[str, str] = {}
for _rule in DEFAULT_RULES:
    HINTS.setdefault(_rule.kind, _rule.hint)
HINTS["host_oom"] = HOST_OOM_HINT
"""Each kind's base hint (docs/diagnosis.md lists them)."""
