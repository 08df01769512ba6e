"""The control protocol, once: one frozen dataclass per request and per reply.

A request is ``{"op": OP, FIELD: VALUE, ...}`` on one line (JSON), a reply ``{"ok": true,
FIELD: VALUE, ...}`` or ``{"ok": false, "error": TEXT, "exit": CODE}``. Each request class
names its ``op`` and, as its type parameter, the class of its reply; its fields are the keys it
carries. Encoding and decoding are done here for all of them, from the dataclasses' fields, so a
new operation is one dataclass here and one case in the handler (gtui.core.control.handle).

Reading a request checks each field by its type (``Names``: a non-empty list of job names;
``str``: a job's name; ``Fields``: a table of job keys; ``FieldsList``: a non-empty list of
them; ``Where``; ``Gpus``). A flag differs from its default only when given exactly the other
bool (``"wait": false`` for a kill that answers once SIGTERM is sent; ``"kill": true`` for a
stop that kills the jobs first), as the scheduler has always read them. A key the reader does
not know is ignored; a field left out takes its default, and the encoder leaves out a field at
its default (an older scheduler reads it the same way).

Kept free of asyncio: ``gtui add`` imports it before it asks the scheduler, and its whole
budget at 100,000 jobs is 150 ms.

Size: the whole protocol, every request and reply with the codec that reads and writes them;
apart, a field added to a request and the reader that checks its type would drift.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Generic, Literal, TypeVar, get_args, get_type_hints

from gtui.core.errors import GtuiError

TIMEOUT_S = 60.0  # how long a client waits for one request's answer
KILL_TIMEOUT_S = 3600.0  # a kill that waits: TERM, then kill_grace, then KILL

Names = tuple[str, ...]
Fields = dict[str, object]
FieldsList = tuple[Fields, ...]
Where = Literal["up", "down", "top"]
Gpus = tuple[int, ...] | None
MOVES: tuple[str, ...] = get_args(Where)


# -- replies ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Reply:
    """A request done: ``{"ok": true}`` and the reply's fields."""


@dataclasses.dataclass(frozen=True)
class Done(Reply):
    """Done; nothing to tell."""


@dataclasses.dataclass(frozen=True)
class Acted(Reply):
    """The jobs a command on names acted on."""

    names: Names = ()


@dataclasses.dataclass(frozen=True)
class Named(Reply):
    """The job a command on one job acted on (for an ``add``: the name it was given)."""

    name: str = ""


@dataclasses.dataclass(frozen=True)
class StatusReply(Reply):
    """The queue's ``gtui status --json`` document (a scheduler sends it as text in pieces:
    gtui.core.control.server)."""

    status: dict[str, Any] = dataclasses.field(default_factory=dict)


# How a scheduler's status reply begins: the document is sent as text after it, in pieces, and
# passed through as it came (``gtui status --json`` of 100,000 jobs is never decoded).
STATUS_HEAD = '{"ok":true,"status":'


@dataclasses.dataclass(frozen=True)
class Pong(Reply):
    """The scheduler that answered."""

    pid: int | None = None


@dataclasses.dataclass(frozen=True)
class Stopped(Reply):
    """A scheduler that ``stop`` ended: its process, and whether that process ends too (a
    headless ``gtui run``; a dashboard stays open and says the scheduler stopped)."""

    pid: int | None = None
    exits: bool = False


@dataclasses.dataclass(frozen=True)
class Cleared(Reply):
    """The GPUs taken out of quarantine."""

    cleared: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True)
class Refused:
    """A request not done: what a person reads, and the exit status a command exits with
    (None: the client's default)."""

    error: str
    exit: int | None = None


R = TypeVar("R", bound=Reply)


# -- requests ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Request(Generic[R]):
    """One operation. ``op`` is its name on the wire; its reply class is its type parameter."""

    op: ClassVar[str]
    reply: ClassVar[type[Reply]]
    reads: ClassVar[bool] = False  # changes nothing: no outcome to tell when unanswered
    live_only: ClassVar[bool] = False  # only a running scheduler can answer it

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        for base in getattr(cls, "__orig_bases__", ()):
            args = get_args(base)
            if args and isinstance(args[0], type) and issubclass(args[0], Reply):
                cls.reply = args[0]

    @property
    def timeout_s(self) -> float:
        """How long a client waits for the answer."""
        return TIMEOUT_S


@dataclasses.dataclass(frozen=True)
class Kill(Request[Acted]):
    op = "kill"
    names: Names
    wait: bool = True  # False: answer once SIGTERM is sent, not after the whole grace

    @property
    def timeout_s(self) -> float:
        return KILL_TIMEOUT_S if self.wait else TIMEOUT_S


@dataclasses.dataclass(frozen=True)
class Pause(Request[Acted]):
    op = "pause"
    names: Names


@dataclasses.dataclass(frozen=True)
class Resume(Request[Acted]):
    op = "resume"
    names: Names


@dataclasses.dataclass(frozen=True)
class Retry(Request[Acted]):
    op = "retry"
    names: Names


@dataclasses.dataclass(frozen=True)
class Preempt(Request[Acted]):
    """Make room now for the waiting job ``name``: stop the preemptible jobs of lower priority
    it needs gone (the reply names them). ``dry_run``: only name them (asked first)."""

    op = "preempt"
    live_only = True
    name: str
    dry_run: bool = False


@dataclasses.dataclass(frozen=True)
class PauseQueue(Request[Done]):
    op = "pause_queue"


@dataclasses.dataclass(frozen=True)
class ResumeQueue(Request[Done]):
    op = "resume_queue"


@dataclasses.dataclass(frozen=True)
class Reload(Request[Done]):
    """Take the queue file as it is now (an edit made by a command)."""

    op = "reload"


@dataclasses.dataclass(frozen=True)
class Add(Request[Named]):
    """Append a job (its keys as in the queue file) to the queue file."""

    op = "add"
    fields: Fields


@dataclasses.dataclass(frozen=True)
class AddMany(Request[Acted]):
    """Append jobs (each its keys as in the queue file) in one edit of the queue file: all of
    them, or none when one is wrong. Replies with the first name of each."""

    op = "add_many"
    jobs: FieldsList


@dataclasses.dataclass(frozen=True)
class Edit(Request[Named]):
    op = "edit"
    name: str
    fields: Fields  # a None value deletes the key


@dataclasses.dataclass(frozen=True)
class Remove(Request[Named]):
    op = "remove"
    name: str


@dataclasses.dataclass(frozen=True)
class Move(Request[Named]):
    op = "move"
    name: str
    where: Where


@dataclasses.dataclass(frozen=True)
class Status(Request[StatusReply]):
    op = "status"
    reads = True


@dataclasses.dataclass(frozen=True)
class Ping(Request[Pong]):
    op = "ping"
    reads = True
    live_only = True


@dataclasses.dataclass(frozen=True)
class Watch(Request[Done]):
    """Turn the connection into a stream of events (gtui.core.control.server): a late
    watcher asks to be ``replay``-ed the events after scheduler ``pid``'s number ``seq``, else
    after the time ``after``."""

    op = "watch"
    live_only = True
    replay: bool = False
    pid: int | None = None
    seq: int | None = None
    after: float = 0.0


@dataclasses.dataclass(frozen=True)
class Stop(Request[Stopped]):
    """End the scheduler (its jobs go on, or with ``kill`` are killed first)."""

    op = "stop"
    live_only = True
    kill: bool = False

    @property
    def timeout_s(self) -> float:
        return KILL_TIMEOUT_S if self.kill else TIMEOUT_S


@dataclasses.dataclass(frozen=True)
class ClearQuarantine(Request[Cleared]):
    op = "clear_quarantine"
    gpus: Gpus = None  # None: every GPU


# The requests a scheduler knows, in the order its refusal of an unknown one lists them.
REQUESTS: dict[str, type[Request[Any]]] = {
    cls.op: cls
    for cls in (
        Kill, Pause, Resume, Retry, PauseQueue, ResumeQueue, Reload, Add, AddMany, Edit, Remove,
        Move, Status, Ping, Watch, Stop, ClearQuarantine, Preempt,
    )
}  # fmt: skip
READS = frozenset(op for op, cls in REQUESTS.items() if cls.reads)


@dataclasses.dataclass(frozen=True)
class Sync:
    """A watcher's own line on its stream: ``{"sync": id}`` comes back after every event
    published before it (not a request: a connection that is not watching knows no sync)."""

    op: ClassVar[str] = "sync"
    id: object = None


# -- the wire ---------------------------------------------------------------------------------


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = get_type_hints(cls)
    return hints


_HINTS: dict[type, dict[str, Any]] = {}


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _plain(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def to_wire(message: Request[Any] | Sync | Reply | Refused) -> dict[str, Any]:
    """The JSON object of a request (``op`` first), a reply (``ok`` first) or a refusal. A
    field at its default is left out, except in a reply."""
    if isinstance(message, Refused):
        out: dict[str, Any] = {"ok": False, "error": message.error}
        if message.exit is not None:
            out["exit"] = message.exit
        return out
    reply = isinstance(message, Reply)
    out = {"ok": True} if isinstance(message, Reply) else {"op": message.op}
    for f in dataclasses.fields(message):
        value = getattr(message, f.name)
        if reply or value != _default(f):
            out[f.name] = _plain(value)
    return out


def request_of(obj: dict[str, Any]) -> Request[Any]:
    """The request a decoded line asks for; GtuiError (said to the client) when its op is
    unknown or a field has a shape its type does not allow."""
    op = obj.get("op")
    cls = REQUESTS.get(op) if isinstance(op, str) else None
    if cls is None:
        raise GtuiError(f"unknown request {op!r}; this scheduler knows: {', '.join(REQUESTS)}")
    return _read(cls, obj, cls.op)


def sync_of(obj: object) -> Sync | None:
    """The sync a watcher's line asks for, if it is one."""
    if isinstance(obj, dict) and obj.get("op") == Sync.op:
        return Sync(obj.get("id"))
    return None


def reply_of(req: Request[R], obj: dict[str, Any]) -> R:
    """The reply of ``req`` in a scheduler's answer, read as leniently as clients always read
    them: a field of the wrong shape takes its default."""
    cls = req.reply
    kw = {}
    for f in dataclasses.fields(cls):
        value = _lenient(_hints(cls)[f.name], obj.get(f.name))
        kw[f.name] = _default(f) if value is dataclasses.MISSING else value
    reply: R = cls(**kw)  # type: ignore[assignment]
    return reply


def _read(cls: type[Request[Any]], obj: dict[str, Any], op: str) -> Request[Any]:
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        hint = _hints(cls)[f.name]
        default = _default(f)
        raw = obj.get(f.name)
        if hint is bool:
            kw[f.name] = (not default) if raw is (not default) else default
        elif hint is str:
            if not isinstance(raw, str) or not raw:
                raise GtuiError(f"bad request: {op} needs the name of a job")
            kw[f.name] = raw
        elif hint == Names:
            kw[f.name] = _names(op, obj.get(f.name, []))
        elif hint == Fields:
            if not isinstance(raw, dict):
                raise GtuiError(f"bad request: {op} needs fields")
            kw[f.name] = raw
        elif hint == FieldsList:
            if not isinstance(raw, list) or not raw or not all(isinstance(j, dict) for j in raw):
                raise GtuiError(f"bad request: {op} needs a list of jobs' fields")
            kw[f.name] = tuple(raw)
        elif hint == Where:
            if raw not in MOVES:
                raise GtuiError(f"bad request: {op} needs where: {', '.join(MOVES)}")
            kw[f.name] = raw
        elif hint == Gpus:
            if raw is not None and (
                not isinstance(raw, list) or not all(isinstance(g, int) for g in raw)
            ):
                raise GtuiError("bad request: gpus must be a list of GPU indices, or null")
            kw[f.name] = None if raw is None else tuple(raw)
        else:  # a watch's numbers: a wrong shape is taken as not given
            value = _lenient(hint, raw)
            kw[f.name] = default if value is dataclasses.MISSING else value
    return cls(**kw)


def _names(op: str, names: object) -> Names:
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise GtuiError("bad request: names must be a list of job names")
    if not names:
        raise GtuiError(f"{op}: name at least one job")
    return tuple(names)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _lenient(hint: object, value: object) -> Any:
    """``value`` as a field of type ``hint`` holds it, or MISSING when it has another shape."""
    if hint is bool:
        return value is True
    if hint is str:
        return value if isinstance(value, str) else dataclasses.MISSING
    if hint == int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if hint is float:
        return float(value) if _number(value) else dataclasses.MISSING  # type: ignore[arg-type]
    if hint == tuple[int, ...]:
        return tuple(int(g) for g in value) if isinstance(value, list) else dataclasses.MISSING
    if hint == Names:
        return tuple(str(n) for n in value) if isinstance(value, list) else dataclasses.MISSING
    if hint == dict[str, Any]:
        return value if isinstance(value, dict) else dataclasses.MISSING
    return value
