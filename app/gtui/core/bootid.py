"""The machine's boot id: a new one after every reboot, so a scheduler can tell that the jobs
its records say are running were stopped by a reboot, not by their own end.

``GTUI_BOOT_ID_FILE`` names another file to read (the tests simulate a reboot by changing
it); the kernel's is ``/proc/sys/kernel/random/boot_id``.
"""

from __future__ import annotations

import os

KERNEL_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def boot_id() -> str | None:
    """This boot's id, or None where the machine does not say (then no reboot is ever seen)."""
    path = os.environ.get("GTUI_BOOT_ID_FILE") or KERNEL_BOOT_ID
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None
