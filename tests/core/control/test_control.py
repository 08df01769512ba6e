"""The control socket's protocol, against a real server on a real Unix socket.

The engine behind it is a small recording object with the engine's async command methods (the
socket has no logic of its own, so this is the unit under test); tests/commands/test_cli_control.py drives
a real scheduler end to end.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from gtui.core.control import server as server_module
from gtui.core.control.server import MAX_LINE, ControlServer, call, request
from gtui.core.errors import GtuiError
from gtui.core.paths import queue_paths


class RecordingEngine:
    """Records each command; ``fail`` makes the next commands raise."""

    def __init__(self, queue_path: Path | None = None) -> None:
        self.queue_path = queue_path or Path("/nonexistent/q.toml")
        self.calls: list[tuple[str, Any]] = []
        self.fail: BaseException | None = None
        self.entered = asyncio.Event()
        self.gate: asyncio.Event | None = None  # when set, commands wait for it

    async def _do(self, op: str, arg: Any = None) -> None:
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(0)
        if self.fail is not None:
            raise self.fail
        self.calls.append((op, arg))

    async def kill(self, names: Sequence[str], *, wait: bool = True) -> None:
        await self._do("kill", list(names))

    async def pause(self, names: Sequence[str]) -> None:
        await self._do("pause", list(names))

    async def resume(self, names: Sequence[str]) -> None:
        await self._do("resume", list(names))

    async def retry(self, names: Sequence[str]) -> None:
        await self._do("retry", list(names))

    async def pause_queue(self) -> None:
        await self._do("pause_queue")

    async def resume_queue(self) -> None:
        await self._do("resume_queue")

    async def reload(self) -> None:
        await self._do("reload")

    async def add(self, fields: dict[str, object]) -> str:
        await self._do("add", fields)
        return str(fields.get("name", "job-1"))

    def status_json(self) -> dict[str, Any]:
        return {"jobs": [{"name": "a", "state": "running"}], "paused": False}

    broken_status = False

    def status_chunks(self) -> Iterator[str]:
        text = json.dumps(self.status_json())
        yield text[:10]
        if self.broken_status:
            raise RuntimeError("a bug behind the status")
        yield text[10:]


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private XDG_RUNTIME_DIR with a short path (Unix socket paths are limited)."""
    d = Path(tempfile.mkdtemp(prefix="gt", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    yield d
    subprocess.run(["rm", "-rf", str(d)], check=False)


@pytest.fixture
def queue(queue: Path, runtime: Path) -> Path:
    """The shared one-job queue, its socket in the short private runtime folder."""
    return queue


@pytest.fixture
async def served(queue: Path) -> AsyncIterator[tuple[ControlServer, RecordingEngine]]:
    engine = RecordingEngine(queue)
    server = ControlServer()  # the queue comes from the engine, as Engine.start does it
    await server.start(engine)
    yield server, engine
    await server.close()


async def ask(queue: Path, op: str, **kw: Any) -> dict[str, Any] | None:
    """The real (blocking) client, off the event loop the server runs on."""
    return await asyncio.to_thread(request, queue, op, **kw)


async def test_requests_map_onto_engine_commands(
    queue: Path, served: tuple[ControlServer, RecordingEngine]
) -> None:
    _, engine = served
    for op in ("kill", "pause", "resume", "retry"):
        assert await ask(queue, op, names=["a", "b"]) == {"ok": True, "names": ["a", "b"]}
    for op in ("pause_queue", "resume_queue", "reload"):
        assert await ask(queue, op) == {"ok": True}
    assert await ask(queue, "add", fields={"name": "n", "cmd": "x"}) == {"ok": True, "name": "n"}
    assert engine.calls == [
        ("kill", ["a", "b"]),
        ("pause", ["a", "b"]),
        ("resume", ["a", "b"]),
        ("retry", ["a", "b"]),
        ("pause_queue", None),
        ("resume_queue", None),
        ("reload", None),
        ("add", {"name": "n", "cmd": "x"}),
    ]
    reply = await ask(queue, "status")
    assert reply is not None and reply["status"]["jobs"][0]["name"] == "a"
    reply = await ask(queue, "ping")
    assert reply == {"ok": True, "pid": os.getpid()}


async def test_a_status_that_breaks_halfway_is_no_reply_and_the_server_survives(
    queue: Path, served: tuple[ControlServer, RecordingEngine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The status is sent in pieces as they are made: one that cannot be made must not leave
    the client with half a document taken for a whole one. Before anything is sent (the first
    64 KiB are held), the client gets an error reply; after, no reply."""
    _, engine = served
    engine.broken_status = True
    reply = await ask(queue, "status")
    assert reply == {"ok": False, "error": "internal error: RuntimeError"}
    with monkeypatch.context() as m:
        m.setattr(server_module, "HOLD_REPLY", 1)  # the first piece goes out at once
        with pytest.raises(GtuiError, match=r"the scheduler \(pid \d+\) of q.toml could not"):
            await ask(queue, "status")
    engine.broken_status = False
    reply = await ask(queue, "status")
    assert reply is not None and reply["status"]["jobs"][0]["name"] == "a"


async def test_errors_are_replies_and_the_server_survives(
    queue: Path, served: tuple[ControlServer, RecordingEngine]
) -> None:
    _, engine = served
    engine.fail = GtuiError("no job named zz in q.toml (jobs: a, b)")
    reply = await ask(queue, "kill", names=["zz"])
    assert reply == {"ok": False, "error": "no job named zz in q.toml (jobs: a, b)", "exit": 2}
    with pytest.raises(GtuiError, match="no job named zz") as err:
        await asyncio.to_thread(call, queue, "kill", names=["zz"])
    assert err.value.exit_code == 2

    engine.fail = RuntimeError("boom\nsecond line")
    reply = await ask(queue, "pause", names=["a"])
    assert reply is not None and not reply["ok"]
    assert reply["error"] == "internal error: RuntimeError: boom"

    engine.fail = None
    assert await ask(queue, "frobnicate") == {
        "ok": False,
        "error": "unknown request 'frobnicate'; this scheduler knows: kill, pause, resume, "
        "retry, pause_queue, resume_queue, reload, add, add_many, edit, remove, move, status, "
        "ping, watch, stop, clear_quarantine, preempt",
        "exit": 2,
    }
    reply = await ask(queue, "kill", names=[])
    assert reply is not None and not reply["ok"] and "at least one job" in reply["error"]
    reply = await ask(queue, "kill", names="a")
    assert reply is not None and not reply["ok"] and "names must be a list" in reply["error"]
    assert await ask(queue, "ping") is not None
    assert engine.calls == []


def raw_exchange(path: Path, payload: bytes) -> list[dict[str, Any]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return [json.loads(line) for line in data.splitlines()]


async def test_several_requests_on_one_connection_and_bad_lines(
    queue: Path, served: tuple[ControlServer, RecordingEngine]
) -> None:
    server, engine = served
    payload = b'{"op":"pause","names":["a"]}\n\nnot json\n[1]\n{"op":"resume","names":["a"]}\n'
    replies = await asyncio.to_thread(raw_exchange, server.path, payload)
    assert [r["ok"] for r in replies] == [True, False, False, True]
    assert replies[1]["error"] == "bad request: not JSON"
    assert engine.calls == [("pause", ["a"]), ("resume", ["a"])]


async def test_an_oversized_request_is_refused_and_the_server_survives(
    queue: Path, served: tuple[ControlServer, RecordingEngine]
) -> None:
    server, engine = served
    huge = b'{"op":"kill","names":["' + b"x" * (MAX_LINE + 10) + b'"]}\n'
    replies = await asyncio.to_thread(raw_exchange, server.path, huge)
    assert replies == [{"ok": False, "error": f"request over {MAX_LINE} bytes"}]
    with pytest.raises(GtuiError, match="request over"):
        await asyncio.to_thread(request, queue, "kill", names=["x" * MAX_LINE])
    assert await ask(queue, "ping") is not None
    assert engine.calls == []


async def test_socket_is_0600_in_a_0700_dir_and_removed_at_close(queue: Path) -> None:
    server = ControlServer(queue)
    await server.start(RecordingEngine())
    path = server.path
    assert path == queue_paths(queue).socket
    st = path.lstat()
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    await server.close()
    assert not path.exists()
    assert await ask(queue, "ping") is None
    await server.close()  # idempotent


async def test_close_drops_idle_clients(queue: Path) -> None:
    server = ControlServer(queue)
    await server.start(RecordingEngine())
    reader, writer = await asyncio.open_unix_connection(str(server.path))
    await asyncio.sleep(0.05)
    await asyncio.wait_for(server.close(), 10)
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()


async def test_close_lets_a_request_in_progress_answer(queue: Path) -> None:
    """``gtui kill`` of the last job lets ``gtui run`` finish: the kill must still be answered."""
    engine = RecordingEngine(queue)
    engine.gate = asyncio.Event()
    server = ControlServer(queue)
    await server.start(engine)
    asked = asyncio.create_task(ask(queue, "kill", names=["a"]))
    await asyncio.wait_for(engine.entered.wait(), 10)
    closing = asyncio.create_task(server.close())
    await asyncio.sleep(0.05)
    assert not closing.done()  # waiting for the request in progress
    engine.gate.set()
    await asyncio.wait_for(closing, 10)
    assert await asyncio.wait_for(asked, 10) == {"ok": True, "names": ["a"]}


async def test_a_scheduler_that_goes_away_without_answering_is_an_error(queue: Path) -> None:
    path = queue_paths(queue).socket
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.close()

    server = await asyncio.start_unix_server(hang_up, path=str(path))
    try:
        with pytest.raises(GtuiError, match="stopped before it answered"):
            await asyncio.to_thread(request, queue, "kill", names=["a"])
    finally:
        server.close()


async def test_no_scheduler_means_none(queue: Path) -> None:
    assert await ask(queue, "ping") is None  # no runtime dir, no socket
    path = queue_paths(queue).socket
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # a socket file nobody listens on: what a crashed gtui leaves
    dead.close()
    assert path.exists()
    assert await ask(queue, "ping") is None


async def test_a_stale_socket_is_replaced_but_a_live_one_is_not(queue: Path) -> None:
    path = queue_paths(queue).socket
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    first = ControlServer(queue)
    await first.start(RecordingEngine())
    try:
        assert await ask(queue, "ping") is not None
        second = ControlServer(queue)
        with pytest.raises(GtuiError, match="already answers"):
            await second.start(RecordingEngine())
        assert await ask(queue, "ping") is not None  # the live one kept its socket
    finally:
        await first.close()


async def test_something_else_in_the_way_is_not_removed(queue: Path) -> None:
    path = queue_paths(queue).socket
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text("precious")
    with pytest.raises(GtuiError, match="in the way"):
        await ControlServer(queue).start(RecordingEngine())
    assert path.read_text() == "precious"


async def test_a_reply_that_never_comes_times_out(queue: Path) -> None:
    path = queue_paths(queue).socket
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(str(path))
    mute.listen(1)  # accepts (in the kernel) but never answers
    try:
        with pytest.raises(GtuiError, match=r"did not answer within 0\.3s"):
            await asyncio.to_thread(request, queue, "ping", timeout=0.3)
    finally:
        mute.close()


OTHER_USER_CLIENT = """
import json, os, socket, sys
os.setgid(65534)
os.setuid(65534)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b'{"op": "kill", "names": ["a"]}\\n')
print(s.recv(65536).decode().strip())
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
async def test_another_uid_is_refused_even_if_the_modes_let_it_in(
    queue: Path, served: tuple[ControlServer, RecordingEngine]
) -> None:
    server, engine = served
    # Defeat the first two defences on purpose, to see the third (SO_PEERCRED) hold.
    for p in (*reversed(server.path.parents[:-1]), server.path.parent):
        if p.stat().st_uid == 0 and p != Path("/tmp"):
            os.chmod(p, p.stat().st_mode | 0o711)
    os.chmod(server.path, 0o666)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", OTHER_USER_CLIENT, str(server.path), stdout=subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0
    reply = json.loads(out)
    assert reply == {"ok": False, "error": "refused: uid 65534 does not own gtui"}
    assert engine.calls == []


async def test_a_socket_path_that_cannot_be_bound_is_a_plain_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    q = tmp_path / "q.toml"
    q.write_text("")
    with pytest.raises(GtuiError, match="cannot listen on"):
        await ControlServer(q).start(RecordingEngine(q))


def test_recent_events_are_replayed_after_a_number_or_a_time_and_say_what_is_gone() -> None:
    """What a watcher that came late is replayed (the socket's ``watch`` with ``replay``): the
    events after its last one, or after its last read of the saved state; once the oldest
    are dropped, asking for them says so."""
    from gtui.core.api import QueuePaused
    from gtui.core.control.server import Recent

    recent = Recent(size=3)
    events = [QueuePaused(i % 2 == 0) for i in range(5)]
    for e in events[:3]:
        recent(e)
    assert recent.since(1) == (events[1:3], False)
    assert recent.after(0.0) == (events[:3], False)
    for e in events[3:]:
        recent(e)
    assert recent.seq == 5
    assert recent.since(2) == (events[2:], False)
    assert recent.since(1) == (events[2:], True)  # number 2 is gone
    assert recent.after(0.0) == (events[2:], True)
