"""``gtui fleet``: several servers' queues over ssh.

- ``gtui fleet [HOST:QUEUE...]``: the dashboard (gtui.fleet.ui);
- ``gtui fleet status [--json] [HOST:QUEUE...]``: every host's jobs and GPUs, and which hosts
  could not be reached; exit 0 only when every host answered;
- ``gtui fleet kill|pause|resume|retry HOST:QUEUE JOB...``: the host's own command.

Hosts come from the arguments, else from ``fleet.toml`` (gtui.fleet.config)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from gtui.commands.options import GlobalOptions
from gtui.core.errors import GtuiError
from gtui.fleet import actions, transport
from gtui.fleet.config import Host, find_host, load_hosts
from gtui.fleet.remote import HostState, refresh

EXIT_SOME_UNREACHED = 1
ACTIONS = actions.VERBS


def _hosts_from(words: list[str], remote_gtui: str | None) -> list[Host]:
    return load_hosts(words, remote_gtui)


async def _status(hosts: list[Host]) -> list[HostState]:
    states = [HostState(h) for h in hosts]
    try:
        await asyncio.gather(*(refresh(s) for s in states))
    finally:
        await transport.close(hosts)
    return states


def _job_line(host: str, job: dict[str, Any]) -> str:
    gpus = ",".join(str(g) for g in job.get("gpus") or []) or "-"
    return f"  {job.get('name', '?'):<28} {job.get('state', '?'):<10} gpus {gpus}"


def status(words: list[str], as_json: bool, remote_gtui: str | None) -> int:
    states = asyncio.run(_status(_hosts_from(words, remote_gtui)))
    if as_json:
        doc = {
            "time": round(time.time(), 3),
            "hosts": [s.to_json() for s in states],
            "unreachable": [s.host.key for s in states if not s.answered],
        }
        print(json.dumps(doc, indent=2 if sys.stdout.isatty() else None))
    else:
        for s in states:
            print(f"{s.host.key}: {s.status_line()}")
            if not s.answered:
                continue
            for g in s.gpus:
                used, total = g.get("mem_used_mib", 0), g.get("mem_total_mib", 0)
                print(f"  gpu {g.get('index')}: {used}/{total} MiB, {g.get('util', 0)}% util")
            for job in s.jobs:
                print(_job_line(s.host.key, job))
    return 0 if all(s.answered for s in states) else EXIT_SOME_UNREACHED


async def _act(host: Host, verb: str, names: list[str]) -> transport.Reply:
    try:
        return await actions.act(host, verb, names)
    finally:
        await transport.close([host])


def act(verb: str, words: list[str], remote_gtui: str | None) -> int:
    if len(words) < 2:
        raise GtuiError(f"gtui fleet {verb} needs HOST:QUEUE and at least one JOB")
    target, names = words[0], words[1:]
    try:
        known = load_hosts([], remote_gtui)
    except GtuiError:
        known = []
    host = find_host(known, target, remote_gtui)
    reply = asyncio.run(_act(host, verb, names))
    if reply.problem is not None:
        print(f"gtui fleet: {host.key}: {reply.text}", file=sys.stderr)
        return EXIT_SOME_UNREACHED
    sys.stdout.write(reply.out)
    sys.stderr.write(reply.err)
    return reply.rc


def _options(ns: argparse.Namespace) -> argparse.Namespace:
    """The fleet's options wherever they stand among its words (``status --json h:q``)."""
    p = argparse.ArgumentParser(prog="gtui fleet")
    p.add_argument("words", nargs="*")
    p.add_argument("--json", action="store_true")
    p.add_argument("--remote-gtui")
    inner = p.parse_intermixed_args(list(ns.words or []))
    inner.json = inner.json or ns.json
    inner.remote_gtui = inner.remote_gtui or ns.remote_gtui
    return inner


def main(ns: argparse.Namespace, opts: GlobalOptions) -> int:
    ns = _options(ns)
    words: list[str] = list(ns.words or [])
    remote_gtui: str | None = ns.remote_gtui
    if words and words[0] == "status":
        return status(words[1:], ns.json, remote_gtui)
    if ns.json:
        raise GtuiError("--json goes with gtui fleet status")
    if words and words[0] in ACTIONS:
        return act(words[0], words[1:], remote_gtui)
    hosts = _hosts_from(words, remote_gtui)
    from gtui.fleet.ui.app import FleetApp  # textual only for the dashboard

    FleetApp(hosts).run()
    return 0
