"""Why the selected job failed: the kind, the matching log line, the hint, and what retry does."""

from __future__ import annotations

import signal as _signal

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from gtui.core.api import JobView
from gtui.core.model import JobState
from gtui.core.units import format_mib
from gtui.ui.format import kind_label


def _signal_name(num: int) -> str:
    try:
        return _signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def diagnosis_text(view: JobView, oom_grow: float) -> Text | None:
    """The panel's text for ``view``; None when there is nothing to explain."""
    rec, spec = view.record, view.spec
    diag = rec.diagnosis
    if diag is None and not rec.warnings:
        return None
    t = Text()
    if diag is not None:
        t.append(kind_label(diag.kind), style="bold red")
        how = []
        if rec.signal:
            how.append(f"killed by {_signal_name(rec.signal)}")
        elif rec.exit_code is not None:
            how.append(f"exit {rec.exit_code}")
        how.append(f"attempt {rec.attempt}")
        t.append(f"  ({', '.join(how)})", style="dim")
        if diag.line:
            t.append("\n")
            t.append(diag.line.strip(), style="bold")
        if diag.hint:
            t.append("\nhint: ", style="bold")
            t.append(diag.hint)
        if diag.kind == "cuda_oom":
            asked = spec.mem_mib
            now = rec.mem_mib
            bits = []
            if asked is not None:
                bits.append(f"asked {format_mib(asked)}")
            if rec.peak_mib:
                bits.append(f"peak {format_mib(rec.peak_mib)}")
            if now is not None and asked is not None and now > asked:
                bits.append(f"the retry asks {format_mib(now)} (oom_grow {oom_grow:g})")
            if len(bits) > 1:  # "asked 10G" alone says nothing the queue table does not
                t.append("\n" + "; ".join(bits))
        if rec.state == JobState.QUEUED and rec.requeued_as:
            t.append("\nit will run again (no retry spent)", style="yellow")
        elif rec.state == JobState.QUEUED:
            t.append("\nit will run again (retries left)", style="yellow")
    for w in rec.warnings:
        if diag is not None and diag.kind == "cuda_oom" and w.startswith("CUDA OOM:"):
            continue  # said above, in GiB
        if t:
            t.append("\n")
        t.append("⚠ " + w, style="yellow")
    return t


MORE = "more ↓ · enter: all of it"  # the panel's bottom line while text is cut below


class DiagnosisPanel(VerticalScroll, can_focus=False):
    """Hidden unless the selected job has a diagnosis or a warning. Where it is too short for
    its text (a long hint at 80x24), it scrolls (the wheel) and its bottom line says that more
    is below; the job's details (enter) show it whole."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = Text()

    def compose(self) -> ComposeResult:
        yield Static(self.text, id="diagnosis-text")

    def show_job(self, view: JobView | None, oom_grow: float) -> None:
        text = diagnosis_text(view, oom_grow) if view is not None else None
        self.display = text is not None
        if text is not None and view is not None:
            self.border_title = f"Diagnosis · {view.spec.name}"
            self.text = text
            for body in self.query(Static):
                body.update(text)
            self.scroll_home(animate=False)
            self.call_after_refresh(self._mark_more)  # once laid out with its new text

    def _mark_more(self) -> None:
        more = self.display and round(self.scroll_y) < self.max_scroll_y
        self.border_subtitle = MORE if more else ""

    def on_resize(self) -> None:
        self._mark_more()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._mark_more()
