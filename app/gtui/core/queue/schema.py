"""The queue file's schema: which keys each table may hold, and what a checked file is.

One place for the key names, so that the checks, the messages that suggest a key
("did you mean ...", "belongs in [settings]") and the write-back agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gtui.core.model import JobSpec, Settings

SETTINGS_KEYS = (
    "gpus",
    "exclude",
    "reserve",
    "reserve_rule",
    "mode",
    "placement",
    "max_parallel",
    "retries",
    "oom_grow",
    "poll",
    "kill_grace",
    "log_dir",
    "isolate",
    "on_failure",
    "env",
    "starve_after",
    "multi_gpu_first",
    "fake_gpus",
    "diagnose",
    "neighbours",
    "cpus",
    "ram",
    "fake_host",
    "enforce",
    "setup",
    "env_file",
    "health_recheck",
    "preemptible",
    "signal",
    "grace",
    "requeue_exit",
    "requeue_on_reboot",
    "co2_g_per_kwh",
    "price_per_kwh",
)
JOB_KEYS = (
    "name",
    "cmd",
    "gpus",
    "mem",
    "priority",
    "after",
    "retries",
    "timeout",
    "cwd",
    "env",
    "matrix",
    "isolate",
    "cpus",
    "ram",
    "group",
    "setup",
    "env_file",
    "preemptible",
    "signal",
    "grace",
    "requeue_exit",
)
RULE_KEYS = ("kind", "pattern", "hint", "exit_codes", "signals")
JOB_KEYSET = frozenset(JOB_KEYS)
TOP_KEYS = ("settings", "jobs", "diagnose", "notify", "cluster", "groups")
GROUP_KEYS = ("max_parallel", "priority")
NOTIFY_KEYS = ("command", "apprise", "on", "timeout", "bell", "desktop")
CLUSTER_KEYS = ("backend", "address", "gpus", "exclude", "reserve")
MAX_JOBS_PER_ENTRY = 100_000


@dataclass(frozen=True)
class QueueFile:
    """A checked queue file: its settings and its jobs, expanded, in queue (file) order."""

    path: Path
    settings: Settings
    jobs: tuple[JobSpec, ...]
    warnings: tuple[str, ...] = ()  # things that are allowed but probably not meant
