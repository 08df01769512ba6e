"""Bad input at scale: tests/reliability/fuzz.py's properties with thousands of examples."""

from __future__ import annotations

import time
import traceback
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability import fuzz


def run_fuzz(per_property: int) -> dict[str, Any]:
    """Each property with ``per_property`` examples; the case counts and any failure."""
    conf = settings(
        max_examples=per_property,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    any_bytes = st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode))
    properties = {
        "wrong queue files": given(fuzz.WRONG_VALUE)(lambda case: fuzz.check_wrong_queue(*case)),
        "random files": given(any_bytes)(fuzz.check_any_text),
        "edited samples": given(fuzz.edited_sample())(fuzz.check_edited_sample),
        "wrong command lines": given(fuzz.wrong_command_line())(fuzz.check_wrong_command_line),
    }
    t0 = time.monotonic()
    failed: dict[str, str] = {}
    fuzz.TALLY.counts.clear()
    for what, prop in properties.items():
        try:
            conf(prop)()
        except Exception:
            failed[what] = traceback.format_exc(limit=3)[-3000:]
    return {
        "cases": fuzz.TALLY.total,
        "by_property": dict(fuzz.TALLY.counts),
        "failures": len(failed),
        "seconds": round(time.monotonic() - t0, 1),
        "failed": failed,
    }
