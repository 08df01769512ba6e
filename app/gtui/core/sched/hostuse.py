"""The host's cores and memory as the scheduler sees them: read at each poll (psutil, or the
simulated ``fake_host``), what each running job of ours asked and uses of them, and the
document the status and the GPU panel show. A part of ``Occupancy``; the rules that count
them are the policy's (hostfit.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from gtui.core.bus import EventBus
from gtui.core.errors import GtuiError
from gtui.core.gpus.claims import HOST_KEY, Claim
from gtui.core.gpus.host import FAKE_HOST_ENV, read_host
from gtui.core.gpus.hostclaims import judge_host
from gtui.core.gpus.snapshot import HostInfo
from gtui.core.sched.config import QueueConfig
from gtui.core.sched.hostfit import HostHolder, host_doc
from gtui.core.state.book import JobBook
from gtui.core.state.usage import ram_asked


class HostUse:
    """The last host reading (``info``; None: not read, nothing counted) and the host memory
    each running job of ours was last seen to use (``used``, kept by the occupancy's sampling
    of the jobs' processes on a real host)."""

    def __init__(
        self,
        book: JobBook,
        bus: EventBus,
        config: QueueConfig,
        waiting_ask: Callable[[], bool] = lambda: False,
    ) -> None:
        self.waiting_ask = waiting_ask
        self._book = book
        self._bus = bus
        self._config = config
        self.info: HostInfo | None = None
        self.used: dict[str, int] = {}
        self.claims: tuple[HostHolder, ...] = ()  # neighbours' claims that count
        self._unread_said = False

    def fake(self) -> str | None:
        """The simulated host, if any: ``GTUI_FAKE_HOST`` over the file's ``fake_host``."""
        return os.environ.get(FAKE_HOST_ENV) or self._config.settings.fake_host

    def asked(self) -> dict[str, int]:
        """The host memory each running job of ours asked (those that asked some)."""
        out: dict[str, int] = {}
        records, specs = self._book.records, self._book.specs
        for name in self._book.active_names():
            rec, spec = records[name], specs.get(name)
            if rec.active and spec is not None:
                ram = ram_asked(spec, rec.host_peak_mib)
                if ram:
                    out[name] = ram
        return out

    def read(self) -> None:
        """The host now. On a simulated host each running job of ours uses the ``ram`` it
        asked; a host that cannot be read is said once and not counted."""
        fake = self.fake()
        asked = self.asked() if fake else {}
        try:
            self.info = read_host(fake, asked.values())
        except (GtuiError, OSError) as e:
            self.info = None
            if not self._unread_said:
                self._unread_said = True
                self._bus.notice("warning", f"host not read, cores and memory not counted: {e}")
            return
        self._unread_said = False
        if fake:
            self.used = asked

    def holders(self) -> list[HostHolder]:
        """What each running job of ours asked of the host, and uses of its memory."""
        out = []
        records, specs = self._book.records, self._book.specs
        for name in self._book.active_names():
            rec, spec = records[name], specs.get(name)
            if not rec.active or spec is None:
                continue
            ram = ram_asked(spec, rec.host_peak_mib)
            if spec.cpus or ram:
                out.append(HostHolder(name, spec.cpus or 0, ram or 0, self.used.get(name, 0)))
        return out

    def doc(self) -> dict[str, object] | None:
        """The host as the status and the GPU panel show it (None: not read)."""
        if self.info is None:
            return None
        return host_doc(self.info, [*self.holders(), *self.claims])

    # ------------------------------------------------------------------ neighbours
    def shared(self) -> bool:
        """Whether this queue publishes and counts claims of the host: with neighbours on, on
        the real host (a simulated one is this scheduler's alone), while a job of ours that
        waits (``waiting_ask``, the planner's word) or runs asks cores or memory."""
        settings = self._config.settings
        if not settings.neighbours or self.info is None or self.fake():
            return False
        return self.waiting_ask() or bool(self.holders())

    def judge(self, claims: Sequence[Claim]) -> tuple[bool, list[str]]:
        """Take the neighbours' claims of the host among ``claims``: (whether what placement
        counts changed, notes on the ones ignored)."""
        held: tuple[HostHolder, ...] = ()
        notes: list[str] = []
        if self.info is not None and self.shared():
            found, notes = judge_host(claims, self.info)
            held = tuple(found)
        changed = held != self.claims
        self.claims = held
        return changed, notes

    def our_claims(self, uid: int, user: str, queue: str) -> list[Claim]:
        """A claim of the host for each running job of ours that asked cores or memory."""
        if not self.shared():
            return []
        out = []
        records, specs = self._book.records, self._book.specs
        for name in self._book.active_names():
            rec, spec = records[name], specs.get(name)
            if spec is None or not (rec.active and rec.pid and rec.create_time is not None):
                continue
            ram = ram_asked(spec, rec.host_peak_mib) or 0
            if spec.cpus or ram:
                since = rec.started_at or rec.create_time
                out.append(
                    Claim(uid, user, HOST_KEY, ram, rec.pid, rec.create_time, name, since, queue,
                          cpus=spec.cpus or 0)
                )  # fmt: skip
        return out
