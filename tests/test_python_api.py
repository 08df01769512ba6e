"""The control protocol's dataclasses on the wire, and the Python API (``from gtui import add,
status, wait, log, kill``) with its examples, run end to end against a real ``gtui run`` on
simulated GPUs (a real process, its real socket) and against the saved state with none."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gtui
from gtui.core.control.client import NotAnswering, perform
from gtui.core.control.protocol import (
    REQUESTS,
    Acted,
    Add,
    AddMany,
    Cleared,
    ClearQuarantine,
    Edit,
    Kill,
    Move,
    Named,
    Pause,
    Ping,
    Preempt,
    Refused,
    Remove,
    Resume,
    Retry,
    Stop,
    Stopped,
    Sync,
    Watch,
    reply_of,
    request_of,
    sync_of,
    to_wire,
)
from gtui.core.errors import GtuiError
from gtui.core.paths import queue_paths
from gtui.core.queue.queuefile import load_queue
from tests.cli_helpers import Procs, cleaned_procs, gate, live_state, lock_free, release
from tests.conftest import REPO, write_queue

EXAMPLE = REPO / "examples" / "api.py"
NOTEBOOK = REPO / "examples" / "api.ipynb"


@pytest.fixture(name="procs")
def _procs() -> Iterator[Procs]:
    yield from cleaned_procs()


# -- the protocol on the wire -------------------------------------------------------------------


def test_every_request_comes_back_equal_from_its_wire_form() -> None:
    requests = [
        Kill(("a", "b")),
        Kill(("a",), wait=False),
        Pause(("a",)),
        Add({"cmd": "true", "gpus": 0}),
        AddMany(({"cmd": "true"}, {"name": "b", "cmd": "echo", "gpus": 0})),
        Edit("a", {"mem": "20G", "priority": None}),
        Remove("a"),
        Move("a", "top"),
        Stop(kill=True),
        ClearQuarantine((0, 2)),
        ClearQuarantine(),
        Watch(True, 123, 7, 1.5),
        *(cls() for cls in REQUESTS.values() if not _required(cls)),
    ]
    for req in requests:
        wire = json.loads(json.dumps(to_wire(req)))
        assert request_of(wire) == req, wire
    assert set(REQUESTS) >= {type(r).op for r in requests}


def _required(cls: type) -> bool:
    import dataclasses

    return any(
        f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        for f in dataclasses.fields(cls)
    )


def test_the_wire_form_is_what_older_clients_and_schedulers_send() -> None:
    """A field at its default is left out; the flags are read as the scheduler always read
    them: a kill waits unless ``"wait"`` is exactly false, a stop kills only on exactly true."""
    assert to_wire(Kill(("a",))) == {"op": "kill", "names": ["a"]}
    assert to_wire(Kill(("a",), wait=False)) == {"op": "kill", "names": ["a"], "wait": False}
    assert to_wire(Sync(4)) == {"op": "sync", "id": 4}
    assert request_of({"op": "kill", "names": ["a"], "wait": 0}) == Kill(("a",), wait=True)
    assert request_of({"op": "stop", "kill": 1}) == Stop(kill=False)
    assert request_of({"op": "stop", "kill": False}) == Stop()
    assert request_of({"op": "clear_quarantine", "gpus": None}) == ClearQuarantine()
    # A late watcher's numbers of another shape are taken as not given.
    assert request_of({"op": "watch", "replay": True, "seq": True, "after": "x"}) == Watch(True)
    assert sync_of({"op": "sync", "id": "t"}) == Sync("t") and sync_of({"op": "ping"}) is None


def test_a_request_of_the_wrong_shape_is_refused_by_its_type() -> None:
    bad = {
        "names must be a list of job names": {"op": "pause", "names": "a"},
        "kill: name at least one job": {"op": "kill", "names": []},
        "edit needs the name of a job": {"op": "edit", "name": "", "fields": {}},
        "add needs fields": {"op": "add", "fields": ["cmd"]},
        "move needs where: up, down, top": {"op": "move", "name": "a", "where": "left"},
        "gpus must be a list of GPU indices": {"op": "clear_quarantine", "gpus": "0"},
        "this scheduler knows: kill, pause, resume": {"op": "frobnicate"},
    }
    for words, obj in bad.items():
        with pytest.raises(GtuiError, match=words):
            request_of(obj)


def test_replies_are_read_leniently_and_refusals_keep_their_exit() -> None:
    assert reply_of(Kill(("a",)), {"ok": True, "names": ["a"]}) == Acted(("a",))
    assert reply_of(Add({}), {"ok": True}) == Named("")
    assert reply_of(Stop(), {"ok": True, "pid": True, "exits": 1}) == Stopped(None, False)
    assert reply_of(ClearQuarantine(), {"ok": True, "cleared": [1]}) == Cleared((1,))
    assert to_wire(Acted(("a",))) == {"ok": True, "names": ["a"]}
    assert to_wire(Refused("no", 3)) == {"ok": False, "error": "no", "exit": 3}
    assert to_wire(Refused("no")) == {"ok": False, "error": "no"}


# -- the Python API -----------------------------------------------------------------------------


def queue(tmp: Path) -> Path:
    return write_queue(
        tmp,
        f"""
        [settings]
        poll = "0.2s"
        kill_grace = "1s"

        [[jobs]]
        name = "keep"
        gpus = 0
        cmd = "{gate("keep")}"
        """,
    )


def test_the_example_against_a_real_scheduler(tmp_path: Path, procs: Procs) -> None:
    """examples/api.py adds two jobs to a queue a real ``gtui run`` runs, waits for one, reads
    its log and kills the other, all through the scheduler's socket."""
    q = queue(tmp_path)
    procs.scheduler(q)
    out = subprocess.run(
        [sys.executable, str(EXAMPLE), str(q)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ended: {'hello': 'done'}" in out.stdout
    assert "log of hello: hello from gtui" in out.stdout
    assert "ended: {'slow': 'killed'}" in out.stdout
    assert live_state(q, "hello") == "done" and live_state(q, "slow") == "killed"
    assert live_state(q, "keep") == "running"  # the scheduler's own job went on
    release(q, "keep")


def test_the_example_with_its_own_scheduler(tmp_path: Path) -> None:
    """With no queue given it makes a sample queue on simulated GPUs, starts its own ``gtui
    run``, and stops it at the end (``gtui.stop`` returns once it has exited)."""
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ended: {'slow': 'killed'}" in out.stdout


def test_the_notebook_runs_in_a_running_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notebook's code cells, in order, run as a kernel runs them: inside an event loop
    that is already running (the API then works on a thread of its own)."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert len(code) >= 4
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {}

    async def kernel() -> None:
        for source in code:
            exec(compile(source, str(NOTEBOOK), "exec"), namespace)

    asyncio.run(kernel())
    assert namespace["scheduler"].returncode == 130  # stopped before its queue ended, as documented
    assert lock_free(namespace["queue"])


def test_the_api_with_no_scheduler_changes_the_saved_state(tmp_path: Path) -> None:
    """With none running, the functions do what the commands do: the file and the store."""
    q = write_queue(tmp_path, "[settings]\nfake_gpus = '1x80G'\n")
    name = gtui.add(q, "echo hi", name="one", gpus=0, priority=3)
    assert name == "one"
    spec = load_queue(q).jobs[0]
    assert spec.name == "one" and spec.priority == 3 and spec.cwd is not None
    assert [j["state"] for j in gtui.status(q)["jobs"]] == ["queued"]
    assert gtui.pause(q, "one") == ["one"]
    assert gtui.status(q)["jobs"][0]["state"] == "held"
    gtui.resume(q, "one")
    gtui.pause(q)
    assert gtui.status(q)["paused"] is True
    gtui.resume(q)
    assert gtui.kill(q, "one") == ["one"]
    assert gtui.status(q)["jobs"][0]["state"] == "killed"
    assert gtui.retry(q, "one") == ["one"]
    assert gtui.log(q, "one") == ""  # not started yet
    with pytest.raises(GtuiError, match="no job named 'nope'"):
        gtui.log(q, "nope")
    with pytest.raises(GtuiError, match="nope"):
        gtui.kill(q, "nope")
    assert gtui.stop(q) is False
    with pytest.raises(TimeoutError):
        gtui.wait(q, "one", timeout=0.3)  # no scheduler runs it


def test_the_store_answers_the_edits_and_refuses_what_needs_a_scheduler(tmp_path: Path) -> None:
    """Every request goes through the one handler with no scheduler too: the queue file's
    edits are checked against the saved states as a scheduler checks them."""
    q = write_queue(tmp_path, "[[jobs]]\nname='a'\ncmd='true'\n[[jobs]]\nname='b'\ncmd='true'\n")
    paths = queue_paths(q)
    reply, live = asyncio.run(perform(paths, Edit("b", {"priority": 5})))
    assert reply == Named("b") and not live
    assert load_queue(q).jobs[1].priority == 5
    asyncio.run(perform(paths, Move("b", "up")))
    assert [s.name for s in load_queue(q).jobs] == ["b", "a"]
    asyncio.run(perform(paths, Kill(("a",))))
    with pytest.raises(GtuiError, match="only waiting"):
        asyncio.run(perform(paths, Move("a", "top")))  # killed: it stays where it is
    asyncio.run(perform(paths, Remove("a")))
    assert [s.name for s in load_queue(q).jobs] == ["b"]
    with pytest.raises(NotAnswering):
        asyncio.run(perform(paths, Ping()))


def test_every_request_has_its_case_in_the_one_handler(tmp_path: Path) -> None:
    """Each request of the protocol is done by the handler on a real owner (the store client,
    as with no scheduler); none falls through to "unknown request"."""
    from gtui.core.control.handle import RawReply, handle
    from gtui.core.control.offline import StoreClient

    q = write_queue(tmp_path, "[[jobs]]\nname='a'\ncmd='true'\n[[jobs]]\nname='b'\ncmd='true'\n")
    samples = {
        "kill": Kill(("a",)),
        "pause": Pause(("b",)),
        "resume": Resume(("b",)),
        "retry": Retry(("a",)),
        "add": Add({"name": "c", "cmd": "true"}),
        "add_many": AddMany(({"name": "d", "cmd": "true"}, {"name": "e", "cmd": "true"})),
        "edit": Edit("c", {"priority": 2}),
        "move": Move("b", "top"),
        "remove": Remove("c"),
        "clear_quarantine": ClearQuarantine(),
        "preempt": Preempt("a"),
    }
    refused = {
        "stop": "nothing to stop",
        "watch": "takes over a connection",
        "preempt": "no scheduler runs",
    }
    for op, cls in REQUESTS.items():
        req = samples.get(op) or cls()
        if op in refused:
            with pytest.raises(GtuiError, match=refused[op]):
                asyncio.run(handle(StoreClient(q), req))
            continue
        reply = asyncio.run(handle(StoreClient(q), req))
        if isinstance(reply, RawReply):
            assert json.loads("".join(reply.pieces))["status"]["jobs"], op
        else:
            assert isinstance(reply, cls.reply), op
    assert [s.name for s in load_queue(q).jobs] == ["b", "a", "d", "e"]
