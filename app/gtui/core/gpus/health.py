"""A GPU's health as one reading, and the one rule that says whether it is a hardware fault.

The readers fill ``GpuHealth`` at every poll (NVML: Xid events, ECC, pending page
retirement or row remapping, GPU_IS_LOST, throttle reasons; the fake layer: its spec's ``!xid79``,
``!ecc``, ``!lost``). ``judge`` decides, purely, from that reading: a fault takes the GPU out
of placement and queues its jobs again (sched.healthwatch); a note is only shown. A field the
driver does not support is None (n/a) and never a fault.
"""

from __future__ import annotations

from dataclasses import dataclass

# What an Xid means, and whether it is the hardware's (a fault) or usually the job's own doing
# (a note). From NVIDIA's Xid catalog.
XID_MEANINGS: dict[int, tuple[str, bool]] = {
    13: ("graphics engine exception, usually the job's own out-of-range access", False),
    31: ("GPU memory page fault, usually the job's own bad access", False),
    43: ("GPU stopped processing, usually the job's own fault", False),
    45: ("preemptive cleanup after an earlier error", False),
    48: ("double-bit ECC error", True),
    61: ("internal micro-controller breakpoint", True),
    62: ("internal micro-controller halt", True),
    63: ("ECC page retirement or row remapping recorded", True),
    64: ("ECC page retirement or row remapping failed", True),
    74: ("NVLink error", True),
    79: ("fell off the bus", True),
    92: ("high single-bit ECC error rate", True),
    94: ("contained ECC error", True),
    95: ("uncontained ECC error", True),
    119: ("GSP firmware timeout", True),
    120: ("GSP firmware error", True),
}
HARDWARE = "hardware, not your code"


@dataclass(frozen=True)
class GpuHealth:
    """What one poll read of a GPU's health. None: not supported by this GPU/driver (n/a)."""

    xids: tuple[int, ...] = ()  # Xid critical errors seen since the last poll
    ecc_uncorrected: int | None = None  # volatile uncorrectable ECC errors
    retired_pending: bool | None = None  # pages waiting to be retired (needs a reset)
    remap_pending: bool | None = None  # rows waiting to be remapped (needs a reset)
    lost: bool = False  # GPU_IS_LOST: it fell off the bus
    throttle: tuple[str, ...] = ()  # why its clocks are held down: a note, never a fault

    @property
    def notable(self) -> bool:
        """Whether it says anything (a fault or a note): else it is left out of documents."""
        return bool(
            self.xids
            or self.ecc_uncorrected
            or self.retired_pending
            or self.remap_pending
            or self.lost
            or self.throttle
        )

    def to_json(self) -> dict[str, object]:
        """The ``gtui gpus --json`` shape; None is n/a."""
        return {
            "xids": list(self.xids),
            "ecc_uncorrected": self.ecc_uncorrected,
            "retired_pending": self.retired_pending,
            "remap_pending": self.remap_pending,
            "lost": self.lost,
            "throttle": list(self.throttle),
        }


@dataclass(frozen=True)
class Verdict:
    """``judge``'s answer: ``fault`` (a plain sentence) takes the GPU out; ``notes`` are shown."""

    fault: str | None
    notes: tuple[str, ...] = ()


def xid_words(xid: int) -> str:
    """``Xid 79 (fell off the bus)``."""
    meaning = XID_MEANINGS.get(xid)
    return f"Xid {xid} ({meaning[0]})" if meaning else f"Xid {xid}"


def judge(health: GpuHealth | None) -> Verdict:
    """Whether this reading is a hardware fault. Xids that are usually the job's own doing
    (13, 31, 43) and throttling are notes; an Xid not in the table counts as the hardware's
    (the catalog's critical errors are)."""
    if health is None:
        return Verdict(None)
    faults: list[str] = []
    notes: list[str] = []
    if health.lost:
        faults.append("fell off the bus (GPU is lost)")
    for xid in dict.fromkeys(health.xids):
        meaning = XID_MEANINGS.get(xid)
        (faults if meaning is None or meaning[1] else notes).append(xid_words(xid))
    if health.ecc_uncorrected:
        faults.append(f"{health.ecc_uncorrected} uncorrectable ECC errors")
    if health.retired_pending:
        faults.append("memory pages waiting to be retired (needs a GPU reset)")
    if health.remap_pending:
        faults.append("memory rows waiting to be remapped (needs a GPU reset)")
    if health.throttle:
        notes.append("clocks held down: " + ", ".join(health.throttle))
    return Verdict("; ".join(faults) or None, tuple(notes))


def fault_words(label: str, fault: str, requeued: bool) -> str:
    """The sentence a person reads: ``GPU 0: Xid 79 (fell off the bus): hardware, not your
    code; its jobs were queued again``."""
    after = "its jobs were queued again" if requeued else "no job of ours was on it"
    return f"GPU {label}: {fault}: {HARDWARE}; {after}"


def fault_gpu(words: str) -> str | None:
    """The GPU a :func:`fault_words` sentence names (``GPU 0``), None for another sentence."""
    head, sep, _ = words.partition(": ")
    return head if sep and head.startswith("GPU ") else None


REQUEUE_HINT = "the GPU failed, not the job: it runs again on another GPU, no retry spent"
