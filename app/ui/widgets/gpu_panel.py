"""One row per GPU: the three-part memory bar, utilization, temperature and our jobs on it."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from gtui.core.api import GpusRead
from gtui.core.model import Settings
from gtui.ui.format import GpuMarks, gpu_line


def gpu_marks(index: int, settings: Settings, reserved: tuple[int, ...]) -> GpuMarks:
    in_pool = settings.gpus == "all" or index in settings.gpus
    return GpuMarks(
        excluded=index in settings.exclude,
        in_pool=in_pool,
        reserved=index in reserved,
    )


class GpuPanel(Widget):
    """Repainted whole on every GPU read: a handful of lines, once per poll."""

    DEFAULT_CSS = "GpuPanel { height: auto; }"

    def __init__(self, settings: Settings, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.settings = settings
        self.read: GpusRead | None = None

    def set_read(self, read: GpusRead | None) -> None:
        old_n = len(self.read.snapshot.gpus) if self.read else -1
        self.read = read
        new_n = len(read.snapshot.gpus) if read else -1
        self.refresh(layout=old_n != new_n)

    def render(self) -> Text:
        width = self.size.width or 120
        read = self.read
        if read is None:
            return Text("reading the GPUs…", style="dim")
        snap = read.snapshot
        if not snap.gpus:
            msg = snap.error or "no GPUs found"
            return Text(f"No GPUs: {msg}. CPU jobs (gpus = 0) still run.", style="yellow")
        lines = []
        for g in snap.gpus:
            lines.append(
                gpu_line(
                    g,
                    ours_names=read.ours.get(g.index, ()),
                    ours_mib=read.ours_mib.get(g.index, 0),
                    marks=gpu_marks(g.index, self.settings, read.reserved),
                    width=width,
                )
            )
        if snap.error:
            lines.append(Text(snap.error, style="yellow"))
        return Text("\n", no_wrap=True).join(lines)
