"""JSON <-> dataclass conversion for the wire types in :mod:`agentbox.models`.

A wire type is a dataclass whose public field names are the JSON names of its schema in
api/openapi.yaml. Fields whose name starts with an underscore are the SDK's own (a reference to
the client, say) and never go on the wire.

Decoding ignores members it does not know, so an SDK keeps working against a newer daemon that
added fields; a missing member keeps the field's default. Encoding leaves out fields that are
None, as the daemon's Go types leave out empty optional fields.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as _dt
import re
import typing
from typing import Any, Dict, Type, TypeVar, Union

T = TypeVar("T")

_hints_cache: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    h = _hints_cache.get(cls)
    if h is None:
        h = typing.get_type_hints(cls)
        _hints_cache[cls] = h
    return h


def wire_fields(cls: type) -> list:
    """The JSON member names of a wire type, in declaration order."""
    return [f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")]


def decode(cls: Type[T], obj: Any) -> T:
    """Build a wire type from a decoded JSON object."""
    if not isinstance(obj, dict):
        raise ValueError(f"{cls.__name__}: expected a JSON object, got {type(obj).__name__}")
    hints = _hints(cls)
    kwargs = {}
    for name in wire_fields(cls):
        if name in obj:
            kwargs[name] = _convert(hints[name], obj[name], f"{cls.__name__}.{name}")
    return cls(**kwargs)  # type: ignore[call-arg]


def _convert(tp: Any, v: Any, where: str) -> Any:
    if v is None:
        return None
    if tp is Any:
        return v
    origin = typing.get_origin(tp)
    if origin is Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(args[0], v, where) if len(args) == 1 else v
    if origin in (list, typing.List):
        (item,) = typing.get_args(tp) or (Any,)
        return [_convert(item, x, where) for x in v]
    if origin in (dict, typing.Dict):
        _, val = typing.get_args(tp) or (str, Any)
        return {k: _convert(val, x, where) for k, x in v.items()}
    if dataclasses.is_dataclass(tp):
        return decode(tp, v)
    if tp is bytes:
        return base64.b64decode(v)
    if tp is _dt.datetime:
        return parse_time(v)
    if tp is float:
        return float(v)
    if tp is int:
        return int(v)
    if tp is bool:
        return bool(v)
    if tp is str:
        return str(v)
    return v


def encode(obj: Any) -> Any:
    """Turn a wire type (or a list or dict of them) into JSON-ready values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {}
        for name in wire_fields(type(obj)):
            v = getattr(obj, name)
            if v is None:
                continue
            out[name] = encode(v)
        return out
    if isinstance(obj, (bytes, bytearray)):
        return base64.b64encode(bytes(obj)).decode("ascii")
    if isinstance(obj, _dt.datetime):
        return format_time(obj)
    if isinstance(obj, (list, tuple)):
        return [encode(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    return obj


_frac = re.compile(r"\.(\d+)")


def parse_time(s: str) -> _dt.datetime:
    """Parse an RFC 3339 time as the daemon writes it (Z or an offset, up to nanoseconds).

    datetime.fromisoformat of Python 3.9 takes neither "Z" nor more than six fractional digits.
    """
    s = s.strip()
    if s.endswith(("Z", "z")):
        s = s[:-1] + "+00:00"
    s = _frac.sub(lambda m: "." + (m.group(1) + "000000")[:6], s, count=1)
    return _dt.datetime.fromisoformat(s)


def format_time(t: _dt.datetime) -> str:
    """Format a time as RFC 3339; a naive time is taken as UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    s = t.isoformat()
    return s[:-6] + "Z" if s.endswith("+00:00") else s
