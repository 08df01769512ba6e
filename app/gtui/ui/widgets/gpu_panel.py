"""One row per GPU: the three-part memory bar, utilization, temperature and our jobs on it.

Other users' gtui claims: memory promised to their running jobs and not yet
allocated is shown apart from used memory, as ``▒`` taken from the bar's free part, and a line
under the row names whose it is.

Who holds each GPU: under a GPU that other processes use, one line names the
largest holder and says how many there are and whether any looks stale; ``h`` (the main
screen's binding, ``toggle_holders``) expands it to one line per holder: pid, user, memory,
running time, command, and why it looks stale (or, dimmed, that its parent is gone while its
GPU works: information, not staleness)."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widget import Widget

from gtui.core.api import GpusRead
from gtui.core.gpus.holders import holder_notes, holders, stale_reasons, who
from gtui.core.gpus.snapshot import GpuInfo
from gtui.core.model import Settings
from gtui.core.sched.policy import chosen, excluded, gpu_names
from gtui.core.units import format_duration, format_mib
from gtui.ui.format import FREE_CHAR, OTHERS_CHAR, OURS_CHAR, GpuMarks, gpu_line

PROMISED_CHAR = "▒"
_BAR_CHARS = frozenset((OTHERS_CHAR, OURS_CHAR, FREE_CHAR))


def with_promised(line: Text, total: int | None, promised: int) -> Text:
    """``line`` (a ``gpu_line``) with ``promised`` MiB of its memory bar's free cells shown as
    promised to neighbours (at least one cell when there is any, never more than were free)."""
    if not total or promised <= 0:
        return line
    plain = line.plain
    start = next((i for i, ch in enumerate(plain) if ch in _BAR_CHARS), None)
    if start is None:
        return line
    end = start
    while end < len(plain) and plain[end] in _BAR_CHARS:
        end += 1
    free = 0
    while free < end - start and plain[end - 1 - free] == FREE_CHAR:
        free += 1
    cells = min(free, max(1, round(promised / total * (end - start))))
    if cells <= 0:
        return line
    first_free = end - free  # promised memory sits between used and free, as it will be used
    out = line[:first_free]
    out.no_wrap, out.overflow = line.no_wrap, line.overflow
    out.append(PROMISED_CHAR * cells, style="yellow")
    out.append_text(line[first_free + cells :])
    return out


def promised_line(names: tuple[str, ...], mib: int) -> Text:
    """The line under a GPU's row: how much its neighbours' claims promise, and to whom."""
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(f"   {PROMISED_CHAR} ", style="yellow")
    who = ", ".join(names[:3]) + (f" +{len(names) - 3}" if len(names) > 3 else "")
    line.append(f"{format_mib(mib)} promised to {who}, not yet allocated", style="yellow")
    return line


HOLDER_KEY = "h"  # the main screen's key for toggle_holders


def holder_lines(gpu: GpuInfo, ours: tuple[str, ...], expanded: bool, now: float) -> list[Text]:
    """The lines under a GPU's row on who holds it: none when only our jobs (or nobody) do;
    collapsed, one summary line; expanded, one line per holder."""
    found = holders(gpu, ours)
    if not found:
        return []
    stale = [p for p in found if stale_reasons(gpu, p, now)]
    if not expanded:
        line = Text(no_wrap=True, overflow="ellipsis", style="dim")
        top = found[0]
        line.append(f"   held by {who(top)} {format_mib(top.mem_mib)}")
        if len(found) > 1:
            line.append(f" +{len(found) - 1} more")
        if stale:
            line.append(f"  {len(stale)} stale", style="bold yellow")
        line.append(f"  ({HOLDER_KEY}: details)")
        return [line]
    out = []
    for p in found:
        line = Text(no_wrap=True, overflow="ellipsis")
        running = "?" if p.started is None else format_duration(now - p.started)
        line.append(
            f"   ↳ {p.pid:>7} {p.user or '?':<10} {format_mib(p.mem_mib):>6} {running:>9}  ",
            style="dim",
        )
        line.append(p.command or "?")
        if p.job:
            line.append(f" (gtui job {p.job})", style="dim")
        why = stale_reasons(gpu, p, now)
        if why:
            line.append(f"  stale: {', '.join(why)}", style="bold yellow")
        else:
            for note in holder_notes(gpu, p, now):  # a parent gone while the GPU works
                line.append(f"  {note}", style="dim")
        out.append(line)
    return out


def gpu_marks(
    gpu: GpuInfo | int,
    settings: Settings,
    reserved: tuple[int, ...],
    quarantined: tuple[int, ...] = (),
) -> GpuMarks:
    """How the pool's rule (the policy's own: numbers, and node names on a cluster) marks it."""
    info = gpu if isinstance(gpu, GpuInfo) else GpuInfo(gpu, "", "", None, None, None, None)
    numbers, names = gpu_names(info)
    return GpuMarks(
        excluded=excluded(numbers, names, settings),
        in_pool=chosen(numbers, names, settings),
        reserved=info.index in reserved,
        quarantined=info.index in quarantined,
    )


GPU_TITLE = "GPUs  ▓ others █ ours ░ free"


def host_title(doc: dict[str, object] | None) -> str:
    """`` · host 6/16 cores asked · RAM 40G/64G used``: the GPU panel header's host part,
    once a running job asks cores or memory, or on a simulated host."""
    if not doc:
        return ""
    if not (doc.get("cores_asked") or doc.get("ram_asked_mib") or doc.get("source") == "fake"):
        return ""  # nothing asks the host and it is the real one: the header as it always was
    cores, asked = doc.get("cores"), doc.get("cores_asked")
    used, total = doc.get("ram_used_mib"), doc.get("ram_total_mib")
    if not isinstance(cores, int) or not isinstance(used, int) or not isinstance(total, int):
        return ""
    fake = " (simulated)" if doc.get("source") == "fake" else ""
    return (
        f" · host{fake} {asked}/{cores} cores asked · RAM {format_mib(used)}/"
        f"{format_mib(total)} used"
    )


class GpuPanel(Widget):
    """Repainted whole on every GPU read: a handful of lines, once per poll."""

    DEFAULT_CSS = "GpuPanel { height: auto; }"

    def __init__(self, settings: Settings, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.settings = settings
        self.read: GpusRead | None = None
        self.show_holders = False  # one line per holder under each GPU, or a summary

    def toggle_holders(self) -> bool:
        """Expand or fold the holders under each GPU; returns whether they are expanded."""
        self.show_holders = not self.show_holders
        self.refresh(layout=True)
        return self.show_holders

    def set_read(self, read: GpusRead | None) -> None:
        old_n = len(self.read.snapshot.gpus) if self.read else -1
        self.read = read
        new_n = len(read.snapshot.gpus) if read else -1
        self.refresh(layout=old_n != new_n)
        box = self.parent
        if isinstance(box, Widget) and box.id == "gpus-box":  # its header says the host's use
            box.border_title = GPU_TITLE + host_title(read.host if read else None)

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
        now = time.time()
        node = None
        for g in snap.gpus:
            if g.node is not None and g.node != node:  # a cluster: bars grouped by node
                node = g.node
                lines.append(Text(f"{node}", style="bold underline"))
            line = gpu_line(
                g,
                ours_names=read.ours.get(g.index, ()),
                ours_mib=read.ours_mib.get(g.index, 0),
                marks=gpu_marks(g, self.settings, read.reserved, read.quarantined),
                width=width,
            )
            promised = read.neighbours_mib.get(g.index, 0)
            lines.append(with_promised(line, g.mem_total_mib, promised))
            if promised > 0:
                lines.append(promised_line(read.neighbours.get(g.index, ()), promised))
            if not g.lost:
                lines += holder_lines(g, read.ours.get(g.index, ()), self.show_holders, now)
        if snap.error:
            lines.append(Text(snap.error, style="yellow"))
        return Text("\n", no_wrap=True).join(lines)
