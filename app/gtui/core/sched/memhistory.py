"""What a scheduler's start makes of the memory its jobs' last runs used: ``mem = "auto"``
jobs ask for their recorded peak plus a margin, and jobs whose ``mem`` is far from what their
last runs used are pointed out once. Apart from the runner: it reads the history, never a run."""

from __future__ import annotations

from pathlib import Path

from gtui.core.bus import EventBus
from gtui.core.state.book import JobBook
from gtui.core.state.usage import auto_mem, mem_notes, peaks_by_job


def use_history(book: JobBook, bus: EventBus, db: Path, largest_gpu: int | None) -> None:
    """At start: ``mem = "auto"`` jobs ask for their recorded peak plus a
    margin, and jobs whose ``mem`` is far from what their last runs used are pointed out
    once (a warning: a toast on the dashboard, a line of ``gtui run``'s log).
    ``largest_gpu``: the largest GPU's memory in MiB, the most an auto ``mem`` asks for."""
    history = peaks_by_job(db)
    if not history:
        return
    total = largest_gpu
    for name, spec in book.specs.items():
        rec = book.records.get(name)
        if spec.mem_auto and rec is not None and rec.waiting and name in history:
            mem = auto_mem((a.peak_mib for a in history[name]), total)
            if mem is not None and mem != rec.mem_mib:
                rec.mem_mib = mem
                book.commit(rec)
    notes = mem_notes(book.specs.values(), history)
    if notes:
        more = f" (+{len(notes) - 3} more: gtui validate lists them)" if len(notes) > 3 else ""
        bus.notice("warning", "; ".join(notes[:3]) + more)
