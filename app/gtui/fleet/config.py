"""The fleet's hosts: ``fleet.toml`` in the user's config folder, or ``HOST:QUEUE`` arguments.

A host is where ``ssh NAME`` leads (an alias of the user's ssh config works), the path of its
queue file there, and the commands that reach it: ``ssh`` (default ``$GTUI_SSH`` or ``ssh``)
and ``gtui`` (default ``gtui``), each split like a shell line so they may carry options."""

from __future__ import annotations

import os
import shlex
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gtui.core.errors import GtuiError

KEYS = ("name", "queue", "ssh", "gtui", "label")


@dataclass(frozen=True)
class Host:
    """One host's queue: ``label`` tells it apart on screen (two queues on one host)."""

    name: str
    queue: str
    ssh: tuple[str, ...] = ("ssh",)
    gtui: tuple[str, ...] = ("gtui",)
    label: str = ""

    @property
    def key(self) -> str:
        """How the user names it: ``HOST:QUEUE`` unless a label was given."""
        return self.label or f"{self.name}:{self.queue}"

    @property
    def short(self) -> str:
        """How a table column names it: the label, else the host's name."""
        return self.label or self.name


def fleet_file() -> Path:
    """``$XDG_CONFIG_HOME/gtui/fleet.toml`` (``~/.config`` without it)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "gtui" / "fleet.toml"


def default_ssh() -> tuple[str, ...]:
    return tuple(shlex.split(os.environ.get("GTUI_SSH") or "ssh"))


def _words(value: object, what: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, str) or not value.strip():
        raise GtuiError(
            f'{where}: {what} must be a command line in a string, e.g. {what} = "{what}"'
        )
    return tuple(shlex.split(value))


def parse_hosts(
    text: str, source: str = "fleet.toml", remote_gtui: str | None = None
) -> list[Host]:
    """The ``[[host]]`` tables of a fleet file; every mistake named with the host it is in."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise GtuiError(f"{source}: not valid TOML: {e}") from None
    extra = [k for k in doc if k != "host"]
    if extra:
        raise GtuiError(f"{source}: unknown key {extra[0]!r}; the file holds [[host]] tables only")
    tables = doc.get("host", [])
    if not isinstance(tables, list) or not tables:
        raise GtuiError(f'{source}: no [[host]] table; each needs name = "..." and queue = "..."')
    hosts: list[Host] = []
    for i, t in enumerate(tables, 1):
        where = f"{source}: host {i}"
        unknown = [k for k in t if k not in KEYS]
        if unknown:
            raise GtuiError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(KEYS)})")
        for need in ("name", "queue"):
            if not isinstance(t.get(need), str) or not t[need].strip():
                raise GtuiError(f'{where}: {need} = "..." is missing or empty')
        where = f"{source}: host {t['name']!r}"
        ssh = _words(t["ssh"], "ssh", where) if "ssh" in t else default_ssh()
        if "gtui" in t:
            gtui = _words(t["gtui"], "gtui", where)
        else:
            gtui = tuple(shlex.split(remote_gtui or "gtui"))
        label = t.get("label", "")
        if not isinstance(label, str):
            raise GtuiError(f"{where}: label must be a string")
        hosts.append(Host(t["name"].strip(), t["queue"].strip(), ssh, gtui, label.strip()))
    seen: set[str] = set()
    for h in hosts:
        if h.key in seen:
            raise GtuiError(f'{source}: {h.key} is listed twice; give one a label = "..."')
        seen.add(h.key)
    return hosts


def parse_target(arg: str, remote_gtui: str | None = None) -> Host:
    """``HOST:QUEUE`` from the command line."""
    name, sep, queue = arg.partition(":")
    if not sep or not name or not queue:
        raise GtuiError(f"{arg!r}: write HOST:QUEUE, e.g. gpu1:~/q.toml")
    return Host(name, queue, default_ssh(), tuple(shlex.split(remote_gtui or "gtui")))


def load_hosts(args: Sequence[str], remote_gtui: str | None = None) -> list[Host]:
    """The hosts named on the line, else those of the fleet file."""
    if args:
        return [parse_target(a, remote_gtui) for a in args]
    path = fleet_file()
    if not path.exists():
        raise GtuiError(
            f"no hosts: name them as HOST:QUEUE, or list them in {path} "
            '([[host]] name = "gpu1" queue = "~/q.toml")'
        )
    return parse_hosts(path.read_text(), str(path), remote_gtui)


def find_host(hosts: Sequence[Host], target: str, remote_gtui: str | None = None) -> Host:
    """A host of the fleet by its key (label or HOST:QUEUE) or name; else a new HOST:QUEUE."""
    for h in hosts:
        if target in (h.key, h.name, f"{h.name}:{h.queue}"):
            return h
    return parse_target(target, remote_gtui)
