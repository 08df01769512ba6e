"""Choose the GPU backend: fake GPUs when a spec is given, NVML otherwise."""

from __future__ import annotations

from pathlib import Path

from gtui.core.gpus.fake import FakeBackend
from gtui.core.gpus.nvml import NvmlBackend
from gtui.core.gpus.snapshot import GpuBackend


def open_backend(fake_spec: str | None, base_dir: Path) -> GpuBackend:
    """The backend to read GPUs with; never fails for want of GPUs.

    ``fake_spec`` (``--fake-gpus`` / ``GTUI_FAKE_GPUS`` / ``settings.fake_gpus``) selects the
    simulation; a bad spec raises GtuiError (exit 2). ``base_dir`` resolves ``@FILE`` (the queue
    file's folder, or the working directory for commands without one). Without a spec this is
    NVML; where NVML cannot start, its snapshots have no GPUs and an ``error`` sentence saying so
    (only CPU jobs can run), and NVML is tried again every few seconds in case the driver comes
    back.
    """
    if fake_spec is not None and fake_spec.strip():
        return FakeBackend(fake_spec, base_dir)
    return NvmlBackend()
