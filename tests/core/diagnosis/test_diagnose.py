"""Failure diagnosis (the kinds of docs/diagnosis.md) on real error output.

What can be produced here is produced for real: each such test runs a real process through
`bash -c` with its output in a log file (as the runner does), the log starting with real
progress-bar noise (rich, with its \\r redraws and ANSI codes), then reads the log back with
read_log_tail and diagnoses the real exit status. What needs a GPU, NCCL, JAX or wandb comes
from tests/error_logs/, error output copied verbatim from the GitHub issues its headers cite.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gtui.core import joblog
from gtui.core.diagnosis import diagnose as diagnose_module
from gtui.core.diagnosis.diagnose import (
    DEFAULT_RULES,
    LINE_MAX,
    TAIL_BYTES,
    GpuRef,
    clean_line,
    clean_log,
    diagnose,
    gpu_fault_device,
    oom_peak_mib,
    oom_retry_mem,
    read_log_tail,
    read_tail_bytes,
    status_text,
    validate_rule,
)
from gtui.core.model import Diagnosis, DiagnosisRule
from tests.conftest import TESTS

CORPUS = TESTS / "error_logs"

# --------------------------------------------------------------------------------------------
# Real jobs.

NOISE = '''
"""Training-loop noise as a real job writes it to its log: rich progress bars and colours."""
import sys
from rich.console import Console
from rich.progress import Progress

console = Console(file=sys.stdout, force_terminal=True, width=100, color_system="standard")


def epochs(n=2, steps=4):
    for e in range(n):
        console.print(f"[cyan]epoch {e}[/] | loss [yellow]{0.9 - 0.1 * e:.4f}[/] | acc 0.8{e}")
        with Progress(console=console, auto_refresh=False) as bar:
            task = bar.add_task(f"epoch {e}", total=steps)
            for _ in range(steps):
                bar.advance(task)
                bar.refresh()
'''


@dataclass
class Job:
    exit_code: int | None
    signal: int | None
    tail: str
    log: Path


def _status(returncode: int) -> tuple[int | None, int | None]:
    return (None, -returncode) if returncode < 0 else (returncode, None)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "noise.py").write_text(NOISE)
    return tmp_path


def _env(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"  # as gtui runs jobs
    env["PYTHONPATH"] = str(workdir)
    return env


def _popen(workdir: Path, cmd: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(
            ["bash", "-c", cmd],
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=_env(workdir),
        )


def run_job(workdir: Path, cmd: str, name: str = "job") -> Job:
    """Run ``bash -c cmd`` to completion, output to ``name.1.log``; read the log's tail back."""
    log = workdir / f"{name}.1.log"
    proc = _popen(workdir, cmd, log)
    proc.wait(timeout=60)
    exit_code, sig = _status(proc.returncode)
    return Job(exit_code, sig, read_log_tail(log), log)


def run_python(workdir: Path, body: str, name: str = "train") -> Job:
    """A Python training script: noise first, then ``body`` (dedented)."""
    script = workdir / f"{name}.py"
    script.write_text("import noise\nnoise.epochs()\n" + textwrap.dedent(body))
    return run_job(workdir, f"{sys.executable} {script.name}", name)


def kill_when_logged(
    workdir: Path, body: str, sig: int, marker: str = "ready", name: str = "train"
) -> Job:
    """Start a script, wait until its log shows ``marker``, send ``sig`` to its process group."""
    script = workdir / f"{name}.py"
    script.write_text("import noise\nnoise.epochs()\n" + textwrap.dedent(body))
    log = workdir / f"{name}.1.log"
    proc = _popen(workdir, f"{sys.executable} {script.name}", log)
    deadline = time.monotonic() + 30
    while marker not in log.read_text(errors="replace"):
        assert proc.poll() is None, log.read_text(errors="replace")
        assert time.monotonic() < deadline, "the job never got ready"
        time.sleep(0.02)
    os.killpg(proc.pid, sig)
    proc.wait(timeout=30)
    exit_code, status_sig = _status(proc.returncode)
    return Job(exit_code, status_sig, read_log_tail(log), log)


def diag(job: Job, **kw: Any) -> Diagnosis:
    d = diagnose(job.exit_code, job.signal, job.tail, **kw)
    assert d is not None, job
    return d


# --------------------------------------------------------------------------------------------
# The corpus.


@dataclass
class Sample:
    name: str
    meta: dict[str, str]
    body: str

    @property
    def exit_code(self) -> int | None:
        return int(self.meta["exit"]) if "exit" in self.meta else None

    @property
    def signal(self) -> int | None:
        return int(self.meta["signal"]) if "signal" in self.meta else None

    def diagnose(self, **kw: Any) -> Diagnosis:
        d = diagnose(self.exit_code, self.signal, self.body, **kw)
        assert d is not None
        return d


def load(name: str) -> Sample:
    raw = (CORPUS / name).read_bytes().decode("utf-8")
    head, body = raw.split("# ---\n", 1)
    meta = {}
    for line in head.splitlines():
        key, sep, value = line[2:].partition(": ")
        if sep:
            meta[key] = value
    assert {"source", "expect", "line"} <= meta.keys(), name
    return Sample(name, meta, body)


CORPUS_FILES = sorted(p.name for p in CORPUS.glob("*.log"))


def test_corpus_is_there() -> None:
    kinds = {load(n).meta["expect"] for n in CORPUS_FILES}
    assert {
        "cuda_oom",
        "device_assert",
        "cudnn_error",
        "invalid_device_ordinal",
        "no_cuda_device",
        "nccl",
        "nccl_timeout",
        "libuv",
        "wandb_login",
        "address_in_use",
        "host_oom",
        "no_space",
    } <= kinds


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_kind_and_line(name: str) -> None:
    sample = load(name)
    d = sample.diagnose()
    assert d.kind == sample.meta["expect"], (d, name)
    assert sample.meta["line"] in d.line, (d.line, name)
    assert "\r" not in d.line and "\x1b" not in d.line
    assert len(d.line) <= LINE_MAX + 1
    assert d.hint


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_through_a_real_file(tmp_path: Path, name: str) -> None:
    """The same logs written to disk and read back as the engine does."""
    sample = load(name)
    log = tmp_path / "job.1.log"
    log.write_bytes(sample.body.encode("utf-8"))
    d = diagnose(sample.exit_code, sample.signal, read_log_tail(log))
    assert d is not None and d.kind == sample.meta["expect"]


# --------------------------------------------------------------------------------------------
# One test per kind.


def test_success_is_no_diagnosis(workdir: Path) -> None:
    job = run_python(workdir, "print('done')\n")
    assert (job.exit_code, job.signal) == (0, None)
    assert diagnose(job.exit_code, job.signal, job.tail) is None


def test_cuda_oom_hint_carries_the_numbers() -> None:
    d = load("cuda_oom_torch21_capacty.log").diagnose()
    assert d.kind == "cuda_oom"
    assert "10.1G more" in d.hint and "20.3G" in d.hint and "22.2G" in d.hint
    assert "expandable_segments" in d.hint  # 10.61 GiB reserved but unallocated
    assert "batch size" in d.hint and "`mem`" in d.hint
    # the PyTorch advice at the end of the message is cut, the numbers are kept
    assert "If reserved" not in d.line and "is reserved by PyTorch but unallocated" in d.line


def test_cuda_oom_seed_example_is_joined_and_parsed() -> None:
    d = load("seed000_oom_example.log").diagnose()
    assert d.kind == "cuda_oom"
    assert d.line.endswith("70.00 GiB reserved in total by PyTorch)")
    assert oom_peak_mib(d.line) == 72 * 1024  # 70 GiB reserved + 2 GiB asked


def test_cuda_oom_in_cuda_error_form_is_not_cuda_error() -> None:
    d = load("cuda_oom_cuda_error_form.log").diagnose()
    assert d.kind == "cuda_oom"


def test_jax_oom_hint_mentions_preallocation() -> None:
    d = load("jax_resource_exhausted.log").diagnose()
    assert d.kind == "cuda_oom" and "XLA_PYTHON_CLIENT_PREALLOCATE" in d.hint


def test_device_side_assert_is_its_own_kind() -> None:
    """No longer lumped into cuda_error (which said only "rerun with ...")."""
    d = load("cuda_device_side_assert.log").diagnose()
    assert d.kind == "device_assert"
    assert "index out of range" in d.hint and "CUDA_LAUNCH_BLOCKING=1" in d.hint


def test_cudnn_error_points_at_memory() -> None:
    """cuDNN failures are their own kind, no longer cuda_error."""
    d = load("cudnn_not_initialized.log").diagnose()
    assert d.kind == "cudnn_error" and "nearly full" in d.hint


def test_invalid_device_ordinal_explains_isolation() -> None:
    d = load("invalid_device_ordinal.log").diagnose()
    assert d.kind == "invalid_device_ordinal"
    assert "cuda:0" in d.hint and "{gpu}" in d.hint and "isolate" in d.hint


def test_checkpoint_from_another_gpu_is_an_ordinal_problem() -> None:
    d = load("torch_load_cuda_device.log").diagnose()
    assert d.kind == "invalid_device_ordinal"
    assert "map_location='cuda:0'" in d.hint and "cuda:1" in d.hint


def test_no_cuda_device() -> None:
    d = load("no_cuda_gpus.log").diagnose()
    assert d.kind == "no_cuda_device" and "gpus = 1" in d.hint


@pytest.mark.parametrize(
    "name",
    ["nccl_internal_error.log", "nccl_unhandled_cuda_error.log", "nccl_with_info_chatter.log"],
)
def test_nccl_errors(name: str) -> None:
    d = load(name).diagnose()
    assert d.kind == "nccl" and "NCCL_DEBUG=INFO" in d.hint


def test_nccl_watchdog_timeout_after_a_progress_bar() -> None:
    """The C++ watchdog line is glued to a \\r-redrawn progress bar: the line shows the match."""
    sample = load("nccl_watchdog_after_progress.log")
    d = sample.diagnose()
    assert d.kind == "nccl_timeout" and "init_process_group(timeout=" in d.hint
    assert d.line.startswith("[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog")


def test_libuv() -> None:
    d = load("libuv_torchrun.log").diagnose()
    assert d.kind == "libuv" and 'USE_LIBUV = "0"' in d.hint


@pytest.mark.parametrize("name", ["wandb_api_key.log", "wandb_error_line_transformers.log"])
def test_wandb_login(name: str) -> None:
    d = load(name).diagnose()
    assert d.kind == "wandb_login" and "WANDB_MODE" in d.hint


def test_address_in_use_torch_distributed_names_the_port() -> None:
    d = load("torch_dist_address_in_use.log").diagnose()
    assert d.kind == "address_in_use"
    assert "Port 44796 is taken" in d.hint and "{port}" in d.hint


def test_address_in_use_real_bind(workdir: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        job = run_python(
            workdir,
            f"""
            import socket
            s = socket.socket()
            s.bind(("127.0.0.1", {port}))
            """,
        )
    finally:
        holder.close()
    d = diag(job)
    assert job.exit_code == 1
    assert d.kind == "address_in_use"
    assert d.line == "OSError: [Errno 98] Address already in use"


def test_import_error_module_not_found(workdir: Path) -> None:
    job = run_python(workdir, "import flash_attn_gtui_missing\n")
    d = diag(job)
    assert d.kind == "import_error"
    assert d.line == "ModuleNotFoundError: No module named 'flash_attn_gtui_missing'"
    assert "`flash_attn_gtui_missing` is not installed" in d.hint
    assert "activate" in d.hint


def test_import_error_cannot_import_name(workdir: Path) -> None:
    job = run_python(workdir, "from os import gtui_no_such_name\n")
    d = diag(job)
    assert d.kind == "import_error"
    assert d.line.startswith("ImportError: cannot import name 'gtui_no_such_name'")
    assert "no `gtui_no_such_name`" in d.hint


def test_file_not_found_python(workdir: Path) -> None:
    job = run_python(workdir, "open('data/train.jsonl')\n")
    d = diag(job)
    assert d.kind == "file_not_found"
    assert d.line.startswith("FileNotFoundError: [Errno 2] No such file or directory")
    assert "`data/train.jsonl` is missing" in d.hint and "`cwd`" in d.hint


def test_file_not_found_missing_script(workdir: Path) -> None:
    job = run_job(workdir, "python3 noise.py; ./scripts/run_pipeline.sh aircraft")
    d = diag(job)
    assert job.exit_code == 127
    assert d.kind == "file_not_found"
    assert "./scripts/run_pipeline.sh: No such file or directory" in d.line


def test_command_not_found(workdir: Path) -> None:
    job = run_job(
        workdir, f"{sys.executable} -c 'import noise; noise.epochs()'; gtui_no_such_cmd --lr 0.1"
    )
    d = diag(job)
    assert job.exit_code == 127
    assert d.kind == "command_not_found"
    assert d.line.endswith("gtui_no_such_cmd: command not found")
    assert "`gtui_no_such_cmd` was not found" in d.hint and "~/.bashrc" in d.hint


def test_command_not_found_by_exit_code_alone() -> None:
    d = diagnose(127, None, "")
    assert d is not None and d.kind == "command_not_found" and d.line == ""


def test_permission_denied(workdir: Path) -> None:
    script = workdir / "train.sh"
    script.write_text("#!/bin/bash\necho training\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    job = run_job(workdir, "./train.sh --epochs 3")
    d = diag(job)
    assert job.exit_code == 126
    assert d.kind == "permission_denied"
    assert d.line.endswith("./train.sh: Permission denied")
    assert "chmod +x" in d.hint


def test_permission_denied_by_exit_code_alone() -> None:
    d = diagnose(126, None, "")
    assert d is not None and d.kind == "permission_denied"


def test_segfault_signal(workdir: Path) -> None:
    job = run_job(
        workdir,
        f"ulimit -c 0; exec {sys.executable} -X faulthandler -c "
        "'import noise, ctypes; noise.epochs(); ctypes.string_at(0)'",
    )
    d = diag(job)
    assert job.signal == signal.SIGSEGV
    assert d.kind == "segfault"
    assert d.line == "Fatal Python error: Segmentation fault"


def test_segfault_through_bash_is_exit_139(workdir: Path) -> None:
    job = run_job(
        workdir,
        f"ulimit -c 0; {sys.executable} -c 'import noise, ctypes; noise.epochs(); "
        "ctypes.string_at(0)'; rc=$?; echo cleaning up; exit $rc",
    )
    d = diag(job)
    assert (job.exit_code, job.signal) == (139, None)
    assert d.kind == "segfault" and "Segmentation fault" in d.line


def test_runtime_error(workdir: Path) -> None:
    job = run_python(workdir, "d = {1: 1, 2: 2}\nfor k in d:\n    d.pop(k)\n")
    d = diag(job)
    assert d.kind == "runtime_error"
    assert d.line == "RuntimeError: dictionary changed size during iteration"


def test_no_space_left(workdir: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    job = run_python(workdir, "with open('/dev/full', 'wb') as f:\n    f.write(b'ckpt' * 4096)\n")
    d = diag(job)
    assert d.kind == "no_space"
    assert d.line == "OSError: [Errno 28] No space left on device"
    assert "df -h" in d.hint


def test_no_space_from_torch_save() -> None:
    d = load("torch_save_no_space.log").diagnose()
    assert d.kind == "no_space"


def test_host_oom_sigkill(workdir: Path) -> None:
    """SIGKILL from outside with nothing in the log: the kernel's OOM killer does exactly this."""
    job = kill_when_logged(workdir, "print('ready', flush=True)\nimport time\ntime.sleep(60)\n", 9)
    d = diag(job)
    assert job.signal == signal.SIGKILL
    assert d.kind == "host_oom"
    assert d.line == "ready"  # where it was when it died
    assert "dmesg" in d.hint


def test_host_oom_through_bash_is_exit_137(workdir: Path) -> None:
    """A wrapper script that keeps the status: bash reports the kill as "Killed" and 137."""
    job = run_job(
        workdir,
        f"{sys.executable} -c 'import noise, os; noise.epochs(); os.kill(os.getpid(), 9)'; "
        "rc=$?; echo cleaning up; exit $rc",
    )
    d = diag(job)
    assert (job.exit_code, job.signal) == (137, None)
    assert d.kind == "host_oom"
    assert re.search(r"\d+ Killed", d.line), d.line


def test_host_oom_text_beats_the_generic_runtime_error() -> None:
    d = load("dataloader_worker_killed.log").diagnose()
    assert d.kind == "host_oom"  # its line is a RuntimeError, but it says who died and how


def test_host_oom_text_from_torchrun_exit_1() -> None:
    sample = load("torchrun_child_sigkill.log")
    assert sample.exit_code == 1
    assert sample.diagnose().kind == "host_oom"


def test_timeout(workdir: Path) -> None:
    job = kill_when_logged(
        workdir,
        "print('step 1200 | loss 0.31', flush=True)\nimport time\ntime.sleep(60)\n",
        signal.SIGTERM,
        marker="step 1200",
    )
    assert job.signal == signal.SIGTERM
    d = diag(job, timed_out=True)
    assert d.kind == "timeout"
    assert d.line == "step 1200 | loss 0.31"
    assert "`timeout`" in d.hint


def test_timeout_mentions_what_the_log_shows() -> None:
    sample = load("nccl_watchdog_timeout.log")
    d = diagnose(None, signal.SIGKILL, sample.body, timed_out=True)
    assert d is not None and d.kind == "timeout"
    assert "Watchdog caught collective operation timeout" in d.line
    assert "nccl" in d.hint


def test_killed_by_user(workdir: Path) -> None:
    job = kill_when_logged(workdir, "print('ready', flush=True)\nimport time\ntime.sleep(60)\n", 15)
    d = diag(job, killed_by_user=True)
    assert d.kind == "killed_by_user" and d.line == "ready" and "retry" in d.hint
    # even a job that exits 0 on SIGTERM was killed by the user
    d0 = diagnose(0, None, job.tail, killed_by_user=True)
    assert d0 is not None and d0.kind == "killed_by_user"


def test_killed_by_someone_else(workdir: Path) -> None:
    job = kill_when_logged(workdir, "print('ready', flush=True)\nimport time\ntime.sleep(60)\n", 15)
    d = diag(job)
    assert d.kind == "error"
    assert "SIGTERM" in d.hint and "outside gtui" in d.hint


def test_a_python_exception_names_itself_and_the_line_that_raised_it(workdir: Path) -> None:
    """A plain Python exception is ``python_exception`` (it was ``error``, "no known
    cause"), and its hint names the exception and where the job's own code raised it."""
    job = run_python(workdir, "import json\njson.loads('{bad')\n")
    d = diag(job)
    assert d.kind == "python_exception"
    assert d.line.startswith("json.decoder.JSONDecodeError: Expecting property name")
    assert "`JSONDecodeError` raised in json/decoder.py" in d.hint
    assert "called from your" in d.hint and "/train.py:4 (<module>)" in d.hint
    assert "retry will fail the same way" in d.hint


def test_error_falls_back_to_the_last_line(workdir: Path) -> None:
    job = run_job(workdir, f"{sys.executable} noise.py; echo 'eval: 3 of 5 splits missing'; exit 3")
    d = diag(job)
    assert d.kind == "error" and d.line == "eval: 3 of 5 splits missing"
    assert "exit code 3" in d.hint


def test_error_with_an_empty_log() -> None:
    d = diagnose(2, None, "")
    assert d is not None and d.kind == "error" and d.line == "" and "empty" in d.hint


# --------------------------------------------------------------------------------------------
# Precedence.


def test_same_line_goes_to_the_more_specific_rule() -> None:
    """ "RuntimeError: CUDA out of memory" is cuda_oom, "RuntimeError: CUDA error: invalid
    device ordinal" is invalid_device_ordinal: specific before cuda_error before runtime_error."""
    assert load("cuda_oom_legacy_cached.log").diagnose().kind == "cuda_oom"
    assert load("invalid_device_ordinal.log").diagnose().kind == "invalid_device_ordinal"


def test_cuda_kernel_boilerplate_is_not_a_cuda_error() -> None:
    """The three lines PyTorch prints after any CUDA error mention "device-side assertions"."""
    body = load("invalid_device_ordinal.log").body
    after = body[body.index("CUDA kernel errors might") :]
    d = diagnose(1, None, after)
    assert d is not None and d.kind == "error"


def test_the_last_error_wins_over_an_earlier_caught_one(workdir: Path) -> None:
    job = run_python(
        workdir,
        """
        import traceback, noise
        try:
            open("configs/local_overrides.yaml")
        except FileNotFoundError:
            traceback.print_exc()
            print("no local overrides, using defaults")
        noise.epochs()
        import flash_attn_gtui_missing
        """,
    )
    assert job.tail.count("Traceback (most recent call last):") == 2
    assert diag(job).kind == "import_error"

    job = run_python(
        workdir,
        """
        import traceback, noise
        try:
            import apex_gtui_missing
        except ImportError:
            traceback.print_exc()
            print("apex not found, using torch.amp")
        noise.epochs()
        open("checkpoints/last.pt")
        """,
        name="train2",
    )
    d = diag(job)
    assert d.kind == "file_not_found" and "checkpoints/last.pt" in d.line


def test_a_root_cause_beats_the_cascade_after_it() -> None:
    """An OOM on one rank, then the NCCL watchdog of the others: the OOM is the cause."""
    oom = load("cuda_oom_torch21_capacty.log").body
    nccl = load("nccl_watchdog_timeout.log").body
    d = diagnose(None, signal.SIGABRT, oom + "\n" + nccl)
    assert d is not None and d.kind == "cuda_oom"


def test_a_signal_death_beats_earlier_printed_errors(workdir: Path) -> None:
    body = """
        import os, traceback, noise
        try:
            import apex_gtui_missing
        except ImportError:
            traceback.print_exc()
        noise.epochs()
        print("epoch 3 | step 200", flush=True)
        os.kill(os.getpid(), {sig})
        """
    job = run_python(workdir, body.format(sig=9))
    d = diag(job)
    assert job.signal == signal.SIGKILL
    assert d.kind == "host_oom" and d.line == "epoch 3 | step 200"
    job = run_python(workdir, body.format(sig=11), name="train2")
    assert job.signal == signal.SIGSEGV
    assert diag(job).kind == "segfault"


def test_nccl_info_chatter_is_not_a_missing_file(workdir: Path) -> None:
    """NCCL_DEBUG=INFO prints "No such file or directory" about a plugin in healthy runs."""
    chatter = [
        line for line in load("nccl_with_info_chatter.log").body.splitlines() if "NCCL INFO" in line
    ]
    assert any("No such file or directory" in line for line in chatter)
    job = run_python(workdir, "cfg = {}\nprint(cfg['lr'])\n")
    d = diagnose(job.exit_code, job.signal, "\n".join(chatter) + "\n" + job.tail)
    assert d is not None and d.kind == "python_exception" and d.line == "KeyError: 'lr'"


# --------------------------------------------------------------------------------------------
# Reading a log as jobs print it: warnings, wrapped lines, ranks, signals.

DIAG_CORPUS = TESTS / "diagnosis_corpus"


def corpus_log(name: str) -> str:
    return (DIAG_CORPUS / f"{name}.log").read_text()


def test_a_warning_that_mentions_out_of_memory_is_not_an_oom(workdir: Path) -> None:
    """A library's warning about memory, then the job's real error: the real error wins."""
    job = run_python(
        workdir,
        """
        import warnings
        warnings.warn("CUDA out of memory while autotuning; falling back to the default kernel")
        config = {"model": "vit"}
        print(config["optimizer"])
        """,
    )
    assert "UserWarning: CUDA out of memory" in job.tail
    d = diag(job)
    assert d.kind == "python_exception" and d.line == "KeyError: 'optimizer'"


def test_a_message_wrapped_at_80_columns_is_matched_across_its_lines() -> None:
    # https://github.com/deepspeedai/DeepSpeed/issues/3916, as the thread shows it
    d = diagnose(1, None, corpus_log("address_in_use/03_deepspeed_wrapped80"))
    assert d is not None and d.kind == "address_in_use" and "Port 29600 is taken" in d.hint


def test_a_message_cut_mid_word_at_120_columns() -> None:
    """VLM-R1's log breaks "ProcessGroupNCCL's" across lines at the terminal's width."""
    log = corpus_log("nccl_timeout/09_vlmr1_wrapped_120")
    assert "ProcessGroupNCCL'\ns watchdog" in log
    d = diagnose(None, signal.SIGABRT, log)
    assert d is not None and d.kind == "nccl_timeout" and "watchdog itself hung" in d.hint


def test_a_message_split_by_another_ranks_output() -> None:
    """Rank 0's OOM message, word-wrapped after a long logging prefix, with rank 1's lines
    between its two parts: neither part says "CUDA out of memory" alone."""
    lines = [
        '[rank1]:   File "/opt/train.py", line 88, in step',
        "[rank0]: [2024-03-05 07:01:51,208] [ERROR] [engine.py:1821:step] RuntimeError: CUDA out of",
        "[rank1]:     loss = model(batch).loss",
        "[rank1]: step 212 | loss 1.9312 | lr 2.0e-05",
        "[rank0]: memory. Tried to allocate 2.87 GiB (GPU 0; 14.76 GiB total capacity; 8.77 GiB "
        "already allocated; 19.75 MiB free; 13.71 GiB reserved in total by PyTorch)",
    ]
    assert not any("out of memory" in line for line in lines)
    d = diagnose(1, None, "\n".join(lines))
    assert d is not None and d.kind == "cuda_oom", d
    assert "2.9G more" in d.hint and "CUDA out of memory" in d.line


def test_the_prefilter_never_changes_a_diagnosis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keyword test before each regex is only a shortcut: without it, the same result."""
    logs = sorted(DIAG_CORPUS.glob("*/*.log"))[::3]
    fast = [diagnose(1, None, p.read_text()) for p in logs]
    monkeypatch.setattr(diagnose_module, "_keywords", lambda pattern: None)
    slow = [diagnose(1, None, p.read_text()) for p in logs]
    assert fast == slow


def test_a_64k_tail_of_interleaved_ranks_is_diagnosed_quickly() -> None:
    noise = "\n".join(
        f"[rank{i % 8}]:epoch 3 step {i} | loss 0.{i:04d} | lr 3e-4 | grad_norm 1.23 | "
        "tokens/s 12345 | mem 45.2G of 80G"
        for i in range(700)
    )
    tail = (noise + "\n" + corpus_log("nccl_timeout/09_vlmr1_wrapped_120"))[-TAIL_BYTES:]
    t0 = time.perf_counter()
    d = diagnose(None, signal.SIGABRT, tail)
    took = time.perf_counter() - t0
    assert d is not None and d.kind == "nccl_timeout"
    assert took < 2.0, took  # about 50 ms here; the old table took about as long


def test_sigabrt_is_the_job_aborting_itself_not_a_kill_from_outside() -> None:
    d = diagnose(None, signal.SIGABRT, "epoch 3 | step 200\n")
    assert d is not None and d.kind == "abort"
    assert "not killed from outside" in d.hint and "outside gtui (" not in d.hint
    d = diagnose(134, None, "terminate called after throwing an instance of 'c10::Error'\n")
    assert d is not None and d.kind == "abort"
    assert d.line.startswith("terminate called after throwing")


def test_an_abort_after_a_known_cause_is_that_cause() -> None:
    """The NCCL watchdog takes the process down with SIGABRT: the timeout is the cause."""
    d = diagnose(None, signal.SIGABRT, corpus_log("nccl_timeout/05_sglang_terminate_distbackend"))
    assert d is not None and d.kind == "nccl_timeout"


def test_sigkill_with_the_oom_killer_in_the_log_is_host_oom() -> None:
    log = "loading shards 3/7\n[Sa Feb  3 00:21:41 2018] Out of memory: Kill process 136340 (python)\n"
    d = diagnose(None, signal.SIGKILL, log)
    assert d is not None and d.kind == "host_oom" and "Out of memory: Kill process" in d.line


def test_sigkill_by_gtui_says_so() -> None:
    d = diagnose(None, signal.SIGKILL, "step 9\n", timed_out=True)
    assert d is not None and d.kind == "timeout"
    d = diagnose(None, signal.SIGKILL, "step 9\n", killed_by_user=True)
    assert d is not None and d.kind == "killed_by_user"


def test_sigbus_is_shared_memory() -> None:
    d = diagnose(None, signal.SIGBUS, "epoch 1 | step 40\n")
    assert d is not None and d.kind == "shm_full" and "/dev/shm" in d.hint


def test_a_child_killed_by_a_signal_as_launchers_report_it() -> None:
    cases = {
        "... exits with return code = -9": "host_oom",
        "subprocess.CalledProcessError: Command '['python', 'x.py']' died with <Signals.SIGKILL: 9>.": "host_oom",
        "... exits with return code = -11": "segfault",
        "  exitcode  : -7 (pid: 3311)": "shm_full",
        "  exitcode  : -6 (pid: 3311)": "abort",
    }
    for text, kind in cases.items():
        d = diagnose(1, None, text + "\n")
        assert d is not None and d.kind == kind, (text, d)


def test_a_gpu_fault_beats_the_signal_that_followed_it() -> None:
    log = corpus_log("gpu_fault/05_ecc_thc_terminate")
    for status in ((None, signal.SIGABRT), (None, signal.SIGKILL), (1, None)):
        d = diagnose(*status, log)
        assert d is not None and d.kind == "gpu_fault", status


def test_gpu_fault_device() -> None:
    assert gpu_fault_device("NVRM: Xid (PCI:0000:02:00): 79, GPU has fallen off the bus.") == (
        GpuRef(index=None, pci_bus_id="0000:02:00.0")
    )
    line = "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error"
    assert gpu_fault_device(line) == GpuRef(index=None, pci_bus_id="0000:0b:00.0")
    assert gpu_fault_device("nvmlDeviceGetHandleByIndex(5) failed: Unknown Error") == GpuRef(5)
    assert gpu_fault_device("RuntimeError: CUDA error: uncorrectable ECC error encountered") is None
    d = diagnose(1, None, corpus_log("gpu_fault/10_gpu_burn_xid79"))
    assert d is not None and d.kind == "gpu_fault"
    ref = gpu_fault_device(d.line)
    assert ref is not None and ref.pci_bus_id == "0000:02:00.0"


# --------------------------------------------------------------------------------------------
# The user's [[diagnose]] rules.


def test_user_pattern_rule_overrides_a_default() -> None:
    rule = DiagnosisRule(kind="shard_oom", hint="use --shards 8", pattern=r"CUDA out of memory")
    d = load("cuda_oom_legacy_cached.log").diagnose(rules=[rule])
    assert d.kind == "shard_oom" and d.hint == "use --shards 8"
    assert d.line.startswith("RuntimeError: CUDA out of memory")


def test_user_status_only_rule(workdir: Path) -> None:
    job = run_job(workdir, f"{sys.executable} noise.py; echo 'no data for split val'; exit 3")
    rule = DiagnosisRule(kind="no_data", hint="run prep first", exit_codes=(3,))
    d = diag(job, rules=[rule])
    assert d.kind == "no_data" and d.line == "no data for split val"
    assert diag(job, rules=[DiagnosisRule(kind="x", hint="", exit_codes=(4,))]).kind == "error"


def test_user_rule_with_status_and_pattern_needs_both(workdir: Path) -> None:
    job = run_job(workdir, f"{sys.executable} noise.py; echo 'no data for split val'; exit 3")
    both = DiagnosisRule(
        kind="no_data", hint="h", pattern=r"no data for split (\w+)", exit_codes=(3,)
    )
    assert diag(job, rules=[both]).kind == "no_data"
    wrong_code = DiagnosisRule(kind="no_data", hint="h", pattern=r"no data", exit_codes=(4,))
    assert diag(job, rules=[wrong_code]).kind == "error"
    wrong_text = DiagnosisRule(kind="no_data", hint="h", pattern=r"no labels", exit_codes=(3,))
    assert diag(job, rules=[wrong_text]).kind == "error"


def test_user_signal_rule_matches_a_shell_exit_code(workdir: Path) -> None:
    job = run_job(
        workdir, f"{sys.executable} -c 'import os; os.kill(os.getpid(), 9)'; rc=$?; exit $rc"
    )
    assert job.exit_code == 137
    rule = DiagnosisRule(kind="cgroup_limit", hint="raise the cgroup limit", signals=(9,))
    assert diag(job, rules=[rule]).kind == "cgroup_limit"


def test_first_matching_user_rule_wins_and_bad_ones_are_skipped() -> None:
    rules = [
        DiagnosisRule(kind="broken", hint="", pattern=r"(unclosed"),
        DiagnosisRule(kind="first", hint="", pattern=r"Tried to allocate"),
        DiagnosisRule(kind="second", hint="", pattern=r"CUDA out of memory"),
    ]
    assert load("cuda_oom_legacy_cached.log").diagnose(rules=rules).kind == "first"


def test_validate_rule() -> None:
    assert validate_rule(DiagnosisRule(kind="k", hint="h", pattern=r"x+")) is None
    assert validate_rule(DiagnosisRule(kind="k", hint="h", exit_codes=(3,))) is None
    assert "pattern" in (validate_rule(DiagnosisRule(kind="k", hint="h")) or "")
    assert "regular expression" in (
        validate_rule(DiagnosisRule(kind="k", hint="h", pattern="(")) or ""
    )
    assert "kind" in (validate_rule(DiagnosisRule(kind=" ", hint="h", pattern="x")) or "")


def test_default_rules_are_valid_and_cover_the_seed_table() -> None:
    assert all(validate_rule(r) is None for r in DEFAULT_RULES)
    kinds = {r.kind for r in DEFAULT_RULES}
    # the kinds every diagnosis must know (timeout, killed_by_user and error are not table rows)
    assert {
        "cuda_oom",
        "cuda_error",
        "runtime_error",
        "segfault",
        "import_error",
        "command_not_found",
        "permission_denied",
        "host_oom",
        "nccl",
        "address_in_use",
        "no_space",
        "file_not_found",
        "wandb_login",
        "libuv",
        "invalid_device_ordinal",
    } <= kinds


# --------------------------------------------------------------------------------------------
# Reading the tail of a log.


class CountingFile:
    """A real file whose reads are counted."""

    def __init__(self, f: Any) -> None:
        self._f = f
        self.bytes_read = 0
        self.reads = 0

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._f.read(n)
        self.reads += 1
        self.bytes_read += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._f.seek(offset, whence))

    def __enter__(self) -> CountingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()


@pytest.fixture
def counted_open(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[CountingFile]]:
    opened: list[CountingFile] = []

    def fake_open(path: Any, mode: str = "r", *args: Any, **kw: Any) -> CountingFile:
        wrapper = CountingFile(open(path, mode, *args, **kw))  # noqa: SIM115 (closed by __exit__)
        opened.append(wrapper)
        return wrapper

    # The diagnosis reads a log's tail through gtui.core.joblog, the one reader of a job's log.
    monkeypatch.setattr(joblog, "open", fake_open, raising=False)
    yield opened


def test_tail_of_a_50mb_log_reads_only_the_tail(
    tmp_path: Path, counted_open: list[CountingFile]
) -> None:
    error = load("cuda_oom_torch21_capacty.log").body.encode()
    log = tmp_path / "big.1.log"
    with open(log, "wb") as f:
        f.truncate(50 * 1024 * 1024 - len(error))  # sparse: 50 MB without writing them
        f.seek(0, os.SEEK_END)
        f.write(error)
    assert log.stat().st_size == 50 * 1024 * 1024
    tail = read_log_tail(log, max_bytes=16384)
    assert len(counted_open) == 1
    assert counted_open[0].bytes_read <= 16384 and counted_open[0].reads == 1
    d = diagnose(1, None, tail)
    assert d is not None and d.kind == "cuda_oom"
    assert "\x00" not in tail


def test_tail_drops_the_partial_first_line(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"first line that is long\nsecond\nthird\n")
    assert read_log_tail(log, max_bytes=20) == "second\nthird\n"
    with open(log, "rb") as f:
        assert read_tail_bytes(f, 1000) == b"first line that is long\nsecond\nthird\n"


def test_tail_keeps_a_single_huge_progress_line(tmp_path: Path) -> None:
    """A log of only \r-redrawn bars has no newline to cut at: keep the last frame."""
    frames = "".join(
        f"\rEpoch 0: {i:3d}%|\x1b[32m{'#' * (i // 10)}\x1b[0m| {i}/100" for i in range(101)
    )
    log = tmp_path / "bars.log"
    log.write_text(frames * 50)
    assert read_log_tail(log, max_bytes=4096) == "Epoch 0: 100%|##########| 100/100"


def test_tail_decodes_invalid_utf8(tmp_path: Path) -> None:
    log = tmp_path / "bin.log"
    log.write_bytes(b"step 1\n\xff\xfe garbage\nValueError: bad value\n")
    tail = read_log_tail(log)
    assert "\ufffd" in tail and tail.endswith("ValueError: bad value\n")


def test_missing_log_is_empty(tmp_path: Path) -> None:
    assert read_log_tail(tmp_path / "never-written.log") == ""


def test_cleaning_real_progress_output(workdir: Path) -> None:
    job = run_job(workdir, f"{sys.executable} -c 'import noise; noise.epochs()'")
    raw = job.log.read_bytes().decode()
    assert "\r" in raw and "\x1b[" in raw  # the noise really has both
    assert "\r" not in job.tail and "\x1b" not in job.tail
    assert "epoch 1 | loss 0.8000 | acc 0.81" in job.tail.splitlines()
    assert clean_log(job.tail) == job.tail  # idempotent


def test_clean_line_keeps_the_last_visible_segment() -> None:
    assert clean_line("\x1b[?25l\r\x1b[2Kepoch 1 \x1b[35m 50%\x1b[0m\r") == "epoch 1  50%"
    assert clean_line("a\r\r   \r") == "a"
    assert clean_line("done\r") == "done"  # CRLF line ending


# --------------------------------------------------------------------------------------------
# CUDA OOM numbers.


def test_oom_peak_from_the_pytorch_2_message() -> None:
    # https://github.com/pytorch/pytorch/issues/16417 (a 2024 comment)
    line = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 "
        "has a total capacity of 23.65 GiB of which 11.06 MiB is free. Including non-PyTorch "
        "memory, this process has 23.60 GiB memory in use. Of the allocated memory 22.90 GiB "
        "is allocated by PyTorch, and 194.87 MiB is reserved by PyTorch but unallocated. If "
        "reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    assert oom_peak_mib(line) == 24189  # this process's 23.60 GiB + the 22 MiB asked
    d = diagnose(1, None, line)
    assert d is not None and d.kind == "cuda_oom" and oom_peak_mib(d.line) == 24189


def test_oom_peak_from_the_pytorch_1_messages() -> None:
    # https://github.com/rshaojimmy/MADDoG/issues/11
    reserved = (
        "RuntimeError: CUDA out of memory. Tried to allocate 2.87 GiB (GPU 0; 14.76 GiB total "
        "capacity; 8.77 GiB already allocated; 19.75 MiB free; 13.71 GiB reserved in total by "
        "PyTorch)"
    )
    assert oom_peak_mib(reserved) == 16978  # 13.71 GiB reserved + 2.87 GiB
    # https://github.com/carolchenyx/MGFN./issues/35 ("0 bytes is free")
    zero = (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 "
        "has a total capacty of 6.00 GiB of which 0 bytes is free. Of the allocated memory "
        "2.93 GiB is allocated by PyTorch, and 2.30 GiB is reserved by PyTorch but unallocated."
    )
    assert oom_peak_mib(zero) == 7097  # (2.93 + 2.30 + 1.70) GiB
    cached = load("cuda_oom_legacy_cached.log").diagnose().line
    assert oom_peak_mib(cached) == 10966  # 10.05 GiB + 588.65 MiB cached + 86 MiB


def test_oom_peak_without_numbers() -> None:
    assert oom_peak_mib("RuntimeError: CUDA error: out of memory") is None
    jax = load("jax_resource_exhausted.log").diagnose().line
    assert oom_peak_mib(jax) == 3571  # 3743729664 bytes: only what it asked for is known


def test_oom_retry_mem() -> None:
    g = 1024
    assert oom_retry_mem(None, 1.25, 30 * g, 80 * g) is None  # whole GPUs already
    assert oom_retry_mem(10 * g, 1.25, None, 80 * g) == 13 * g  # 12.5G, to a whole GiB
    # the dashboard's example: asked 10G, peak 14.2G, the retry asks 16G
    assert oom_retry_mem(10 * g, 1.25, round(14.2 * g), 80 * g) == 16 * g
    assert oom_retry_mem(70 * g, 1.25, None, 80 * g) == 80 * g  # capped at the GPU
    assert oom_retry_mem(80 * g, 1.25, 90 * g, 80 * g) == 80 * g  # nothing more to give
    assert oom_retry_mem(500, 1.25, None, None) == 625
    assert oom_retry_mem(10 * g, 0.5, None, None) == 10 * g  # never shrinks


def test_status_text() -> None:
    assert status_text(1, None) == "exit code 1"
    assert status_text(None, 9) == "signal 9 (SIGKILL)"
    assert status_text(-11, None) == "signal 11 (SIGSEGV)"
    assert "signal 9, SIGKILL" in status_text(137, None)
    assert status_text(None, None) == "an unknown exit status"
