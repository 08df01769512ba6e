"""``gtui add ... -- CMD`` into a running queue is served by gtui.entry with only the socket,
JSON and the queue's paths imported: the same request the protocol's ``Add`` sends, the same
reading of the command line argparse gives, the same messages."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gtui.cli import build_parser
from gtui.commands.add_job import ADD_OP, OPTIONS, ask_add, quick_line
from gtui.core.control import transport
from gtui.core.control.protocol import Add, Ping, Status, to_wire
from gtui.core.control.rpc import send
from gtui.core.paths import ensure_private_dir, queue_paths
from gtui.core.queue.queuefile import load_queue
from tests.cli_helpers import ONE_GATED_JOB, Procs, gate, gtui, release, status
from tests.conftest import write_queue

HEAVY = {
    *("textual", "tomlkit", "rich", "asyncio", "sqlite3", "psutil", "argparse", "dataclasses"),
    *("tempfile", "hashlib"),  # 10 ms and 5 ms: gtui.core.paths finds the folder and the SHA-1
}


def _imported(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``python -X importtime -m gtui ARGS`` and the top-level packages it imported."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "gtui", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
    )
    names = {
        line.split("|")[-1].strip().split(".")[0]
        for line in r.stderr.splitlines()
        if line.startswith("import time:")
    }
    return r, names


def test_an_add_into_a_running_queue_imports_none_of_the_heavy_modules(
    tmp_path: Path, procs: Procs
) -> None:
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate=gate("first")))
    procs.scheduler(q)
    r, names = _imported(
        ["add", str(q), "--gpus", "0", "--name", "a", "--", "echo", "hi"], tmp_path
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "added a to q.toml" in r.stdout
    assert not names & HEAVY, sorted(names & HEAVY)
    assert "gtui" in names  # the probe saw gtui's own imports
    assert "a" in {j["name"] for j in status(q)["jobs"]}
    assert [j.cmd for j in load_queue(q).jobs if j.name == "a"] == ["echo hi"]
    release(q, "first")


def test_a_command_line_the_quick_path_cannot_read_goes_to_the_whole_one(
    tmp_path: Path, procs: Procs
) -> None:
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate=gate("first")))
    procs.scheduler(q)
    r, names = _imported(["add", str(q), "--gp", "0", "--", "true"], tmp_path)  # abbreviation
    assert r.returncode == 0, r.stderr[-2000:]
    assert "argparse" in names
    r = gtui("add", str(q), "--gpus", "x", "--", "true")
    assert r.returncode == 2 and "invalid int value: 'x'" in r.stderr, r.stderr
    r = gtui("add", str(tmp_path / "nope.toml"), "--", "true")
    assert r.returncode == 2 and "no such queue file" in r.stderr, r.stderr
    r = gtui("add", str(q), "--name", "first", "--", "true")  # refused by the scheduler
    assert r.returncode == 2 and r.stderr.startswith("gtui: ") and "already" in r.stderr
    assert "Traceback" not in r.stderr
    release(q, "first")


@pytest.mark.parametrize(
    "argv",
    [
        ["add", "q.toml", "--", "true"],
        ["add", "q.toml", "--gpus", "1", "--mem", "20G", "--", "python", "a.py", "--x", "1"],
        ["add", "--name=n", "q.toml", "--priority", "-3", "--", "true"],
        ["add", "q.toml", "--priority=-3", "--retries", "+2", "--", "a | b"],
        ["add", "q.toml", "--after", "a, b", "--timeout", "4h", "--name", "", "--", "x"],
        ["add", "q.toml", "--gpus", "1", "--gpus", "2", "--", "x"],
        ["add", "q.toml", "--name", "--", "x"],
        ["add", "q.toml", "x", "--", "y"],
        ["add", "q.toml", "--gp", "1", "--", "x"],
        ["add", "q.toml", "--from", "f", "--", "x"],
        ["add", "q.toml", "-h", "--", "x"],
        ["add", "q.toml", "--gpus", "one", "--", "x"],
        ["add", "q.toml", "--"],
        ["add", "q.toml", "true"],
        ["add", "--", "true"],
    ],
)
def test_the_quick_reading_of_a_command_line_is_argparses(argv: list[str]) -> None:
    got = quick_line(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    try:
        ns = build_parser().parse_args(argv[:cut])
    except SystemExit:
        assert got is None  # argparse refuses it: the whole command line says why
        return
    if got is None:
        return  # read by gtui.cli: nothing to compare
    assert got.queue == ns.queue and got.cmd == argv[cut + 1 :]
    for opt in OPTIONS:
        assert getattr(got, opt[2:]) == getattr(ns, opt[2:]), opt


def test_the_quick_options_are_the_add_parsers() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    add = sub.choices["add"]  # type: ignore[index]
    numbers = {
        o: a.type is int
        for a in add._actions
        for o in a.option_strings
        if o.startswith("--") and o not in ("--help", "--from")
    }
    assert numbers == OPTIONS


def _one_line_server(path: Path, reply: bytes) -> tuple[threading.Thread, list[bytes]]:
    """A socket at ``path`` that reads one request line, keeps it and answers ``reply``."""
    got: list[bytes] = []
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(4)

    def serve() -> None:
        with srv:
            for _ in range(2):
                conn, _ = srv.accept()
                with conn:
                    data = b""
                    while not data.endswith(b"\n"):
                        data += conn.recv(1 << 16)
                    got.append(data)
                    conn.sendall(reply)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t, got


def test_the_quick_request_is_the_protocols_add(tmp_path: Path) -> None:
    q = write_queue(tmp_path, ONE_GATED_JOB.format(gate="true"))
    paths = queue_paths(q)
    ensure_private_dir(paths.socket.parent)
    fields: dict[str, object] = {"cmd": "python a.py", "gpus": 1, "after": ["x"], "cwd": "."}
    t, got = _one_line_server(paths.socket, b'{"ok":true,"name":"a-1"}\n')
    assert ask_add(paths, dict(fields)) == "a-1"
    named = send(paths, Add(dict(fields)))
    t.join(10)
    assert named is not None and getattr(named, "name", None) == "a-1"
    mine, theirs = (json.loads(line) for line in got)
    mine.pop("deadline"), theirs.pop("deadline")
    assert mine == theirs == {**to_wire(Add(dict(fields)))}
    assert Add.op == ADD_OP and Ping.op == transport.PING_OP and Status.op == transport.STATUS_OP
