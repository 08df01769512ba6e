"""The part of a waiting reason a person acts on: ``needs 40G, best GPU has 31G
free`` for the placement policy's ``needs 1 GPU with 40G: none eligible (GPU0 31G < 40G, ...)``.
The dashboard's table and the queue's summary line lead with it; the full reason stays in the
job's details and in ``gtui status``. Beside the scheduler, as it reads the policy's words
(gtui.core.sched.policy, ``header`` and ``why_not``).
"""

from __future__ import annotations

import re
from functools import lru_cache

from gtui.core.units import format_mib, parse_size_mib

_NEEDS = re.compile(
    r"^needs (?P<n>\d+) GPUs?(?P<idle> idle \((?:exclusive|no mem set)\))?"
    r"(?: with (?P<mem>\S+))?: (?P<eligible>none|\d+) eligible(?: \((?P<details>[^)]*)\))?"
)
_SHORT = re.compile(r"GPU[\d,]+ (?P<avail>[\d.]+[KMGT]?) < ")


@lru_cache(maxsize=4096)  # a queue has few distinct reasons; rows repaint often
def reason_key(reason: str) -> str:
    """The part of a waiting reason a person acts on, first: ``needs 40G, best GPU has 31G
    free`` for the planner's ``needs 1 GPU with 40G: none eligible (GPU0 31G < 40G, ...)``.
    The full reason stays in the job's details (enter). Other reasons are short already."""
    m = _NEEDS.match(reason)
    if m is None:
        return reason
    n, mem, details = int(m["n"]), m["mem"], m["details"] or ""
    what = mem or "an idle GPU"
    if m["idle"] and mem:
        what = f"an idle GPU with {mem}"
    if n > 1:
        what = f"{n}x{mem}" if mem and not m["idle"] else f"{n} idle GPUs"
        return f"needs {what}, {m['eligible']} eligible"
    avails = [parse_size_mib(a["avail"]) for a in _SHORT.finditer(details)]
    if avails and mem:
        return f"needs {mem}, best GPU has {format_mib(max(avails))} free"
    return f"needs {what}: {details}" if details else f"needs {what}: none eligible"
