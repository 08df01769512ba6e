"""What the dashboard needs from the engine: the one small interface between engine and screens.

It is the engine's command names every request of the protocol is done by
(``gtui.core.control.handle.Operations``: kill, pause, ..., the edits the forms make), plus what
a screen needs besides: the engine's life (start, run, shutdown), its events, the jobs as views.
``gtui.core.sched.engine.Engine`` (in process) and ``gtui.core.control.remote.RemoteEngine``
(attached over the socket, each command one request) satisfy it structurally. Naming it here
keeps the UI honest (no process or NVML access sneaks in) and lets the widgets be typed without
importing the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gtui.core.api import Event, GpusRead, JobView
from gtui.core.control.handle import Operations
from gtui.core.errors import GtuiError
from gtui.core.model import JobState, Settings

if TYPE_CHECKING:
    from gtui.core.sched.handover import Successor


class EnginePort(Operations, Protocol):
    queue_path: Path

    async def start(self) -> None: ...
    async def run(self, *, exit_when_idle: bool = False) -> int: ...
    async def shutdown(self, *, kill_jobs: bool = False) -> None: ...
    async def hand_over(self) -> Successor: ...
    def subscribe(self, sink: Callable[[Event], None]) -> Callable[[], None]: ...
    def jobs(self) -> list[JobView]: ...
    def view(self, name: str) -> JobView: ...
    def names_in(self, *states: JobState) -> list[tuple[str, JobState]]: ...

    @property
    def paused(self) -> bool: ...
    @property
    def gpus(self) -> GpusRead | None: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def fake(self) -> bool: ...

    def log_path(self, name: str) -> Path | None: ...


def current_log(engine: EnginePort, view: JobView) -> Path | None:
    """The job's log as the engine has it now (its running attempt's), else its record's (the
    last attempt's): the side pane, the detail view and the pager all show this one."""
    try:
        path = engine.log_path(view.spec.name)
    except GtuiError:
        path = None
    if path is None and view.record.log:
        path = Path(view.record.log)
    return path
