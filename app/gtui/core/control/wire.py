"""The control socket's wire format for the engine's state and events: typed JSON, exact round trip.

Every event of gtui.core.api, and every value they carry (JobView, JobSpec, JobRecord, Settings,
GpuSnapshot, GpusRead), becomes a JSON object and comes back equal: tuples stay tuples, enums stay
enums, None stays None, and the int GPU indices that key a dict come back as ints. No pickle: the
decoder of each dataclass is built from its type hints, so it accepts only the shapes those types
allow (a wrong one raises WireError), and a field added to a dataclass travels the day it is added.

Forward compatible: a key the reader does not know (a newer gtui's field) is ignored, a field
that is missing takes its default.

    encode_event(event) -> {"event": "JobChanged", "data": {...}}
    decode_event(obj) -> JobChanged(...)
    to_json(value) / from_json(Type, obj): any of the dataclasses above (and Hello).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from enum import Enum
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from gtui.core.api import Event, GpusRead, JobChanged, JobRemoved, JobView, QueuePaused
from gtui.core.gpus.snapshot import GpuSnapshot
from gtui.core.model import JobSpec, Settings

WIRE_VERSION = 1

T = TypeVar("T")
Json = Any  # what json.loads gives: dict / list / str / int / float / bool / None
Decoder = Callable[[Json], Any]


class WireError(ValueError):
    """A JSON value that does not have the shape its type needs."""


@dataclasses.dataclass(frozen=True)
class Hello:
    """The first line of a ``watch`` connection: everything a dashboard shows, at one moment."""

    pid: int  # the scheduler's
    queue: str  # the queue file it runs
    jobs: tuple[JobView, ...]  # in queue order
    paused: bool
    gpus: GpusRead | None  # its last GPU read (None before the first)
    settings: Settings
    fake: bool
    version: int = WIRE_VERSION


EVENT_TYPES: dict[str, type[Any]] = {cls.__name__: cls for cls in get_args(Event)}
# What a scheduler numbers and replays to a late watcher (not QueueChanged: unbuilt if untaken)
REPLAYED = (JobChanged, JobRemoved, QueuePaused)


# -- encoding -------------------------------------------------------------------------------


_PLAIN = frozenset({str, int, float, bool, type(None)})
# A dataclass -> its fields, each with whether its type is plain JSON already (copied as is).
_FIELDS: dict[type, tuple[tuple[str, bool], ...]] = {}


def _is_plain(hint: object) -> bool:
    if hint in _PLAIN:
        return True
    origin, args = get_origin(hint), get_args(hint)
    if origin is Union or origin is types.UnionType:
        return all(_is_plain(a) for a in args)
    if origin is Literal:
        return all(type(a) in _PLAIN for a in args)
    return False


def _fields_of(cls: type) -> tuple[tuple[str, bool], ...]:
    hints = get_type_hints(cls)
    return tuple((f.name, _is_plain(hints.get(f.name))) for f in dataclasses.fields(cls))


def to_json(value: object) -> Json:
    """``value`` (a dataclass of the core, or anything inside one) as plain JSON data."""
    cls = type(value)
    if cls in _PLAIN:
        return value
    fields = _FIELDS.get(cls)
    if fields is not None:
        out: dict[str, Json] = {}
        for n, plain in fields:
            v = getattr(value, n)
            out[n] = v if plain and type(v) in _PLAIN else to_json(v)
        return out
    if cls is tuple or cls is list:
        return [to_json(v) for v in value]  # type: ignore[attr-defined]
    if isinstance(value, Enum):
        return to_json(value.value)
    if isinstance(value, dict):
        d: dict[str, Json] = {}
        for k, v in value.items():
            if isinstance(k, bool | Enum) or not isinstance(k, int | str):
                raise TypeError(f"wire: a dict key must be an int or a str, not {k!r}")
            d[str(k)] = to_json(v)
        return d
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        _FIELDS[cls] = _fields_of(cls)
        return to_json(value)
    if isinstance(value, tuple | list):
        return [to_json(v) for v in value]
    for base in (str, bool, int, float):  # a subclass of a plain type
        if isinstance(value, base):
            return base(value)
    raise TypeError(f"wire: no JSON form for {cls.__name__}")


def encode_event(event: Event) -> dict[str, Json]:
    name = type(event).__name__
    if name not in EVENT_TYPES:
        raise TypeError(f"wire: {name} is not an event")
    return {"event": name, "data": to_json(event)}


def decode_event(obj: Json) -> Event:
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        raise WireError('an event must be {"event": NAME, "data": {...}}')
    cls = EVENT_TYPES.get(obj["event"])
    if cls is None:
        raise WireError(f"unknown event {obj['event']!r} (a newer gtui?)")
    event: Event = from_json(cls, obj.get("data"))
    return event


# -- decoding -------------------------------------------------------------------------------


def from_json(cls: type[T], obj: Json) -> T:
    """The inverse of :func:`to_json` for a value of type ``cls``; WireError on a wrong shape."""
    try:
        value: T = _decoder(cls)(obj)
    except WireError:
        raise
    except (TypeError, ValueError, KeyError) as e:
        raise WireError(f"{cls.__name__}: {e}") from None
    return value


_DECODERS: dict[object, Decoder] = {}


def _decoder(hint: object) -> Decoder:
    try:
        return _DECODERS[hint]
    except KeyError:
        pass
    except TypeError:  # an unhashable hint: build it each time
        return _build(hint)
    fn = _build(hint)
    _DECODERS[hint] = fn
    return fn


def _expect(kind: type | tuple[type, ...], what: str) -> Decoder:
    def check(v: Json) -> Json:
        if isinstance(v, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise WireError(f"expected {what}, got {v!r}")
        if not isinstance(v, kind):
            raise WireError(f"expected {what}, got {type(v).__name__}")
        return v

    return check


def _build(hint: object) -> Decoder:
    if hint is Any or hint is object:
        return lambda v: v
    if hint is type(None) or hint is None:
        return _expect(type(None), "null")
    if hint is bool:
        return _expect(bool, "true or false")
    if hint is int:
        return _expect(int, "an integer")
    if hint is float:
        return _expect((int, float), "a number")  # an int stays an int: 60 == 60.0
    if hint is str:
        return _expect(str, "a string")
    if isinstance(hint, type) and issubclass(hint, Enum):
        enum = hint

        def decode_enum(v: Json) -> Any:
            try:
                return enum(v)
            except ValueError:
                raise WireError(f"{v!r} is not a {enum.__name__}") from None

        return decode_enum
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass_decoder(hint)
    origin, args = get_origin(hint), get_args(hint)
    if origin is Union or origin is types.UnionType:
        return _union_decoder(args)
    if origin is Literal:
        allowed = args

        def decode_literal(v: Json) -> Any:
            for a in allowed:
                if v == a and type(v) is type(a):
                    return a
            raise WireError(f"expected one of {', '.join(map(repr, allowed))}, got {v!r}")

        return decode_literal
    if origin is tuple or hint is tuple:
        return _tuple_decoder(args)
    if origin is list or hint is list:
        item = _decoder(args[0]) if args else _decoder(Any)

        def decode_list(v: Json) -> Any:
            if not isinstance(v, list):
                raise WireError(f"expected a list, got {type(v).__name__}")
            return [item(x) for x in v]

        return decode_list
    if origin is dict or hint is dict:
        return _dict_decoder(args)
    raise TypeError(f"wire: no JSON form for {hint!r}")


def _union_decoder(args: tuple[Any, ...]) -> Decoder:
    none = type(None)
    rest = [a for a in args if a is not none]
    arms = [_decoder(a) for a in rest]
    nullable = len(rest) < len(args)
    if len(arms) == 1:
        only = arms[0]
        return (lambda v: None if v is None else only(v)) if nullable else only

    def decode_union(v: Json) -> Any:
        if v is None and nullable:
            return None
        for arm in arms:
            try:
                return arm(v)
            except (WireError, TypeError, ValueError, KeyError):
                continue
        raise WireError(f"{v!r} fits none of {' | '.join(map(_name, args))}")

    return decode_union


def _tuple_decoder(args: tuple[Any, ...]) -> Decoder:
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        item = _decoder(args[0]) if args else _decoder(Any)

        def decode_tuple(v: Json) -> Any:
            if not isinstance(v, list):
                raise WireError(f"expected a list, got {type(v).__name__}")
            return tuple(item(x) for x in v)

        return decode_tuple
    items = [_decoder(a) for a in args]

    def decode_fixed(v: Json) -> Any:
        if not isinstance(v, list) or len(v) != len(items):
            raise WireError(f"expected a list of {len(items)}, got {v!r}")
        return tuple(d(x) for d, x in zip(items, v, strict=True))

    return decode_fixed


def _dict_decoder(args: tuple[Any, ...]) -> Decoder:
    key_hint, value_hint = args if args else (str, Any)
    if key_hint is int:

        def key(k: str) -> Any:
            try:
                return int(k)
            except ValueError:
                raise WireError(f"expected an integer key, got {k!r}") from None

    elif key_hint is str or key_hint is Any:

        def key(k: str) -> Any:
            return k

    else:
        raise TypeError(f"wire: no JSON form for dict keys of {key_hint!r}")
    value = _decoder(value_hint)

    def decode_dict(v: Json) -> Any:
        if not isinstance(v, dict):
            raise WireError(f"expected an object, got {type(v).__name__}")
        return {key(k): value(x) for k, x in v.items()}

    return decode_dict


def _dataclass_decoder(cls: type[Any]) -> Decoder:
    hints = get_type_hints(cls)
    fields = [(f.name, _decoder(hints[f.name])) for f in dataclasses.fields(cls) if f.init]

    def decode_dataclass(v: Json) -> Any:
        if not isinstance(v, dict):
            raise WireError(f"{cls.__name__}: expected an object, got {type(v).__name__}")
        kwargs = {}
        for name, decode in fields:
            if name in v:
                try:
                    kwargs[name] = decode(v[name])
                except WireError as e:
                    raise WireError(f"{cls.__name__}.{name}: {e}") from None
        try:
            return cls(**kwargs)
        except TypeError as e:  # a field without a default is missing
            raise WireError(f"{cls.__name__}: {e}") from None

    return decode_dataclass


def _name(hint: object) -> str:
    return getattr(hint, "__name__", None) or repr(hint)


# -- the values a dashboard needs, by name -------------------------------------------------


def encode_view(view: JobView) -> dict[str, Json]:
    out: dict[str, Json] = to_json(view)
    return out


def decode_view(obj: Json) -> JobView:
    return from_json(JobView, obj)


def encode_spec(spec: JobSpec) -> dict[str, Json]:
    out: dict[str, Json] = to_json(spec)
    return out


def decode_spec(obj: Json) -> JobSpec:
    return from_json(JobSpec, obj)


def encode_settings(settings: Settings) -> dict[str, Json]:
    out: dict[str, Json] = to_json(settings)
    return out


def decode_settings(obj: Json) -> Settings:
    return from_json(Settings, obj)


def encode_snapshot(snapshot: GpuSnapshot) -> dict[str, Json]:
    out: dict[str, Json] = to_json(snapshot)
    return out


def decode_snapshot(obj: Json) -> GpuSnapshot:
    return from_json(GpuSnapshot, obj)


def encode_gpus(gpus: GpusRead | None) -> dict[str, Json] | None:
    return None if gpus is None else dict(to_json(gpus))


def decode_gpus(obj: Json) -> GpusRead | None:
    return None if obj is None else from_json(GpusRead, obj)


def encode_hello(hello: Hello) -> dict[str, Json]:
    out: dict[str, Json] = to_json(hello)
    return out


def decode_hello(obj: Json) -> Hello:
    return from_json(Hello, obj)


__all__ = [
    "EVENT_TYPES",
    "WIRE_VERSION",
    "Hello",
    "WireError",
    "decode_event",
    "decode_gpus",
    "decode_hello",
    "decode_settings",
    "decode_snapshot",
    "decode_spec",
    "decode_view",
    "encode_event",
    "encode_gpus",
    "encode_hello",
    "encode_settings",
    "encode_snapshot",
    "encode_spec",
    "encode_view",
    "from_json",
    "to_json",
]
