"""The fleet dashboard: every host's GPUs (grouped by host), every job with its host, the
selected job's detail, diagnosis and log, and the one-queue keys, each routed to the job's host.

Every remote call runs in a worker with a deadline (gtui.fleet.transport), so a slow or dead
link never holds the screen; a host is refreshed when its ``gtui events`` stream reports a
change, and every ``POLL_S`` seconds besides (its GPUs move without events)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from typing import Any

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Footer, Static

from gtui.fleet import actions, transport
from gtui.fleet.config import Host
from gtui.fleet.events import watch
from gtui.fleet.remote import HostState, refresh
from gtui.fleet.ui import view
from gtui.fleet.ui.screens import AddForm, Confirm

POLL_S = 5.0
LOG_LINES = 200


class FleetApp(App[None]):
    CSS = """
    #hosts { height: auto; max-height: 5; color: $text-muted; }
    #gpus { height: auto; max-height: 9; }
    #jobs { height: 1fr; min-height: 4; }
    #bottom { height: 10; }
    #detail { width: 2fr; border-left: vkey $accent; padding: 0 1; }
    #log { width: 3fr; }
    #said { height: 1; }
    """
    BINDINGS = [
        Binding("x", "kill", "Kill"),
        Binding("p", "pause_job", "Pause/resume"),
        Binding("r", "retry", "Retry"),
        Binding("a", "add", "Add"),
        Binding("enter", "details", "Job", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, hosts: Sequence[Host]) -> None:
        super().__init__()
        self.hosts = list(hosts)
        self.states = [HostState(h) for h in hosts]
        self.rows: list[tuple[HostState, dict[str, Any]]] = []
        self.selected: tuple[str, str] | None = None  # host key, job name
        self.zoomed = False

    def compose(self) -> ComposeResult:
        yield Static(id="hosts")
        yield DataTable(id="gpus", show_cursor=False)
        yield DataTable(id="jobs", cursor_type="row")
        with Horizontal(id="bottom"):
            yield Static(id="log")
            yield Static(id="detail")
        yield Static(id="said")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "gtui fleet"
        gpus = self.query_one("#gpus", DataTable)
        gpus.add_columns("host", "gpu", "memory", "util", "name")
        gpus.can_focus = False  # the keys are the jobs table's
        jobs = self.query_one("#jobs", DataTable)
        jobs.add_columns("host", "job", "state", "gpus")
        jobs.focus()
        self.draw()
        for s in self.states:
            self.run_worker(self.follow(s), group="hosts")
        self.set_interval(1.0, self.draw_hosts)

    async def follow(self, state: HostState) -> None:
        """Keep one host fresh: at once, on its events, every POLL_S, after its back-off."""
        events = asyncio.Event()
        await refresh(state)  # opens the host's shared connection before the stream rides on it
        self.draw()
        stream = asyncio.create_task(watch(state.host, events))
        try:
            while True:
                if state.next_try <= time.time():
                    await refresh(state)
                    self.draw()
                wait = max(state.next_try - time.time(), 0.0) if not state.answered else POLL_S
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(events.wait(), wait or POLL_S)
                events.clear()
        finally:
            stream.cancel()

    # drawing

    def draw_hosts(self) -> None:
        self.query_one("#hosts", Static).update(view.header_text(self.states))

    def draw(self) -> None:
        self.draw_hosts()
        gpus = self.query_one("#gpus", DataTable)
        gpus.clear()
        for row in view.gpu_rows(self.states):
            gpus.add_row(*row)
        jobs = self.query_one("#jobs", DataTable)
        self.rows = view.job_rows(self.states)
        jobs.clear()
        at = 0
        for i, (s, j) in enumerate(self.rows):
            jobs.add_row(*view.job_cells(s, j))
            if self.selected == (s.host.key, str(j.get("name"))):
                at = i
        if self.rows:
            jobs.move_cursor(row=at)
        self.show_selected()

    def current(self) -> tuple[HostState, dict[str, Any]] | None:
        row = self.query_one("#jobs", DataTable).cursor_row
        return self.rows[row] if 0 <= row < len(self.rows) else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        picked = self.current()
        key = (picked[0].host.key, str(picked[1].get("name"))) if picked else None
        if key != self.selected:
            self.selected = key
            self.show_selected()
            if picked:
                self.run_worker(self.load_log(*picked), group="log", exclusive=True)

    def show_selected(self) -> None:
        picked = self.current()
        text = view.detail_text(*picked) if picked else "no job"
        self.query_one("#detail", Static).update(text)

    async def load_log(self, state: HostState, job: dict[str, Any]) -> None:
        """The selected job's last lines, from its host's ``gtui log``."""
        log = self.query_one("#log", Static)
        log.update(f"reading {job.get('name')}'s log on {state.host.name}...")
        reply = await transport.call(
            state.host, ["log", state.host.queue, str(job.get("name")), "-n", str(LOG_LINES)]
        )
        text = reply.out if reply.rc == 0 else (reply.text or "no log")
        lines = text.splitlines()[-8:]
        log.update("\n".join(lines) or "(empty log)")

    # actions, each on the selected job's host

    def say(self, text: str) -> None:
        self.query_one("#said", Static).update(text)

    async def act(self, verb: str, state: HostState, name: str) -> None:
        self.say(f"{verb} {name} on {state.host.short}...")
        reply = await actions.act(state.host, verb, [name])
        self.say(f"{state.host.short}: {actions.said(reply)}")
        await refresh(state)
        self.draw()

    def _on_selected(self, verb: str) -> None:
        picked = self.current()
        if picked:
            self.run_worker(self.act(verb, picked[0], str(picked[1].get("name"))), group="act")

    def action_kill(self) -> None:
        picked = self.current()
        if not picked:
            return
        state, job = picked

        def answered(yes: bool | None) -> None:
            if yes:
                self._on_selected("kill")

        self.push_screen(Confirm(f"kill {job.get('name')} on {state.host.short}?"), answered)

    def action_pause_job(self) -> None:
        picked = self.current()
        if picked:
            paused = picked[1].get("state") in ("held", "suspended")
            self._on_selected("resume" if paused else "pause")

    def action_retry(self) -> None:
        self._on_selected("retry")

    def action_details(self) -> None:
        """Enter: the detail and log below grow over the tables, and back."""
        bottom = self.query_one("#bottom")
        self.zoomed = not self.zoomed
        bottom.styles.height = "3fr" if self.zoomed else 10

    def action_add(self) -> None:
        picked = self.current()

        def added(choice: tuple[Host, str, int | None] | None) -> None:
            if choice:
                self.run_worker(self.add(*choice), group="act")

        self.push_screen(AddForm(self.hosts, picked[0].host if picked else None), added)

    async def add(self, host: Host, cmd: str, gpus: int | None) -> None:
        self.say(f"adding to {host.key}...")
        reply = await actions.add(host, cmd, gpus)
        self.say(f"{host.key}: {actions.said(reply)}")
        for s in self.states:
            if s.host == host:
                await refresh(s)
        self.draw()

    async def action_quit(self) -> None:
        self.workers.cancel_all()
        await transport.close(self.hosts)
        self.exit()
