"""gtui: run a queue of shell commands on the GPUs of a shared Linux server."""

__version__ = "0.1.0"
