"""The GPU layer: one snapshot type and two backends (NVML through pynvml, and fake GPUs)."""
