"""What the detail view writes beside an attempt's exit: its GPU energy (each attempt's kWh,
and the job's total beside its attempts, marked as the GPU's energy over the job's time where
a GPU was shared; the figures: gtui.core.sched.energymeter, what shared means:
gtui.core.gpus.energy) and the experiment-tracker runs its log printed."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from gtui.core.state.energyreport import kwh_text
from gtui.core.state.history import Attempt
from gtui.core.trackers import links_line

SHARED_WORDS = "GPU's energy over the job's time: its GPU was shared"


def attempt_energy_text(a: Attempt) -> Text:
    """`` · 0.0123 kWh``: the attempt's GPU energy, where it was measured, marked when its GPU
    was shared; empty where it was not measured."""
    t = Text()
    if a.energy_kwh is not None:
        t.append(f" · {kwh_text(a.energy_kwh)}")
        if a.energy_shared:
            t.append(" (shared GPU)", style="yellow")
    return t


def energy_note(tries: Sequence[Attempt]) -> str:
    """``energy 0.0123 kWh over 2 attempts``: the job's energy over its measured attempts,
    for the attempts' heading ("" when none was measured)."""
    measured = [a for a in tries if a.energy_kwh is not None]
    if not measured:
        return ""
    total = sum(a.energy_kwh or 0.0 for a in measured)
    note = f"energy {kwh_text(total)} over {len(measured)} attempt"
    note += "s" if len(measured) > 1 else ""
    if any(a.energy_shared for a in measured):
        note += f" ({SHARED_WORDS})"
    return note


def attempt_runs_text(a: Attempt) -> Text:
    """``runs W&B <url>`` on its own line: the attempt's experiment-tracker runs, as its log
    printed them (a running attempt's too); empty when it printed none."""
    return Text("\nruns " + links_line(a.links), style="cyan") if a.links else Text()
